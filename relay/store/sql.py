"""What the stores need of a database, whichever backend holds it.

The stores (metrics, projects, tokens) are written once against these protocols in the SQL
both SQLite and PostgreSQL understand: ``?`` placeholders (the PostgreSQL backend numbers
them), ``ON CONFLICT (target) DO ...`` upserts with qualified column names, ``RETURNING``.
So the two backends cannot drift apart in behaviour; only connections, migrations and error
mapping differ (``sqlite.py``, ``postgres.py``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from contextlib import AbstractAsyncContextManager
from importlib import resources
from typing import Any, Protocol, TypeVar

T = TypeVar("T")

CENTRAL_SCHEMA = ("ingest", "central")
BUFFER_SCHEMA = ("ingest", "buffer")
CACHE_SCHEMA = ("cache",)


class Row(Protocol):
    """A result row: ``sqlite3.Row`` and ``asyncpg.Record`` both index by name and position."""

    def __getitem__(self, key: str | int, /) -> Any: ...


class Transaction(Protocol):
    """One open write transaction; committed when its ``transaction()`` block exits."""

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Run one statement; the number of rows it inserted, updated or deleted."""
        ...

    async def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None: ...

    async def fetch_all(self, sql: str, params: Sequence[Any] = ()) -> Sequence[Row]: ...

    async def lock(self, key: int) -> None:
        """Wait for the lock named ``key``, held until this transaction ends: of all the
        transactions that take it, one at a time runs. PostgreSQL: an advisory lock, released
        too when the connection drops; SQLite: a no-op, its write transactions take turns."""
        ...


class Database(Protocol):
    async def open(self) -> None: ...

    async def close(self) -> None: ...

    def transaction(self) -> AbstractAsyncContextManager[Transaction]: ...

    async def run(self, work: Callable[[Transaction], Awaitable[T]]) -> T:
        """``work`` in one write transaction, committed when it returns. It may await the
        transaction's methods and nothing else: SQLite runs it whole on its writer thread."""
        ...

    async def fetch_all(self, sql: str, params: Sequence[Any] = ()) -> Sequence[Row]: ...

    async def fetch_one(self, sql: str, params: Sequence[Any] = ()) -> Row | None: ...


ROWS_PER_STATEMENT = 100


async def upsert(
    tx: Transaction, insert: str, conflict: str, rows: Sequence[Sequence[Any]]
) -> None:
    """``insert VALUES (...), (...) conflict``, up to ``ROWS_PER_STATEMENT`` rows a statement.

    One statement for many rows rather than ``executemany``: on SQLite each row of an
    ``executemany`` is a hand-over of the GIL and a wait to get it back from a busy event loop,
    all while holding the write lock (alone, 145 against 82 us for a bench group's rows).
    ``rows`` must not repeat a conflict key: PostgreSQL refuses to update a row twice in one
    statement."""
    for start in range(0, len(rows), ROWS_PER_STATEMENT):
        chunk = rows[start : start + ROWS_PER_STATEMENT]
        marks = "(" + ", ".join(["?"] * len(chunk[0])) + ")"
        await tx.execute(
            f"{insert} VALUES {', '.join([marks] * len(chunk))} {conflict}",
            [value for row in chunk for value in row],
        )


def migration_scripts(folders: Sequence[str], root: str = "") -> list[tuple[str, str]]:
    """``(version, sql)`` of ``migrations/[root/]<folder>/NNNN_*.sql`` in order of application.

    Versions are ``<folder>/<NNNN_name>`` for both backends, so one schema history is
    recorded the same way whichever database holds it."""
    base = resources.files("relay.store").joinpath("migrations")
    if root:
        base = base.joinpath(root)
    scripts = []
    for folder in folders:
        files = sorted(
            (f for f in base.joinpath(folder).iterdir() if f.name.endswith(".sql")),
            key=lambda f: f.name,
        )
        scripts += [
            (f"{folder}/{f.name.removesuffix('.sql')}", f.read_text(encoding="utf-8"))
            for f in files
        ]
    return scripts
