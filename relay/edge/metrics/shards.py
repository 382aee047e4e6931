"""Relay buffer shards: with several workers, each writes its own SQLite file.

Worker 0 (the leader) buffers in ``buffer.db``, worker N in ``buffer-N.db``. Sharing one file,
the workers took turns for its write lock on every group commit, and a worker whose turn
was late sat idle with its requests waiting (measured with two workers: 1,800-2,700 req/s
with one file, 3,200-3,600 with a file each). The upstream still sees one batch per
environment per flush: before each flush the leader moves what the shards hold into its
own buffer (``ShardMerger``), and flushes that.

A request with an ``Idempotency-Key`` is written to the leader's file whichever worker
answers it (``ShardedBuffer``): keys are claimed in the same transaction as the counts they
guard, so they must all live in one file for a retry reaching another worker to be caught.

A move cannot be one transaction across two files (SQLite commits attached WAL databases
one by one), so it goes through the shard's outbox: counts are cut into batches there, each
with a key; a batch is added to the leader's buffer under that key, then deleted from the
shard. A crash in between leaves the batch in the shard, and the next move finds its key
already applied: counted once.

Every ``buffer-*.db`` in the data directory is merged, so a restart with fewer workers
still drains the shards of the ones that are gone.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path

from prometheus_client import Counter
from pydantic import ValidationError

from relay.core import convert
from relay.core.domain import IdempotencyKey, IngestBatch
from relay.core.errors import InvalidInput, StorageError
from relay.edge.metrics.outbox import CLAIM_ENTRIES, PENDING_PAGE, OutboxBatch, SqliteOutbox
from relay.store.metrics import MetricsStore
from relay.store.sql import BUFFER_SCHEMA
from relay.store.sqlite import SqliteDatabase
from relay.wire.client import BulkMetrics

log = logging.getLogger(__name__)

MERGED = Counter(
    "relay_buffer_shard_merged_entries_total",
    "Entries moved from the other workers' buffer files into the leader's",
)

# Moved batches are read back with the bulk model, whose limits (1,000 registrations, 10,000
# metrics) these bodies stay far below: an entry is at least ~100 bytes.
MERGE_BATCH_BYTES = 64 * 1024


def shard_path(buffer_path: Path, worker: int) -> Path:
    if worker == 0:
        return buffer_path
    return buffer_path.with_name(f"{buffer_path.stem}-{worker}{buffer_path.suffix}")


class ShardedBuffer:
    """The ingest sink of a worker: its own shard, or the leader's file for keyed requests."""

    def __init__(
        self,
        own: MetricsStore,
        leader: MetricsStore,
        admit: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        """``admit`` raises ``DiskFull`` when the disk has no room for new counts
        (``relay.edge.metrics.reserve.IngestGate``)."""
        self._own = own
        self._leader = leader
        self._admit = admit

    async def write(self, batch: IngestBatch, idempotency_key: IdempotencyKey | None) -> bool:
        if self._admit is not None:
            await self._admit()
        store = self._own if idempotency_key is None else self._leader
        return await store.write(batch, idempotency_key)


class ShardMerger:
    def __init__(
        self, buffer_path: Path, into: MetricsStore, synchronous: str, wal_bytes: int | None
    ) -> None:
        self._buffer_path = buffer_path
        self._into = into
        self._synchronous = synchronous
        self._wal_bytes = wal_bytes
        self._merging = asyncio.Lock()  # the flusher and the buffer monitor both merge
        # shards that could not be merged, said once until they can: on a full disk the
        # flusher and the monitor retry every tick (measured: 4 error lines a second)
        self._failing: set[Path] = set()

    async def merge(self) -> int:
        """Move every shard's counts and registrations into the leader's buffer; returns
        the entries moved. A shard that cannot be read is logged and left for next time."""
        moved = 0
        async with self._merging:
            for path in shard_files(self._buffer_path):
                db = SqliteDatabase(path, BUFFER_SCHEMA, self._synchronous, self._wal_bytes)
                try:
                    await db.open()
                    moved += await self._drain(SqliteOutbox(db, MERGE_BATCH_BYTES))
                except StorageError as exc:
                    level = logging.DEBUG if path in self._failing else logging.ERROR
                    self._failing.add(path)
                    log.log(
                        level,
                        "cannot merge a buffer shard",
                        extra={"path": str(path), "error": str(exc)},
                    )
                else:
                    if path in self._failing:
                        self._failing.discard(path)
                        log.info("buffer shard merged again", extra={"path": str(path)})
                finally:
                    await db.close()
        MERGED.inc(moved)
        return moved

    async def _drain(self, shard: SqliteOutbox) -> int:
        moved = 0
        environments = await shard.environments()
        while True:
            backlog = await shard.claim(environments, CLAIM_ENTRIES)
            while batches := await shard.pending(environments, PENDING_PAGE):
                for batch in batches:
                    moved += await self._move(shard, batch)
            if not backlog:
                return moved

    async def _move(self, shard: SqliteOutbox, batch: OutboxBatch) -> int:
        try:
            body = BulkMetrics.model_validate_json(batch.body)
            conversion = convert.from_bulk(body, batch.environment, datetime.now(UTC))
        except (ValidationError, InvalidInput) as exc:  # written by us: a bug
            await shard.dead_letter(batch, None, f"unreadable buffer shard batch: {exc}")
            log.error("unreadable buffer shard batch: kept in dead_letters", exc_info=True)
            return 0
        key = IdempotencyKey("shard", batch.idempotency_key, _fingerprint(batch.body))
        await self._into.write(conversion.batch, key)
        await shard.ack(batch)
        return batch.entries


def shard_files(buffer_path: Path) -> list[Path]:
    """The other workers' files next to the leader's, including those of workers no longer
    configured."""
    pattern = f"{buffer_path.stem}-*{buffer_path.suffix}"
    return sorted(p for p in buffer_path.parent.glob(pattern) if _is_shard(p))


def _is_shard(path: Path) -> bool:
    """``buffer-3.db``, not ``buffer-3.db-wal`` or ``buffer-x.db``."""
    return path.stem.rpartition("-")[2].isdigit()


def _fingerprint(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()
