"""Per-worker buffer files an older relay left (``buffer-N.db``), drained into ``buffer.db``
at start on real files: each count moved once, a file drained whole removed."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from prometheus_client import REGISTRY

from relay.core.ingest_batch import (
    Hop,
    IngestBatch,
    MetricKey,
    Registration,
    RegistrationKey,
)
from relay.store.metrics import MetricsStore
from relay.store.outbox import CLAIM_ENTRIES, SqliteOutbox
from relay.store.shards import MERGE_BATCH_BYTES, drain_shards
from relay.store.sql import BUFFER_SCHEMA
from relay.store.sqlite import SqliteDatabase
from relay.wire.common import MAX_APPLICATIONS

HOUR = 3600 * 490_000


def counts(features: int, yes: int = 1, env: str = "development") -> IngestBatch:
    batch = IngestBatch()
    for i in range(features):
        batch.add_count(MetricKey("app", env, f"f{i:05d}", HOUR), yes, 0, {"blue": yes})
    return batch


def registrations(n: int) -> IngestBatch:
    batch = IngestBatch()
    for i in range(n):
        batch.add_registration(
            Registration(
                key=RegistrationKey("app", "development", f"pod-{i}"),
                connect_via=(Hop("edge", "e-1"), Hop("relay", "r-1")),
                sdk_version="unleash-client-node:6.12.0",
                strategies=("default",),
                interval=15000,
                started=None,
                seen_at=datetime.now(UTC),
            )
        )
    return batch


def shard_path(buffer_path: Path, worker: int) -> Path:
    """Where an older relay's worker ``worker`` buffered."""
    return buffer_path.with_name(f"buffer-{worker}.db")


class Buffers:
    """The relay's buffer, plus a way to fill an older relay's per-worker file."""

    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / "buffer.db"
        self.db = SqliteDatabase(self.path, BUFFER_SCHEMA, "NORMAL")
        self.store = MetricsStore(self.db, max_group=64, idempotency_ttl=3600)

    async def drain(self) -> int:
        return await drain_shards(self.path, self.store, "NORMAL", None)

    async def fill(self, worker: int, batch: IngestBatch) -> None:
        db = SqliteDatabase(shard_path(self.path, worker), BUFFER_SCHEMA, "NORMAL")
        await db.open()
        store = MetricsStore(db, max_group=64, idempotency_ttl=3600)
        store.start()
        assert await store.write(batch, None)
        await store.stop()
        await db.close()


def rows(path: Path, sql: str) -> list[tuple[object, ...]]:
    with sqlite3.connect(path) as conn:
        return list(conn.execute(sql))


def total(path: Path, table: str = "metrics", column: str = "yes") -> int:
    return int(rows(path, f"SELECT coalesce(sum({column}), 0) FROM {table}")[0][0])


def merged_metric() -> float:
    return REGISTRY.get_sample_value("relay_buffer_shard_merged_entries_total") or 0.0


@pytest.fixture
async def buffers(tmp_path: Path) -> AsyncIterator[Buffers]:
    b = Buffers(tmp_path)
    await b.db.open()
    b.store.start()
    yield b
    await b.store.stop()
    await b.db.close()


async def test_every_shard_is_moved_into_the_buffer_and_removed(buffers: Buffers) -> None:
    await buffers.fill(1, counts(3, yes=2))
    await buffers.fill(3, counts(3, yes=5))
    await buffers.fill(1, registrations(2))
    before = merged_metric()
    assert await buffers.drain() == 3 + 3 + 2
    assert merged_metric() - before == 3 + 3 + 2
    assert total(buffers.path) == 3 * 7
    assert total(buffers.path, "metric_variants", "count") == 3 * 7
    assert rows(buffers.path, "SELECT instance_id, connect_via FROM registrations") == [
        ("pod-0", '[["edge", "e-1"], ["relay", "r-1"]]'),
        ("pod-1", '[["edge", "e-1"], ["relay", "r-1"]]'),
    ]
    assert not list(buffers.path.parent.glob("buffer-*"))  # drained whole: removed
    assert await buffers.drain() == 0


async def test_a_move_interrupted_before_the_shard_forgets_it_counts_once(
    buffers: Buffers,
) -> None:
    await buffers.fill(1, counts(4, yes=3))
    shard = shard_path(buffers.path, 1)
    # cut the shard's batches first, and keep a copy of them
    db = SqliteDatabase(shard, BUFFER_SCHEMA, "NORMAL")
    await db.open()
    await SqliteOutbox(db, MERGE_BATCH_BYTES).claim({"development"}, CLAIM_ENTRIES)
    await db.close()
    cut = rows(shard, "SELECT environment, idempotency_key, body, entries, created_at FROM outbox")
    assert await buffers.drain() == 4
    # as after a crash between the buffer's commit and the old file's: the batch is back
    await buffers.fill(1, IngestBatch())
    with sqlite3.connect(shard) as conn:
        conn.executemany(
            "INSERT INTO outbox (environment, idempotency_key, body, entries, created_at)"
            " VALUES (?, ?, ?, ?, ?)",
            cut,
        )
    assert await buffers.drain() == 4  # moved again, applied zero times
    assert total(buffers.path) == 4 * 3
    assert not shard.exists()


async def test_a_large_shard_moves_whole_within_the_bulk_limits(buffers: Buffers) -> None:
    keys = CLAIM_ENTRIES + 500  # more than one claim
    await buffers.fill(1, counts(keys))
    await buffers.fill(1, registrations(MAX_APPLICATIONS + 200))
    assert await buffers.drain() == keys + MAX_APPLICATIONS + 200
    assert total(buffers.path) == keys
    assert rows(buffers.path, "SELECT count(*) FROM registrations") == [(MAX_APPLICATIONS + 200,)]
    assert not shard_path(buffers.path, 1).exists()  # no dead letter: drained whole


async def test_an_unreadable_shard_batch_is_dead_lettered_and_the_rest_moves(
    buffers: Buffers,
) -> None:
    await buffers.fill(1, counts(2))
    shard = shard_path(buffers.path, 1)
    with sqlite3.connect(shard) as conn:
        conn.execute(
            "INSERT INTO outbox (environment, idempotency_key, body, entries, created_at)"
            " VALUES ('development', 'k', x'7b', 1, 0)"
        )
    assert await buffers.drain() == 2
    assert total(buffers.path) == 2
    [(entries, reason)] = rows(shard, "SELECT entries, reason FROM dead_letters")  # kept
    assert entries == 1 and "unreadable buffer shard batch" in str(reason)
