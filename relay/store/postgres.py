"""One PostgreSQL database shared by any number of standalone instances: a connection pool,
migrations under an advisory lock, write transactions, and error mapping.

The stores speak the SQL of ``relay.store.sql`` with ``?`` placeholders; they are numbered
here (``$1``, ``$2``...) for asyncpg. Unlike SQLite there is no process-wide write lock:
concurrency between transactions (of this instance or another) is PostgreSQL's, so the
stores decide conflicts with ``ON CONFLICT`` and touch rows in sorted order.

Every failure to reach or use the server (down at start-up, restarted, connections
terminated, a timeout) becomes ``StorageError``: requests get 503 with a JSON body, and the
pool opens fresh connections on the next request, so the service recovers by itself once the
server is back.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator, Sequence
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urlsplit

import asyncpg
from asyncpg.pool import PoolConnectionProxy

from relay.core.errors import DataRefused, StorageError
from relay.store.sql import T, Transaction, migration_scripts

log = logging.getLogger(__name__)

# pg_advisory_xact_lock key of schema migrations: instances starting at once take turns.
MIGRATION_LOCK = 0x72656C6179  # "relay"

_FAILURES = (
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    asyncpg.exceptions.InternalClientError,  # a connection killed mid-operation
    OSError,
    TimeoutError,
)


def describe(url: str) -> str:
    """``host:port/database`` of a URL, for messages: never the password."""
    parts = urlsplit(url)
    host = parts.hostname or "localhost"
    port = f":{parts.port}" if parts.port else ""
    return f"{host}{port}{parts.path or '/'}"


@functools.lru_cache(maxsize=256)
def numbered(sql: str) -> str:
    """``?`` placeholders as asyncpg's ``$1``, ``$2``... (the stores' SQL has no ``?`` in a
    string literal)."""
    counter = iter(range(1, 1 << 16))
    return re.sub(r"\?", lambda _: f"${next(counter)}", sql)


def _rows_affected(status: str) -> int:
    """``INSERT 0 1`` / ``UPDATE 2`` / ``DELETE 0``: the last word of a command status."""
    last = status.rsplit(" ", 1)[-1]
    return int(last) if last.isdigit() else 0


# SQLSTATE classes of errors caused by the data written: data exception (a value out of
# range), integrity constraint, program limit exceeded (an index row too large).
_DATA_CLASSES = ("22", "23", "54")


@contextlib.contextmanager
def _mapped(action: str) -> Iterator[None]:
    try:
        yield
    except (*_FAILURES, OverflowError) as exc:
        message = f"{action}: {type(exc).__name__}: {exc}"
        if _refused_data(exc):
            raise DataRefused(message) from exc
        raise StorageError(message) from exc


def _refused_data(exc: BaseException) -> bool:
    """asyncpg reports a parameter it cannot encode (an integer past 64 bits) as a data
    exception too."""
    if isinstance(exc, asyncpg.PostgresError):
        return str(exc.sqlstate or "")[:2] in _DATA_CLASSES
    return isinstance(exc, OverflowError)


class PostgresTransaction:
    """The backend-neutral face (``relay.store.sql.Transaction``) of one transaction."""

    def __init__(self, conn: PoolConnectionProxy[Any]) -> None:
        self._conn = conn

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        with _mapped("database write failed"):
            return _rows_affected(await self._conn.execute(numbered(sql), *params))

    async def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        with _mapped("database write failed"):
            await self._conn.executemany(numbered(sql), rows)

    async def fetch_all(self, sql: str, params: Sequence[Any] = ()) -> list[asyncpg.Record]:
        with _mapped("database read failed"):
            rows: list[asyncpg.Record] = await self._conn.fetch(numbered(sql), *params)
            return rows

    async def lock(self, key: int) -> None:
        with _mapped("database lock failed"):
            await self._conn.execute("SELECT pg_advisory_xact_lock($1)", key)


async def _as_left(conn: asyncpg.Connection[Any]) -> None:
    """A connection goes back to the pool without asyncpg's reset query (``RESET ALL``,
    ``UNLISTEN *``...: one more round trip per transaction and per read). Nothing here
    changes a pooled session: no ``SET``, no ``LISTEN`` (``listen`` has a connection of
    its own), advisory locks only for a transaction; asyncpg still rolls back a transaction
    left open."""


class PostgresDatabase:
    """``url`` is a libpq-style URL (``postgresql://user:pass@host:port/db?sslmode=require``);
    ``timeout`` bounds connecting, waiting for a pooled connection and each statement."""

    def __init__(
        self, url: str, migrations: Sequence[str], pool_size: int = 10, timeout: float = 10.0
    ) -> None:
        self.url = url
        self._migrations = migrations
        self._pool_size = pool_size
        self._timeout = timeout
        self._pool: asyncpg.Pool[Any] | None = None

    async def open(self) -> None:
        try:
            with _mapped(f"cannot open database {describe(self.url)}"):
                self._pool = await asyncpg.create_pool(
                    self.url,
                    min_size=0,  # no background reconnecting (and its log) while down
                    max_size=self._pool_size,
                    timeout=self._timeout,
                    command_timeout=self._timeout,
                    reset=_as_left,
                )
                async with self._pool.acquire(timeout=self._timeout) as conn:
                    await self._migrate(conn)
        except BaseException:
            await self.close()
            raise
        log.info("database open", extra={"database": describe(self.url)})

    async def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            try:
                await pool.close()
            except _FAILURES:  # closing connections to a server that is gone
                pool.terminate()

    async def _migrate(self, conn: PoolConnectionProxy[Any]) -> None:
        """Apply ``migrations/pg/<folder>/NNNN_*.sql`` not yet recorded, all in one
        transaction that first takes an advisory lock: a second instance starting at the same
        time waits, then finds them recorded. DDL is transactional, so a crash applies none."""
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock($1)", MIGRATION_LOCK)
            await conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations (version TEXT PRIMARY KEY,"
                " applied_at DOUBLE PRECISION NOT NULL DEFAULT extract(epoch FROM now()))"
            )
            done = {row[0] for row in await conn.fetch("SELECT version FROM schema_migrations")}
            for version, sql in migration_scripts(self._migrations, root="pg"):
                if version not in done:
                    await conn.execute(sql)
                    await conn.execute(
                        "INSERT INTO schema_migrations (version) VALUES ($1)", version
                    )
                    log.info("applied migration", extra={"version": version})

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[PostgresTransaction]:
        """One transaction on a pooled connection; committed when the block exits normally,
        rolled back when it raises. A connection that broke is dropped by the pool."""
        pool = self._require()
        with _mapped(f"database {describe(self.url)} unavailable"):
            async with pool.acquire(timeout=self._timeout) as conn, conn.transaction():
                yield PostgresTransaction(conn)

    async def run(self, work: Callable[[Transaction], Awaitable[T]]) -> T:
        async with self.transaction() as tx:
            return await work(tx)

    async def fetch_all(self, sql: str, params: Sequence[Any] = ()) -> list[asyncpg.Record]:
        pool = self._require()
        with _mapped(f"database {describe(self.url)} unavailable"):
            async with pool.acquire(timeout=self._timeout) as conn:
                rows: list[asyncpg.Record] = await conn.fetch(numbered(sql), *params)
                return rows

    async def fetch_one(self, sql: str, params: Sequence[Any] = ()) -> asyncpg.Record | None:
        rows = await self.fetch_all(sql, params)
        return rows[0] if rows else None

    async def listen(self, channel: str, heard: Callable[[str], None]) -> None:
        """Calls ``heard`` with the payload of each ``NOTIFY`` on ``channel``, on a connection
        of its own (outside the pool), until cancelled; a lost connection is opened again a
        second later (what was announced meanwhile is missed: callers poll as well)."""
        failing = False
        while True:
            try:
                await self._listen_once(channel, heard, failing)
                failing = False
            except _FAILURES as exc:
                if not failing:  # once per outage, not every second of it
                    log.warning("cannot listen for changes", extra={"error": str(exc)})
                failing = True
            await asyncio.sleep(1.0)

    async def _listen_once(self, channel: str, heard: Callable[[str], None], failing: bool) -> None:
        """Until this connection is lost; says so when it listens again after ``failing``."""
        lost = asyncio.Event()
        conn = await asyncpg.connect(self.url, timeout=self._timeout)
        if failing:
            log.warning("listening for changes again")
        try:
            conn.add_termination_listener(lambda _: lost.set())
            await conn.add_listener(channel, lambda *args: heard(str(args[-1])))
            await lost.wait()
        finally:
            if not conn.is_closed():
                with contextlib.suppress(*_FAILURES):
                    await conn.close(timeout=self._timeout)

    def _require(self) -> asyncpg.Pool[Any]:
        if self._pool is None:
            raise StorageError("database is not open")
        return self._pool
