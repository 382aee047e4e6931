"""Buffer files an older relay kept per worker (``buffer-N.db`` beside ``buffer.db``),
drained into ``buffer.db`` at start: the workers now share one file, so that the relay's
buffer has one bound, one age order and one count of what it holds.

A move cannot be one transaction across two files (SQLite commits attached WAL databases
one by one), so it goes through the old file's outbox: counts are cut into batches there,
each with a key; a batch is added to ``buffer.db`` under that key, then deleted from the old
file. A crash in between leaves the batch there, and the next start finds its key already
applied: counted once. A file drained whole is removed; one that cannot be read is logged
and left for the next start.
"""

from __future__ import annotations

import hashlib
import logging
from datetime import UTC, datetime
from pathlib import Path

from prometheus_client import Counter
from pydantic import ValidationError

from relay.core import convert
from relay.core.errors import InvalidInput, StorageError
from relay.core.ingest_batch import IdempotencyKey
from relay.store.metrics import MetricsStore
from relay.store.outbox import CLAIM_ENTRIES, PENDING_PAGE, OutboxBatch, SqliteOutbox
from relay.store.sql import BUFFER_SCHEMA
from relay.store.sqlite import SqliteDatabase
from relay.wire.client import BulkMetrics

log = logging.getLogger(__name__)

MERGED = Counter(
    "relay_buffer_shard_merged_entries_total",
    "Entries moved at start from an older relay's per-worker buffer files into buffer.db",
)

# Moved batches are read back with the bulk model, whose limits (1,000 registrations, 10,000
# metrics) these bodies stay far below: an entry is at least ~100 bytes.
MERGE_BATCH_BYTES = 64 * 1024


async def drain_shards(
    buffer_path: Path, into: MetricsStore, synchronous: str, wal_bytes: int | None
) -> int:
    """Move every old file's counts and registrations into ``into`` (``buffer.db``), removing
    each file drained; returns the entries moved."""
    moved = 0
    for path in shard_files(buffer_path):
        db = SqliteDatabase(path, BUFFER_SCHEMA, synchronous, wal_bytes)
        try:
            await db.open()
            shard = SqliteOutbox(db, MERGE_BATCH_BYTES)
            moved += await _drain(shard, into)
            empty = await shard.empty()
        except StorageError as exc:
            log.error(
                "cannot drain an older relay's buffer file: left for the next start",
                extra={"path": str(path), "error": str(exc)},
            )
            continue
        finally:
            await db.close()
        if empty:
            for leftover in (path, *(Path(f"{path}{end}") for end in ("-wal", "-shm", "-lock"))):
                leftover.unlink(missing_ok=True)
    if moved:
        MERGED.inc(moved)
        log.info(
            "moved an older relay's per-worker buffer files into buffer.db",
            extra={"entries": moved},
        )
    return moved


async def _drain(shard: SqliteOutbox, into: MetricsStore) -> int:
    moved = 0
    environments = await shard.environments()
    while True:
        backlog = await shard.claim(environments, CLAIM_ENTRIES)
        while batches := await shard.pending(environments, PENDING_PAGE):
            for batch in batches:
                moved += await _move(shard, batch, into)
        if not backlog:
            return moved


async def _move(shard: SqliteOutbox, batch: OutboxBatch, into: MetricsStore) -> int:
    try:
        body = BulkMetrics.model_validate_json(batch.body)
        conversion = convert.from_bulk(body, batch.environment, datetime.now(UTC))
    except (ValidationError, InvalidInput) as exc:  # written by us: a bug
        await shard.dead_letter(batch, None, f"unreadable buffer shard batch: {exc}")
        log.error("unreadable buffer shard batch: kept in dead_letters", exc_info=True)
        return 0
    key = IdempotencyKey("shard", batch.idempotency_key, _fingerprint(batch.body))
    await into.write(conversion.batch, key)
    await shard.ack(batch)
    return batch.entries


def shard_files(buffer_path: Path) -> list[Path]:
    """The per-worker files of an older relay next to ``buffer.db``."""
    pattern = f"{buffer_path.stem}-*{buffer_path.suffix}"
    return sorted(p for p in buffer_path.parent.glob(pattern) if _is_shard(p))


def _is_shard(path: Path) -> bool:
    """``buffer-3.db``, not ``buffer-3.db-wal`` or ``buffer-x.db``."""
    return path.stem.rpartition("-")[2].isdigit()


def _fingerprint(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()
