"""One SQLite database file: connections, pragmas, migrations, serialised write transactions.

Writes go through a single connection guarded by a lock, so a transaction never interleaves
with another (aiosqlite runs every statement of one connection on one thread, and two
coroutines sharing it would otherwise share a transaction). Reads use a second connection:
in WAL mode they see only committed data and never wait for the writer.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiosqlite

from relay.store.errors import StorageError
from relay.store.sql import BUFFER_SCHEMA, CENTRAL_SCHEMA, migration_scripts

__all__ = ["BUFFER_SCHEMA", "CENTRAL_SCHEMA", "SqliteDatabase", "SqliteTransaction", "StorageError"]


class SqliteTransaction:
    """The backend-neutral face (``relay.store.sql.Transaction``) of one ``write()`` block."""

    def __init__(self, conn: aiosqlite.Connection) -> None:
        self.conn = conn

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        cursor = await self.conn.execute(sql, params)
        return cursor.rowcount

    async def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        await self.conn.executemany(sql, rows)

    async def fetch_all(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        async with self.conn.execute(sql, params) as cursor:
            cursor_rows: Iterable[sqlite3.Row] = await cursor.fetchall()
            return list(cursor_rows)


class SqliteDatabase:
    def __init__(self, path: Path, migrations: Sequence[str], synchronous: str = "FULL") -> None:
        self.path = path
        self._migrations = migrations
        self._synchronous = synchronous
        self._writer: aiosqlite.Connection | None = None
        self._reader: aiosqlite.Connection | None = None
        self._write_lock = asyncio.Lock()

    async def open(self) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._writer = await self._connect()
            await self._writer.execute("PRAGMA journal_mode=WAL")
            await self._migrate(self._writer)
            await self._probe_write(self._writer)
            self._reader = await self._connect()
        except (sqlite3.Error, OSError) as exc:
            await self.close()
            raise StorageError(f"cannot open database {self.path}: {exc}") from exc

    async def close(self) -> None:
        for conn in (self._reader, self._writer):
            if conn is not None:
                await conn.close()
        self._reader = self._writer = None

    async def _probe_write(self, conn: aiosqlite.Connection) -> None:
        """SQLite opens a file it cannot write read-only without a word; a service that
        would then refuse every write must rather not start."""
        async with conn.execute("PRAGMA user_version") as cursor:
            row = await cursor.fetchone()
        await conn.execute(f"PRAGMA user_version = {int(row[0]) if row else 0}")

    async def _connect(self) -> aiosqlite.Connection:
        # isolation_level=None: we issue BEGIN/COMMIT ourselves, so a transaction's extent
        # is exactly the `transaction()` block.
        conn = await aiosqlite.connect(self.path, isolation_level=None)
        try:
            conn.row_factory = sqlite3.Row
            await conn.execute("PRAGMA busy_timeout=5000")
            await conn.execute(f"PRAGMA synchronous={self._synchronous}")
            await conn.execute("PRAGMA foreign_keys=ON")
        except BaseException:
            await conn.close()  # else its thread outlives us and the process cannot exit
            raise
        return conn

    async def _migrate(self, conn: aiosqlite.Connection) -> None:
        """Apply ``migrations/<folder>/NNNN_*.sql`` not yet recorded, folder by folder, each
        script in its own transaction, so a crash mid-way leaves a known schema version."""
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations (version TEXT PRIMARY KEY,"
            " applied_at REAL NOT NULL DEFAULT ((julianday('now') - 2440587.5) * 86400.0))"
        )
        async with conn.execute("SELECT version FROM schema_migrations") as cursor:
            done = {row[0] for row in await cursor.fetchall()}
        for version, sql in migration_scripts(self._migrations):
            if version not in done:
                await self._apply_script(conn, version, sql)

    async def _apply_script(self, conn: aiosqlite.Connection, version: str, sql: str) -> None:
        await conn.execute("BEGIN IMMEDIATE")
        try:
            for statement in _split_sql(sql):
                await conn.execute(statement)
            await conn.execute("INSERT INTO schema_migrations (version) VALUES (?)", (version,))
            await conn.execute("COMMIT")
        except BaseException:
            await conn.execute("ROLLBACK")
            raise

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[SqliteTransaction]:
        """One write transaction; committed when the block exits normally.

        A statement whose awaiting coroutine is cancelled still runs on aiosqlite's thread.
        The ROLLBACK on any failure is queued behind it, so the transaction is always closed
        before the lock is released, whatever was in flight."""
        async with self._write_lock:
            conn = self._require(self._writer)
            try:
                await conn.execute("BEGIN IMMEDIATE")
                yield SqliteTransaction(conn)
                await conn.execute("COMMIT")
            except BaseException as exc:
                with contextlib.suppress(sqlite3.Error):  # "no transaction is active"
                    await asyncio.shield(conn.execute("ROLLBACK"))
                if isinstance(exc, sqlite3.Error):
                    raise StorageError(str(exc)) from exc
                raise

    async def fetch_all(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        reader = SqliteTransaction(self._require(self._reader))  # reads only, no BEGIN
        try:
            return await reader.fetch_all(sql, params)
        except sqlite3.Error as exc:
            raise StorageError(str(exc)) from exc

    async def fetch_one(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Row | None:
        rows = await self.fetch_all(sql, params)
        return rows[0] if rows else None

    def _require(self, conn: aiosqlite.Connection | None) -> aiosqlite.Connection:
        if conn is None:
            raise StorageError("database is not open")
        return conn


def _split_sql(script: str) -> list[str]:
    """Statements of a migration file; the files keep one statement per ``;``-ended block."""
    return [s.strip() for s in script.split(";\n") if s.strip() and not _only_comments(s)]


def _only_comments(block: str) -> bool:
    return all(not line.strip() or line.strip().startswith("--") for line in block.splitlines())
