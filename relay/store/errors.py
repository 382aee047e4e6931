"""The one storage failure the rest of the service knows, whatever the backend.

The API middleware turns it into 503 with a JSON body (SDKs keep their counts and retry on
5xx) and the CLI into one line on stderr, so neither needs to know SQLite or PostgreSQL.
"""

from __future__ import annotations


class StorageError(Exception):
    """The database cannot be read or written (disk full, read-only, corrupt, locked, or a
    PostgreSQL server that is down, refusing connections or gone mid-transaction)."""
