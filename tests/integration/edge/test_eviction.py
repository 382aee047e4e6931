"""Issue 13, item 3: eviction keeps the newest data, in small steps, with the WAL counted
and the check triggered by what is written, not only by time."""

from __future__ import annotations

import asyncio
import io
import json
import os
import sqlite3
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from conftest import DEV_KEY, auth, bulk, metric
from fake_upstream import Answer, FakeUpstream
from prometheus_client import REGISTRY
from service import eventually

from relay.api.shared import Layout, Shared
from relay.core.ingest_batch import (
    Counts,
    IdempotencyKey,
    IngestBatch,
    MetricKey,
    Registration,
    RegistrationKey,
)
from relay.edge.metrics.admitted import Admitted
from relay.edge.metrics.buffer_monitor import BufferMonitor
from relay.edge.wiring import MONITOR_INTERVAL
from relay.store.buffer_space import BufferSpace
from relay.store.metrics import MetricsStore
from relay.store.outbox import CLAIM_ENTRIES, PENDING_PAGE, SqliteOutbox
from relay.store.reserve import Reserve
from relay.store.sql import BUFFER_SCHEMA
from relay.store.sqlite import SqliteDatabase

pytestmark = pytest.mark.workers  # at one worker and at two (conftest.make_relay)

CAP = 4 * 1024 * 1024
PER_POST = 4_000

LAYOUT = Layout.of(1, 10)


def footprint(data_dir: Path) -> int:
    """The buffer's files on disk: the database and its WAL."""
    return sum(
        os.stat(path).st_size
        for path in (data_dir / "buffer.db", data_dir / "buffer.db-wal")
        if path.exists()
    )


def evicted() -> float:
    return REGISTRY.get_sample_value("relay_evicted_entries_total") or 0.0


def evaluations() -> float:
    return REGISTRY.get_sample_value("relay_evicted_evaluations_total") or 0.0


def keys_evicted() -> float:
    return REGISTRY.get_sample_value("relay_idempotency_keys_evicted_total") or 0.0


async def key_pages(db: SqliteDatabase) -> int:
    """Bytes of the pages the idempotency keys take: their table and index."""
    [(held,)] = await db.fetch_all(
        "SELECT total(pgsize) FROM dbstat WHERE name LIKE 'idempotency_keys%'"
    )
    return int(held)


async def test_a_flood_of_new_keys_evicts_the_oldest_in_steps_and_keeps_the_newest(
    make_relay: Any, upstream: FakeUpstream, tmp_path: Path
) -> None:
    """200,000 distinct features in the current hour with the upstream down and a 4 MiB
    bound: the files stay near the bound all along, the latest requests are all kept, and
    every entry is either delivered or counted as evicted."""
    upstream.default = Answer(503)
    client = await make_relay(buffer_max_bytes=CAP, backoff_max=60)
    data_dir = tmp_path / "relay"
    before, evaluations_before = evicted(), evaluations()
    largest = 0
    posts = 50
    for n in range(posts):
        entries = [metric(f"f-{n:03}-{i:05}", yes=1, no=2) for i in range(PER_POST)]
        response = await client.post(
            "/api/client/metrics/bulk",
            data=io.BytesIO(json.dumps(bulk(entries)).encode()),
            headers={**auth(DEV_KEY), "Content-Type": "application/json"},
        )
        assert response.status == 202
        largest = max(largest, footprint(data_dir))
    await eventually(lambda: evicted() > before)
    # the files never ran far past the bound (the whole flood is ~30 MB on disk; checked
    # every 1/32 of the bound written, the file peaks where a check's eviction catches up)
    assert largest < 3 * CAP, largest
    upstream.default = Answer(202)
    await client.close()  # the final flush sends what is left
    sent = {m["featureName"] for r in upstream.accepted_bulks() for m in r.json()["metrics"]}
    # the newest request is whole: what was just acknowledged is never evicted
    assert {f"f-{posts - 1:03}-{i:05}" for i in range(PER_POST)} <= sent
    # the oldest went first, in steps: no request older than the last evicted one was kept
    assert 0 < len(sent) < posts * PER_POST
    assert len(sent) + (evicted() - before) == posts * PER_POST
    # and what they held: 3 evaluations each (yes 1, no 2)
    assert evaluations() - evaluations_before == 3 * (evicted() - before)


async def test_idempotency_keys_count_against_the_bound(
    make_relay: Any, upstream: FakeUpstream, tmp_path: Path
) -> None:
    """A caller sending a new key with every empty request: the keys are bounded apart from
    the rest, oldest first, and counted; counts of others are not pushed out by them."""
    cap = 1024 * 1024
    client = await make_relay(buffer_max_bytes=cap, flush_interval=3600)
    assert (
        await client.post(
            "/api/client/metrics/bulk", json=bulk([metric("kept", yes=1)]), headers=auth(DEV_KEY)
        )
    ).status == 202
    before = keys_evicted()
    largest = 0

    async def keyed(n: int) -> None:
        headers = {**auth(DEV_KEY), "Idempotency-Key": f"{n:08d}-{'k' * 240}"}
        response = await client.post("/api/client/metrics/bulk", json=bulk(), headers=headers)
        assert response.status == 202

    for start in range(0, 8_000, 100):
        await asyncio.gather(*(keyed(n) for n in range(start, start + 100)))
        largest = max(largest, footprint(tmp_path / "relay"))
    assert keys_evicted() > before
    assert largest < 5 * cap, largest  # all the keys take ~8.5 MB
    await client.close()
    assert upstream.totals() == {("kept", "app"): (1, 0)}


async def test_keys_written_during_an_eviction_are_bounded_apart_and_never_evict_counts(
    tmp_path: Path,
) -> None:
    """Keys newer than the eviction's start (arriving while it runs, here by a clock a minute
    ahead, as after the system clock stepped back) fill the buffer past its bound: they are
    cut to their own part, oldest first and counted, and the one acknowledged count stays."""
    cap = 1024 * 1024
    db = SqliteDatabase(tmp_path / "buffer.db", BUFFER_SCHEMA, "NORMAL")
    await db.open()
    reserve = Reserve(tmp_path / "r", 4096)
    shared = Shared.private(LAYOUT)
    monitor = BufferMonitor(db, cap, 256 * 1024, reserve, frozenset(), shared)

    def ahead() -> float:
        return time.time() + 60

    store = MetricsStore(db, 512, 3600.0, ahead, touched=True)
    sink = Admitted(store, None, shared, 100 * cap)  # counts what it writes; no wait here
    store.start()
    keys_before = keys_evicted()
    entries_before = evicted()
    try:
        kept = IngestBatch()
        kept.counts[MetricKey("app", "development", "kept", 0)] = Counts(yes=1)
        assert await sink.write(kept, None)
        for start in range(0, 4_000, 500):
            await asyncio.gather(
                *(
                    sink.write(IngestBatch(), IdempotencyKey("c", f"{n:08d}-{'k' * 240}", "f"))
                    for n in range(start, start + 500)
                )
            )
        assert await key_pages(db) > cap  # the keys alone are over the whole bound
        await monitor.listen()
        assert monitor.wake.is_set()  # their bytes written woke the check
        await monitor.check()
        rows = await db.fetch_all("SELECT feature_name, yes FROM metrics")
        assert [tuple(row) for row in rows] == [("kept", 1)]
        assert evicted() == entries_before
        assert await key_pages(db) <= cap // 8
        assert await BufferSpace(db).pages_bytes() <= cap - 256 * 1024
        [(left, newest)] = await db.fetch_all("SELECT count(*), max(key) FROM idempotency_keys")
        assert newest.startswith("c/00003999-")  # the oldest went, the newest stayed
        assert keys_evicted() - keys_before == 4_000 - left
    finally:
        await store.stop()
        await db.close()


async def test_dead_letters_are_pruned_by_age_and_size(tmp_path: Path) -> None:
    path = tmp_path / "buffer.db"
    db = SqliteDatabase(path, BUFFER_SCHEMA, "NORMAL")
    await db.open()
    cap = 1024 * 1024
    reserve = Reserve(tmp_path / "r", 4096)
    monitor = BufferMonitor(db, cap, 256 * 1024, reserve, frozenset(), Shared.private(LAYOUT))
    old, now = time.time() - 8 * 24 * 3600, time.time()
    rows = [
        ("development", f"k{i}", b"x" * 2000, 1, 400, "refused", old if i < 10 else now)
        for i in range(200)
    ]
    before = REGISTRY.get_sample_value("relay_dead_letters_pruned_entries_total") or 0.0
    try:
        async with db.transaction() as tx:
            await tx.executemany(
                "INSERT INTO dead_letters (environment, idempotency_key, body, entries, status,"
                " reason, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                rows,
            )
        await monitor.prune()  # a week at most, and an eighth of the bound (~60 of 2 KB)
        [(left,)] = await db.fetch_all("SELECT count(*) FROM dead_letters")
        assert 50 <= left <= 70, left
        pruned = (
            REGISTRY.get_sample_value("relay_dead_letters_pruned_entries_total") or 0.0
        ) - before
        assert pruned == 200 - left
        [(oldest,)] = await db.fetch_all("SELECT min(created_at) FROM dead_letters")
        assert oldest == now  # the week-old ones went first
    finally:
        await db.close()


async def test_impact_series_are_evicted_before_counts(
    make_relay: Any, upstream: FakeUpstream, tmp_path: Path
) -> None:
    """Impact series, as many as SDKs' labels make, go before counts, older or not: a
    flood of series cannot push acknowledged counts out while older series remain."""
    upstream.default = Answer(503)  # nothing leaves the buffer
    client = await make_relay(flush_interval=3600, final_flush_timeout=0.1)
    kept = bulk([metric("kept", yes=1)])
    response = await client.post("/api/client/metrics/bulk", json=kept, headers=auth(DEV_KEY))
    assert response.status == 202
    for n in range(5):
        samples = [
            {"labels": {"user": f"{n}-{i:04}-{'u' * 100}"}, "value": 1} for i in range(1_000)
        ]
        metric_ = {"name": "c", "help": "", "type": "counter", "samples": samples}
        flood = {**bulk(), "impactMetrics": [metric_]}
        response = await client.post("/api/client/metrics/bulk", json=flood, headers=auth(DEV_KEY))
        assert response.status == 202
    await client.close()
    db = SqliteDatabase(tmp_path / "relay" / "buffer.db", BUFFER_SCHEMA)
    await db.open()
    try:
        space = BufferSpace(db)
        rest = await space.rest_bytes()
        keys = await space.key_bytes()
        gone = await space.evict(rest - 256 * 1024, keys, time.time(), frozenset())
        assert gone.tables == {"impact_metrics"}
        rows = await db.fetch_all("SELECT feature_name, yes FROM metrics")
        assert [tuple(row) for row in rows] == [("kept", 1)]
    finally:
        await db.close()


async def test_a_batch_being_sent_is_never_evicted(tmp_path: Path) -> None:
    """Eviction leaves the batch the flusher is sending (so it is counted delivered or
    evicted, never both), and a batch evicted before its send starts is not sent; batches
    holding counts are never evicted at all (each count is its key's, ``relay.store.own_room``)."""
    db = SqliteDatabase(tmp_path / "buffer.db", BUFFER_SCHEMA, "NORMAL")
    await db.open()
    store = MetricsStore(db, 512, 3600.0, touched=True)
    store.start()
    outbox, space = SqliteOutbox(db, 8 * 1024), BufferSpace(db)
    seen = datetime.now(UTC)
    try:
        counted = IngestBatch()
        for i in range(10):
            counted.counts[MetricKey("app", "development", f"f-{i:04}", 0)] = Counts(yes=1)
        assert await store.write(counted, None)
        await outbox.claim({"development"}, CLAIM_ENTRIES)
        [with_counts] = await outbox.pending({"development"}, PENDING_PAGE)
        registered = IngestBatch()
        for i in range(300):
            key = RegistrationKey("app", "development", f"instance-{i:04}-{'x' * 40}")
            registered.add_registration(Registration(key, (), None, (), 15.0, None, seen))
        assert await store.write(registered, None)
        await outbox.claim({"development"}, CLAIM_ENTRIES)
        first, second, *others = [
            b for b in await outbox.pending({"development"}, PENDING_PAGE) if b.id != with_counts.id
        ]
        assert others
        async with outbox.sending(first) as there:
            assert there
            gone = await space.evict(0, 0, time.time(), outbox.in_flight)  # all it may
            assert gone.entries == 300 - first.entries
            async with outbox.sending(second) as there:
                assert not there  # evicted already: not sent
            pending = await outbox.pending({"development"}, PENDING_PAGE)
            assert sorted(b.id for b in pending) == sorted([with_counts.id, first.id])
        gone = await space.evict(0, 0, time.time(), outbox.in_flight)  # its send is over
        assert gone.entries == first.entries
        assert [b.id for b in await outbox.pending({"development"}, PENDING_PAGE)] == [
            with_counts.id
        ]
    finally:
        await store.stop()
        await db.close()


async def test_a_batch_in_flight_while_counts_flood_is_delivered_not_evicted(
    make_relay: Any, upstream: FakeUpstream
) -> None:
    """The relay's own flusher: a batch is being sent (the upstream holds its answer) when a
    flood passes the bound; it is delivered, and every entry is counted once, delivered or
    evicted."""
    upstream.default = Answer(503)
    client = await make_relay(buffer_max_bytes=1024 * 1024, upstream_timeout=60)

    async def post(entries: list[dict[str, Any]]) -> None:
        body = io.BytesIO(json.dumps(bulk(entries)).encode())
        headers = {**auth(DEV_KEY), "Content-Type": "application/json"}
        response = await client.post("/api/client/metrics/bulk", data=body, headers=headers)
        assert response.status == 202

    before = evicted()
    await post([metric(f"first-{i:03}", yes=1) for i in range(50)])
    await eventually(lambda: upstream.bulks)  # cut into a batch, refused for now
    gate = asyncio.Event()
    upstream.default = Answer(202, hold=gate)
    tried = len(upstream.bulks)
    await eventually(lambda: len(upstream.bulks) > tried)  # sent again: in flight
    posts, per_post = 10, 1_500
    for n in range(posts):
        await post([metric(f"f-{n:02}-{i:04}-{'x' * 40}", yes=1) for i in range(per_post)])
    await eventually(lambda: evicted() > before)
    upstream.default = Answer(202)
    gate.set()
    await client.close()  # the final flush sends what is left
    sent = [m["featureName"] for r in upstream.accepted_bulks() for m in r.json()["metrics"]]
    assert {f"first-{i:03}" for i in range(50)} <= set(sent)
    assert len(sent) == len(set(sent))
    assert len(sent) + (evicted() - before) == 50 + posts * per_post


async def test_registrations_are_evicted_before_counts(
    make_relay: Any, upstream: FakeUpstream
) -> None:
    """Registrations are no counts: a key that registers made-up instances while the
    upstream takes nothing (8 MB of them under a 4 MiB bound) must not make the buffer
    evict acknowledged counts while its registrations stay (they were evicted last)."""
    upstream.default = Answer(503)  # nothing leaves the buffer
    relay = await make_relay(buffer_max_bytes=CAP, backoff_max=60)
    entries = [metric(f"kept-{i:04}", yes=2, no=1) for i in range(1_000)]
    posted = await relay.post("/api/client/metrics/bulk", json=bulk(entries), headers=auth(DEV_KEY))
    assert posted.status == 202
    strategies = [f"s{i:02}-{'x' * 200}" for i in range(40)]  # ~8 kB an instance
    for n in range(10):
        apps = [
            {"appName": "made-up", "environment": "development", "instanceId": f"{n}-{i:03}"}
            | {"strategies": strategies}
            for i in range(100)
        ]
        response = await relay.post(
            "/api/client/metrics/bulk", json=bulk(applications=apps), headers=auth(DEV_KEY)
        )
        assert response.status == 202, await response.text()
    await asyncio.sleep(2 * MONITOR_INTERVAL)
    upstream.default = Answer(202)
    await relay.close()  # the final flush sends what is held
    totals = upstream.totals()
    lost = [i for i in range(1_000) if totals.get((f"kept-{i:04}", "app")) != (2, 1)]
    assert not lost, f"{len(lost)} acknowledged counts evicted for registrations"


async def test_an_instance_posting_metrics_is_evicted_after_one_that_only_registered(
    make_relay: Any, upstream: FakeUpstream, tmp_path: Path
) -> None:
    """Registrations are evicted by when their instance was last seen, its metrics posts
    included: through an outage an SDK registers once and then only posts metrics. A
    buffer that took no note of those posts evicted a running instance's registration
    before that of one registered later and gone since."""
    relay = await make_relay(flush_interval=3600)  # nothing is claimed meanwhile
    for instance in ("running", "gone"):
        body = {"appName": "app", "instanceId": instance, "interval": 15000}
        posted = await relay.post("/api/client/register", json=body, headers=auth(DEV_KEY))
        assert posted.status == 202
    toggles = {"f": {"yes": 1, "no": 0}}
    body = {"appName": "app", "instanceId": "running", "bucket": {"toggles": toggles}}
    posted = await relay.post("/api/client/metrics", json=body, headers=auth(DEV_KEY))
    assert posted.status == 202
    with sqlite3.connect(tmp_path / "relay" / "buffer.db") as buffer:
        order = buffer.execute("SELECT instance_id FROM registrations ORDER BY last_seen")
        assert [row[0] for row in order] == ["gone", "running"]  # evicted in this order
