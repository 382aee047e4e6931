"""Relay mode's flags: a durable copy of the upstream's per scope, served to SDKs, and
evaluated for frontend keys."""
