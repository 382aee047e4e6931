"""What the domain and the stores raise when a request cannot be served.

They say what went wrong, never how to answer it: the API layer chooses each one's HTTP
status and body in one place (``relay.api.errors.from_domain``), and the command line turns
them into a line on stderr.
"""

from __future__ import annotations


class DomainError(Exception):
    """A request the service refuses or cannot serve now; ``message`` is for the caller."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidInput(DomainError):
    """Input the wire models accept but the domain cannot (a time outside years 1..9999, a
    client key without an environment...). ``path`` is the JSON pointer of the bad value."""

    def __init__(self, message: str, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path


class NotFound(DomainError):
    """The named record does not exist."""


class Conflict(DomainError):
    """The change conflicts with a record that exists (a name already taken)."""


class InvalidOperation(DomainError):
    """An operation Unleash's rules forbid as things stand, whoever asks (deleting the
    default project or one that still has flags, a second level of dependencies, archiving
    a flag others depend on): Unleash's InvalidOperationError."""


class Unauthorized(DomainError):
    """The key is not valid (any more): the upstream that knows it said so."""


class Forbidden(DomainError):
    """The key is valid but may not do this: the upstream that knows it said so."""


class KeyReused(DomainError):
    """An ``Idempotency-Key`` the caller already used for a different request."""


class Unstorable(DomainError):
    """A request whose data the database refused (a value or a key it cannot hold) although
    validation let it through: retrying it cannot help. Only that request fails."""


class Unavailable(DomainError):
    """A dependency (the upstream) cannot answer now; the caller should retry later."""


class Unpaid(Unavailable):
    """A relay's buffer is full, and the key's own buffered counts cannot make room for its
    new ones (``relay.store.own_room``): no other key's counts ever do."""


class Throttled(Unavailable):
    """A dependency asked to be called less: the caller should retry after ``retry_after``
    seconds."""

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class StorageError(Exception):
    """The database cannot be read or written (disk full, read-only, corrupt, locked, or a
    PostgreSQL server that is down, refusing connections or gone mid-transaction). Its
    message is for the log, not for callers."""


class DataRefused(StorageError):
    """The database refused the data of a write (a value out of range, a key too large to
    index) rather than the write itself: the same data would fail again, other data not."""


class DiskFull(StorageError):
    """The disk holding the database is full: nothing more can be written until space is
    freed."""
