"""Issue 13, item 3: eviction keeps the newest data, in small steps, with the WAL counted
and the check triggered by what is written, not only by time."""

from __future__ import annotations

import asyncio
import io
import json
import os
import time
from pathlib import Path
from typing import Any

from conftest import DEV_KEY, auth, bulk, metric
from fake_upstream import Answer, FakeUpstream
from prometheus_client import REGISTRY
from service import eventually

from relay.edge.buffer_monitor import BufferMonitor
from relay.edge.reserve import Reserve
from relay.edge.space import BufferSpace
from relay.edge.wiring import MONITOR_INTERVAL
from relay.store.sql import BUFFER_SCHEMA
from relay.store.sqlite import SqliteDatabase

CAP = 4 * 1024 * 1024
PER_POST = 4_000


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
    """A caller sending a new key with every empty request: the keys are bounded with the
    rest, oldest first, and counted; counts of others are not pushed out by them."""
    client = await make_relay(buffer_max_bytes=1024 * 1024, flush_interval=3600)
    assert (
        await client.post(
            "/api/client/metrics/bulk", json=bulk([metric("kept", yes=1)]), headers=auth(DEV_KEY)
        )
    ).status == 202
    before = REGISTRY.get_sample_value("relay_idempotency_keys_evicted_total") or 0.0
    largest = 0

    async def keyed(n: int) -> None:
        headers = {**auth(DEV_KEY), "Idempotency-Key": f"{n:08d}-{'k' * 240}"}
        response = await client.post("/api/client/metrics/bulk", json=bulk(), headers=headers)
        assert response.status == 202

    for start in range(0, 8_000, 100):
        await asyncio.gather(*(keyed(n) for n in range(start, start + 100)))
        largest = max(largest, footprint(tmp_path / "relay"))
    after = REGISTRY.get_sample_value("relay_idempotency_keys_evicted_total") or 0.0
    assert after > before
    assert largest < 5 * 1024 * 1024, largest  # all the keys take ~8.5 MB
    await client.close()
    assert upstream.totals() == {("kept", "app"): (1, 0)}


async def test_dead_letters_are_pruned_by_age_and_size(tmp_path: Path) -> None:
    path = tmp_path / "buffer.db"
    db = SqliteDatabase(path, BUFFER_SCHEMA, "NORMAL")
    await db.open()
    cap = 1024 * 1024
    monitor = BufferMonitor(db, cap, 256 * 1024, asyncio.sleep, Reserve(tmp_path / "r", 4096))
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
        gone = await space.evict(await space.pages_bytes() - 256 * 1024, time.time())
        assert gone.tables == {"impact_metrics"}
        rows = await db.fetch_all("SELECT feature_name, yes FROM metrics")
        assert [tuple(row) for row in rows] == [("kept", 1)]
    finally:
        await db.close()


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
