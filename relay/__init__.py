"""relay: a feature-flag metrics relay and small central service, wire-compatible with Unleash."""
