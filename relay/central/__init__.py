"""Standalone mode ("central" in code): the central feature-flag service itself."""
