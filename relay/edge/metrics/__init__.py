"""Relay mode's counts: buffered durably, cut into batches, flushed upstream once."""
