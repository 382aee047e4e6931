"""The relay's buffer files checked at start: a damaged one is moved aside and what SQLite
can still read of it copied into a fresh one.

``PRAGMA quick_check`` reads every page once (cheap next to ``integrity_check``) and finds
what SQLite would otherwise meet only when a request or a flush touches the damaged page:
503s, or a batch that cannot be cut. A file that fails it (or is not a database, or was
truncated to nothing) is renamed ``<file>.damaged-<UTC time>`` (with its WAL) and kept for an
operator; an error is logged and ``relay_buffer_damaged_files`` counts the files kept.
Every table is then read as far as it can be, forwards and then backwards from its end, so
rows on both sides of a damaged page are kept, and written into the new file: counts and
registrations (added to what is there), outbox batches with their idempotency keys (a
batch the upstream took already is recognised when sent again), idempotency keys and dead
letters, in one transaction: on a disk without room for it all, nothing is kept of the
attempt, the damaged file is put back where it was and the relay does not start (a salvage
half done left the rest in the file moved aside, never sent). Only SQLite's word that a
file is damaged moves it aside: a file that cannot be opened for the check (a full disk) is
left as it is.

A buffer file missing while the instance id generated with it is there means counts
acknowledged before are gone: that is logged as an error too (a relay given its
``instance_id`` has no such file to tell).
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import Iterator
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from relay.core.errors import StorageError
from relay.store.shards import shard_files
from relay.store.sql import BUFFER_SCHEMA
from relay.store.sqlite import SqliteDatabase

log = logging.getLogger(__name__)

DAMAGED = "damaged"
# Rows read per query while salvaging; one at a time once a page fails.
_SALVAGE_PAGE = 1000

# Each table, its columns and primary key (the order it is read in both directions).
_TABLES: dict[str, tuple[str, str]] = {
    "metrics": (
        "feature_name, app_name, environment, hour, yes, no",
        "feature_name, app_name, environment, hour",
    ),
    "metric_variants": (
        "feature_name, app_name, environment, hour, variant, count",
        "feature_name, app_name, environment, hour, variant",
    ),
    "registrations": (
        "app_name, environment, instance_id, connect_via, sdk_version, strategies, interval,"
        " started, first_seen, last_seen",
        "app_name, environment, instance_id",
    ),
    "outbox": ("environment, idempotency_key, body, entries, created_at", "id"),
    "dead_letters": (
        "environment, idempotency_key, body, entries, status, reason, created_at",
        "id",
    ),
    "idempotency_keys": ("key, seen_at, fingerprint", "key"),
    "impact_metrics": (
        "series, environment, app_name, name, kind, labels, help, state, updated_at",
        "series",
    ),
}
# How salvaged rows join the new file: counts add up, the rest is kept as it was.
_CONFLICTS = {
    "metrics": "ON CONFLICT (feature_name, app_name, environment, hour) DO UPDATE"
    " SET yes = metrics.yes + excluded.yes, no = metrics.no + excluded.no",
    "metric_variants": "ON CONFLICT (feature_name, app_name, environment, hour, variant)"
    " DO UPDATE SET count = metric_variants.count + excluded.count",
    "registrations": "ON CONFLICT DO NOTHING",
    "outbox": "ON CONFLICT DO NOTHING",
    "dead_letters": "",
    "idempotency_keys": "ON CONFLICT DO NOTHING",
    "impact_metrics": "ON CONFLICT DO NOTHING",  # salvaged at start, into a file without them
}


async def check_buffers(
    buffer_path: Path, synchronous: str, wal_bytes: int, ran_before: bool
) -> list[Path]:
    """Check the leader's file and every shard before anything opens them. ``ran_before``:
    the instance id generated at a relay's first start was there before this one. Returns
    the files that could not be checked (left as they are; a full disk, most likely): said
    once the relay could open them, a read-only disk being one error alone."""
    unchecked: list[Path] = []
    if ran_before and not await asyncio.to_thread(buffer_path.exists):
        log.error(
            "buffer file missing although this relay ran here before: the counts it had"
            " acknowledged and not yet flushed are lost",
            extra={"path": str(buffer_path)},
        )
    for path in [buffer_path, *shard_files(buffer_path)]:
        try:
            problem = await asyncio.to_thread(damage, path)
        except sqlite3.Error:  # not a verdict on the file: it is left as it is
            unchecked.append(path)
            continue
        if problem is not None:
            aside = await asyncio.to_thread(move_aside, path)
            log.error(
                "buffer file damaged: moved aside, salvaging what can still be read into a new one",
                extra={"path": str(path), "moved_to": str(aside), "problem": problem[:500]},
            )
            try:
                fresh = SqliteDatabase(path, BUFFER_SCHEMA, synchronous, wal_bytes)
                await fresh.open()
                await fresh.close()
                saved = await asyncio.to_thread(_salvage, aside, path)
            except (StorageError, sqlite3.Error) as exc:  # a full disk: all or nothing
                await asyncio.to_thread(_put_back, aside, path)
                raise StorageError(
                    f"cannot salvage the damaged buffer file {path} now ({exc}): it is left"
                    " as it was, and salvaged at the next start"
                ) from exc
            log.error(
                "salvaged from the damaged buffer file",
                extra={"path": str(path), "rows": saved, "entries": _entries(saved)},
            )
    return unchecked


def damaged_files(buffer_path: Path) -> list[Path]:
    return sorted(buffer_path.parent.glob(f"{buffer_path.stem}*.{DAMAGED}-*[0-9]"))


def damage(path: Path) -> str | None:
    """What is wrong with the file, or None when it is sound (or does not exist). Only
    SQLite's word that the file is damaged is a verdict: any other failure (a full disk, an
    I/O error, a WAL index that cannot be made) is raised, and must never have the file
    moved aside: the salvage might then not read its WAL, and the counts there were lost."""
    if not path.exists():
        return None
    if path.stat().st_size == 0 and not _wal(path).exists():
        return "the file is empty (truncated)"
    try:
        with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as conn:
            found = [row[0] for row in conn.execute("PRAGMA quick_check(5)")]
    except sqlite3.DatabaseError as exc:
        if (getattr(exc, "sqlite_errorcode", 0) & 0xFF) in _DAMAGED_CODES:  # primary code
            return str(exc)
        raise
    return None if found == ["ok"] else "; ".join(found)


_DAMAGED_CODES = frozenset({sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB})


def move_aside(path: Path) -> Path:
    """``<file>.damaged-<UTC time>``, its WAL along (the salvage reads both)."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%f")
    aside = path.with_name(f"{path.name}.{DAMAGED}-{stamp}")
    path.rename(aside)
    if _wal(path).exists():
        _wal(path).rename(_wal(aside))
    Path(f"{path}-shm").unlink(missing_ok=True)
    return aside


def _put_back(aside: Path, path: Path) -> None:
    """Undo ``move_aside``: the new file goes, the damaged one is where it was."""
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    aside.rename(path)
    if _wal(aside).exists():
        _wal(aside).rename(_wal(path))


def _entries(saved: dict[str, int]) -> int:
    return sum(saved.get(t, 0) for t in ("metrics", "registrations", "outbox_entries"))


def _salvage(damaged: Path, into: Path) -> dict[str, int]:
    """Rows read from each table of ``damaged`` and written into ``into``."""
    saved: dict[str, int] = {}
    try:
        source = sqlite3.connect(f"file:{damaged}?mode=ro", uri=True)
    except sqlite3.DatabaseError:
        return saved
    # one transaction: a salvage the disk cannot hold leaves nothing half-copied
    with closing(source), closing(sqlite3.connect(into)) as target, target:
        for table, (columns, key) in _TABLES.items():
            rows = list(_readable(source, table, columns, key))
            marks = ", ".join("?" * len(columns.split(",")))
            target.executemany(
                f"INSERT INTO {table} ({columns}) VALUES ({marks}) {_CONFLICTS[table]}", rows
            )
            saved[table] = len(rows)
            if table == "outbox":
                saved["outbox_entries"] = sum(row[3] for row in rows)
    return saved


def _readable(conn: sqlite3.Connection, table: str, columns: str, key: str) -> Iterator[Any]:
    """The rows of ``table`` that can be read: forwards until a damaged page, then backwards
    from the end until one (each row once).

    Read in pages by key, and one row at a time near the damage: Python's sqlite3 steps to
    the next row before it hands over the current one, so a plain scan loses the last row
    before a damaged page in each direction, whole outbox batches among them.
    """
    seen: set[tuple[Any, ...]] = set()
    width = len(key.split(","))
    for order in ("ASC", "DESC"):
        after: tuple[Any, ...] | None = None
        limit = _SALVAGE_PAGE
        while True:
            try:
                rows = _rows(conn, table, f"{key}, {columns}", key, order, after, limit)
            except sqlite3.DatabaseError:
                if limit == 1:
                    break  # the next row is behind the damaged page: read from the other end
                limit = 1
                continue
            if not rows:
                break
            for row in rows:
                if row[:width] in seen:
                    return  # the two directions met
                seen.add(row[:width])
                yield row[width:]
            after = rows[-1][:width]


def _rows(
    conn: sqlite3.Connection,
    table: str,
    selected: str,
    key: str,
    order: str,
    after: tuple[Any, ...] | None,
    limit: int,
) -> list[Any]:
    """Up to ``limit`` rows of ``table`` past ``after`` in key ``order``."""
    ordering = ", ".join(f"{column} {order}" for column in key.split(","))
    where, parameters = "", ()
    if after is not None:
        marks = ", ".join("?" * len(after))
        where, parameters = f"WHERE ({key}) {'>' if order == 'ASC' else '<'} ({marks})", after
    sql = f"SELECT {selected} FROM {table} {where} ORDER BY {ordering} LIMIT {limit}"
    return conn.execute(sql, parameters).fetchall()


def _wal(path: Path) -> Path:
    return Path(f"{path}-wal")
