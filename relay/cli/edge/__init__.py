"""Unleash Edge's command line on relay: ``relay edge|offline|health|ready`` with Edge's
options and environment variables (``options``: the one table of them, also the docs')."""
