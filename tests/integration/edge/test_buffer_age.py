"""A relay's "oldest buffered" is the age of the oldest write it has not sent upstream
(issue 23), not the age of that write's hour window: a count of a window three hours back
written now is seconds old, buffered, claimed into the outbox, or split."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from relay.core.ingest_batch import Counts, IngestBatch, MetricKey, hour_start
from relay.store.buffer_space import BufferSpace
from relay.store.metrics import MetricsStore
from relay.store.outbox import SqliteOutbox
from relay.store.sql import BUFFER_SCHEMA
from relay.store.sqlite import SqliteDatabase


async def buffered(db: SqliteDatabase) -> int:
    row = await db.fetch_one("SELECT count(*) FROM metrics")
    return int(row[0]) if row is not None else 0


async def test_the_oldest_buffered_is_the_oldest_unsent_write(tmp_path: Path) -> None:
    db = SqliteDatabase(tmp_path / "buffer.db", BUFFER_SCHEMA, "NORMAL")
    await db.open()
    store = MetricsStore(db, 512, 3600.0, touched=True)
    store.start()
    outbox, space = SqliteOutbox(db, 1024), BufferSpace(db)
    try:
        assert await space.oldest_write() is None
        window = hour_start(datetime.now(UTC) - timedelta(hours=3))
        batch = IngestBatch()
        for i in range(20):
            batch.counts[MetricKey("app", "development", f"f{i:02}", window)] = Counts(1, 0)
        before = time.time()
        assert await store.write(batch, None)
        after = time.time()
        written = await space.oldest_write()
        assert written is not None and before <= written <= after, (written, before, after)

        later = IngestBatch()  # added to later: the unsent write is still the first
        later.counts[MetricKey("app", "development", "f00", window)] = Counts(5, 0)
        assert await store.write(later, None)
        assert await space.oldest_write() == written

        # a claim of 5 entries: the batch and what is still buffered keep it
        await outbox.claim({"development"}, 5)
        assert await buffered(db) == 15
        assert await space.oldest_write() == written
        await outbox.claim({"development"}, 100)
        assert await buffered(db) == 0
        assert await space.oldest_write() == written
        pending = await outbox.pending({"development"}, 100)
        assert await outbox.split(pending[0])  # halved (it holds 2+ entries)
        assert await space.oldest_write() == written
        for sent in await outbox.pending({"development"}, 100):
            await outbox.ack(sent)
        assert await space.oldest_write() is None
    finally:
        await store.stop()
        await db.close()
