"""The domain: what a request means once the wire format is gone. No I/O: no aiohttp, no
database, no settings (import-linter checks it)."""
