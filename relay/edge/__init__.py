"""Relay mode ("edge" in code): buffer SDK metrics durably and carry them to the upstream,
pass the rest through."""
