"""The relay's ``cache.db``, beside ``buffer.db``: what it keeps besides counts (flag copies,
the hashes of the keys that read them, the reports of the relays it serves). In a file of
its own, nothing there counts toward ``buffer_max_bytes`` or can make its eviction drop a
count; each kind holds bounds of its own (``relay.edge.flags.store``,
``relay.store.edge_reports``), since on a shared disk it still takes room.

A damaged ``cache.db`` is moved aside at start (``cache.db.damaged-<UTC time>``, logged as
an error) and a new one begun: its flags are fetched again, never a reason not to start.

A relay upgraded in place finds its flag copies and key hashes in ``buffer.db`` (buffer
migration 0002): ``adopt`` copies them here before ``buffer.db`` is opened (whose
migration 0003 then drops them), so it goes on serving flags while the upstream is down.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from functools import partial
from pathlib import Path

from relay.store.reserve import START_PATIENCE, Reserve, open_with_room
from relay.store.salvage import damage, move_aside
from relay.store.sql import CACHE_SCHEMA, Transaction
from relay.store.sqlite import SqliteDatabase

log = logging.getLogger(__name__)

CACHE_FILE = "cache.db"
WAL_BYTES = 4 * 1024 * 1024
"""The WAL is truncated back to this after a checkpoint (a flag copy may be 32 MiB)."""


async def next_change(tx: Transaction, table: str) -> int:
    """The next ``changed`` of ``table`` (``key_words``, ``flag_scopes``): past every number
    given before, the rows since deleted included (cache migration 0004), and past the
    table's rows (a file from before it)."""
    [row] = await tx.fetch_all(
        "INSERT INTO changes (name, last) SELECT ?, coalesce(max(changed), 0) + 1"
        f" FROM {table} WHERE typeof(changed) = 'integer' AND changed < ?"
        " ON CONFLICT (name) DO UPDATE"
        " SET last = max(changes.last + 1, excluded.last) RETURNING last",
        (table, MAX_CHANGE),
    )
    return int(row[0])


MAX_CHANGE = 1 << 62
"""Past it a ``changed`` read back is a damaged row's (``change_number``): the order goes on
below it."""


def change_number(value: object) -> int:
    """A ``changed`` read back; ``ValueError`` for one no write gave (a row damaged by hand:
    text, a fraction, a number too large to be followed by another), which is skipped."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < MAX_CHANGE:
        raise ValueError("not a change number")
    return value


def cache_file(data_dir: Path, synchronous: str) -> SqliteDatabase:
    return SqliteDatabase(data_dir / CACHE_FILE, CACHE_SCHEMA, synchronous, WAL_BYTES)


async def open_cache(cache: SqliteDatabase, buffer: Path, reserve: Reserve | None = None) -> None:
    """``cache`` opened (a damaged file moved aside first), with the flag copies ``buffer``
    holds from an older version: called before ``buffer`` is opened (its migration drops
    them)."""
    try:
        problem = await asyncio.to_thread(damage, cache.path)
    except sqlite3.Error:  # no verdict (a full disk, a read-only one): opening tells
        problem = None
    if problem is not None:
        aside = await asyncio.to_thread(move_aside, cache.path)
        log.error(
            "cache file damaged: moved aside, flags are fetched again",
            extra={"path": str(cache.path), "moved_to": str(aside), "problem": problem[:500]},
        )
    await open_with_room(cache, reserve, START_PATIENCE)
    await adopt(cache, buffer)


async def adopt(cache: SqliteDatabase, buffer: Path) -> None:
    """Flag rows an older version kept in ``buffer`` copied into ``cache`` (open), where
    they are not already. Copying again after a crash half-way is harmless."""
    try:
        copied = await cache.on_writer(partial(_adopt, buffer))
    except sqlite3.Error as exc:  # the copies are fetched again: no reason not to start
        log.warning("flag copies in buffer.db not moved to cache.db", extra={"error": str(exc)})
        return
    if copied:
        log.info("flag copies moved from buffer.db to cache.db", extra=copied)


def _adopt(buffer: Path, conn: sqlite3.Connection) -> dict[str, int]:
    if not buffer.is_file():  # attaching would create it
        return {}
    conn.execute("ATTACH DATABASE ? AS old", (str(buffer),))
    try:
        tables = {
            row[0]
            for row in conn.execute(
                "SELECT name FROM old.sqlite_master WHERE type = 'table'"
                " AND name IN ('flag_scopes', 'flag_keys')"
            )
        }
        if len(tables) < 2:  # migrated already, or a file of a version before flag copies
            return {}
        conn.execute("BEGIN IMMEDIATE")
        try:
            scopes = conn.execute(
                "INSERT OR IGNORE INTO flag_scopes (scope, body, etag, fetched_at, due_at,"
                " changed) SELECT scope, body, etag, fetched_at, due_at, changed"
                " FROM old.flag_scopes"
            ).rowcount
            keys = conn.execute(
                "INSERT OR IGNORE INTO flag_keys (key_hash, scope, display, seen_at)"
                " SELECT key_hash, scope, display, seen_at FROM old.flag_keys"
            ).rowcount
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return {"scopes": scopes, "keys": keys}
    finally:
        conn.execute("DETACH DATABASE old")
