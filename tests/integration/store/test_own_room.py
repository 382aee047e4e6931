"""Issue 33, row 1: each buffered count is its key's, and in a full buffer a key's new counts
take the room of its own oldest (``relay.store.own_room``): no key's flood, a public
frontend key's included, evicts another key's counts."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from conftest import DEV_KEY, PROD_KEY, auth, bulk, metric
from fake_upstream import Answer, FakeUpstream
from prometheus_client import REGISTRY
from service import eventually

from relay.api.shared import Layout, Room, Shared
from relay.core.errors import Unavailable, Unpaid
from relay.core.ingest_batch import NOBODY, Counts, IngestBatch, MetricKey, Origin
from relay.edge.metrics.admitted import BROWSER_SHARE, Admitted, growth, over
from relay.edge.metrics.buffer_monitor import MAX_GROWTH, BufferMonitor
from relay.store.metrics import MetricsStore, written_size
from relay.store.reserve import Reserve
from relay.store.sql import BUFFER_SCHEMA
from relay.store.sqlite import SqliteDatabase

FRONT = "default:development.frontend-secret-for-tests-0123456789"


def own_evicted(kind: str) -> float:
    return REGISTRY.get_sample_value("relay_evicted_own_entries_total", {"kind": kind}) or 0.0


def refused(kind: str) -> float:
    labels = {"kind": kind}
    return REGISTRY.get_sample_value("relay_buffer_refused_requests_total", labels) or 0.0


async def sdk_counts_then_a_flood(
    client: Any, upstream: FakeUpstream, flood: Any, kind: str
) -> list[int]:
    """An SDK's 2,220 counts (202) with DEV_KEY, then ``flood(post)`` 40 times while the
    upstream is down; then the upstream is back: every SDK count reaches it, and the
    flooder's own counts made its room. The flood's statuses."""
    sdk = [metric(f"sdk-{i:04}", yes=1) for i in range(2220)]
    for part in range(0, len(sdk), 740):
        posted = await client.post(
            "/api/client/metrics/bulk", json=bulk(sdk[part : part + 740]), headers=auth(DEV_KEY)
        )
        assert posted.status == 202
    before = own_evicted(kind)
    statuses = [await flood(post) for post in range(40)]
    assert set(statuses) <= {202, 503}, statuses
    assert own_evicted(kind) > before, statuses
    upstream.default = Answer(202)
    await client.close()
    sent = {m["featureName"] for r in upstream.accepted_bulks() for m in r.json()["metrics"]}
    assert {f"sdk-{i:04}" for i in range(2220)} <= sent
    return statuses


async def test_browser_counts_never_evict_an_sdks_counts(
    make_relay: Any, upstream: FakeUpstream
) -> None:
    """Issue 33, row 1: one caller with the public frontend key posting 500 made-up flag
    names a post into a 1 MiB buffer while nothing is flushed: past their share of it, the
    browsers' counts take the room of their own oldest, counted, and all of the SDK's counts
    reach the upstream (before: 0 of them did, with 2,000 names a post)."""
    upstream.default = Answer(503)
    client = await make_relay(buffer_max_bytes=1024 * 1024, frontend_tokens=[FRONT], backoff_max=60)
    now = datetime.now(UTC).isoformat()

    async def flood(post: int) -> int:
        toggles = {f"made-up-{post}-{i:04}": {"yes": 1, "no": 0} for i in range(500)}
        body = {"appName": "web", "bucket": {"start": now, "stop": now, "toggles": toggles}}
        posted = await client.post("/api/frontend/client/metrics", json=body, headers=auth(FRONT))
        return int(posted.status)

    statuses = await sdk_counts_then_a_flood(client, upstream, flood, "browser")
    # They go on in their own room past their share of the buffer (the fourth post fills
    # it), until the flusher's tries move what they hold into the outbox, nobody's.
    assert statuses[:8] == [202] * 8, statuses


async def test_a_client_keys_flood_never_evicts_another_keys_counts(
    make_relay: Any, upstream: FakeUpstream
) -> None:
    """Another client key floods the same 1 MiB buffer with made-up flag names: its new
    counts take the room of its own oldest, never the first key's."""
    upstream.default = Answer(503)
    client = await make_relay(buffer_max_bytes=1024 * 1024, backoff_max=60)

    async def flood(post: int) -> int:
        made_up = [metric(f"made-up-{post}-{i:04}", env="production", yes=1) for i in range(500)]
        posted = await client.post(
            "/api/client/metrics/bulk", json=bulk(made_up), headers=auth(PROD_KEY)
        )
        return int(posted.status)

    await sdk_counts_then_a_flood(client, upstream, flood, "client")


def owned(owner: int, names: list[str], hour: int = 0) -> IngestBatch:
    batch = IngestBatch(origin=Origin(owner, browser=False))
    for name in names:
        batch.counts[MetricKey("app", "development", name, hour)] = Counts(yes=1, no=2)
    return batch


async def test_new_counts_take_the_room_of_their_own_keys_oldest(tmp_path: Path) -> None:
    """The buffer's rule (``relay.store.own_room``) on a real file: a key's new counts in a
    full buffer delete as many bytes of its own oldest counts, never another key's nor one
    the request adds to; counts it only adds to take no room; a key holding too little is
    refused (``Unpaid``, a 503) and nothing is deleted for it; a count two keys added to
    is nobody's."""
    db = SqliteDatabase(tmp_path / "buffer.db", BUFFER_SCHEMA, "NORMAL")
    await db.open()
    store = MetricsStore(db, 512, 3600.0, touched=True, group_bytes=1024)
    store.start()
    mine, theirs = 11, 22

    async def paid(batch: IngestBatch) -> None:
        await store.make_room(batch)
        assert await store.write(batch, None)

    try:
        assert await store.write(owned(mine, [f"old-{i:03}" for i in range(100)], hour=0), None)
        assert await store.write(owned(theirs, [f"their-{i:03}" for i in range(50)]), None)
        await asyncio.sleep(0.1)  # what is written while room is made stays: these are older
        before = own_evicted("client")
        await paid(owned(mine, [f"old-{i:03}" for i in range(100)], hour=0))  # no room taken
        assert own_evicted("client") == before
        await asyncio.sleep(0.1)
        new = owned(mine, ["old-000", *(f"new-{i:03}" for i in range(10))], hour=1)
        new.counts[MetricKey("app", "development", "old-001", 0)] = Counts(yes=5)
        await paid(new)
        assert own_evicted("client") == before + 11  # its eleven new counts' room
        rows = await db.fetch_all("SELECT feature_name, hour, yes, owner FROM metrics")
        held = {(r[0], r[1]): (r[2], r[3]) for r in rows}
        assert held[("old-001", 0)] == (7, mine)  # spared: the request adds to it
        assert all(held[(f"their-{i:03}", 0)] == (1, theirs) for i in range(50))
        assert len([k for k in held if k[1] == 0 and k[0].startswith("old-")]) == 100 - 11
        assert len([k for k in held if k[1] == 1]) == 11
        with pytest.raises(Unpaid):
            await store.make_room(owned(33, ["nobody-holds-this"]))
        with pytest.raises(Unavailable):  # answered 503
            await store.make_room(owned(theirs, [f"x-{i:03}" for i in range(60)]))
        assert len(await db.fetch_all("SELECT 1 FROM metrics WHERE owner = 22")) == 50
        shared = MetricKey("app", "development", "their-000", 0)
        both = owned(mine, [])
        both.counts[shared] = Counts(yes=1)
        assert await store.write(both, None)
        [(owner,)] = await db.fetch_all(
            "SELECT owner FROM metrics WHERE feature_name = 'their-000'"
        )
        assert owner == NOBODY  # two keys' now: neither pays with it
    finally:
        await store.stop()
        await db.close()


async def test_browser_counts_wait_for_the_leaders_look_not_an_estimate(tmp_path: Path) -> None:
    """Browser counts taken past their share only by the estimate of what was written since
    the leader last measured (here at 16 file bytes a byte written, as a first small check
    can see) wait for its next look, and go in. Refused on the estimate, they got 503 until
    the next periodic check while the files had room (in CI: forty posts in a row)."""
    cap = 1024 * 1024
    db = SqliteDatabase(tmp_path / "buffer.db", BUFFER_SCHEMA, "NORMAL")
    await db.open()
    shared = Shared.private(Layout.of(1, 10))
    monitor = BufferMonitor(db, cap, 256 * 1024, Reserve(tmp_path / "r", 4096), frozenset(), shared)
    store = MetricsStore(db, 512, 3600.0, touched=True)
    sink = Admitted(store, None, shared, cap)
    store.start()

    async def lead() -> None:
        """The leader's loop (``relay.edge.wiring``), looking as often as a flood wakes it."""
        while True:
            await monitor.listen()
            if monitor.wake.is_set():
                await monitor.check()
            await asyncio.sleep(0.01)

    await monitor.check()
    leader = asyncio.create_task(lead())
    try:
        assert await sink.write(owned(11, [f"sdk-{i:04}" for i in range(740)]), None)
        shared.measured(shared.room(Room.HELD), shared.room(Room.MARK), False, MAX_GROWTH)
        browser = IngestBatch(origin=Origin(22, browser=True))
        for i in range(500):
            browser.counts[MetricKey("web", "development", f"made-up-{i:04}", 0)] = Counts(yes=1)
        shared.admit(written_size(browser, None))
        assert over(shared, int(cap * BROWSER_SHARE))  # by the estimate
        shared.withdraw(written_size(browser, None))
        before = refused("browser"), own_evicted("browser")
        assert await sink.write(browser, None)
        assert (refused("browser"), own_evicted("browser")) == before
        assert growth(shared) < MAX_GROWTH  # what the look measured
        # many at once wait for one look, woken together by it (one watch of the words)
        shared.measured(shared.room(Room.HELD), 0, False, MAX_GROWTH)  # all of it unmeasured
        checks = shared.room(Room.ROUNDS)
        many = [IngestBatch(origin=Origin(22, browser=True)) for _ in range(200)]
        for n, batch in enumerate(many):
            batch.counts[MetricKey("web", "development", f"many-{n:03}", 0)] = Counts(yes=1)
        assert all(await asyncio.gather(*(sink.write(batch, None) for batch in many)))
        assert (refused("browser"), own_evicted("browser")) == before
        assert shared.room(Room.ROUNDS) > checks  # they waited, and asked for the look
        assert shared.wanted() == 0
        # requests whose clients leave while they wait take their want with them
        leader.cancel()
        shared.measured(shared.room(Room.HELD), 0, False, MAX_GROWTH)
        waiting = [asyncio.create_task(sink.write(batch, None)) for batch in many[:5]]
        await eventually(lambda: shared.wanted() == 1, "the browsers' want told")
        for task in waiting:
            task.cancel()
        await asyncio.gather(*waiting, return_exceptions=True)
        assert shared.wanted() == 0
    finally:
        leader.cancel()
        await store.stop()
        await db.close()


async def test_room_is_chosen_past_the_first_page_in_a_stable_order(tmp_path: Path) -> None:
    """600 counts of one key written at one instant (one hour, one ``touched``): a request
    that adds to the 300 first by name, with 20 new ones, takes the room of the next 20 by
    name, read past the first page of candidates (256), none twice nor skipped."""
    db = SqliteDatabase(tmp_path / "buffer.db", BUFFER_SCHEMA, "NORMAL")
    await db.open()
    store = MetricsStore(db, 512, 3600.0, touched=True)
    store.start()
    names = [f"old-{i:03}" for i in range(600)]
    try:
        assert await store.write(owned(11, names), None)
        request = owned(11, [*names[:300], *(f"new-{i:03}" for i in range(20))], hour=0)
        await store.make_room(request)
        rows = await db.fetch_all("SELECT feature_name FROM metrics")
        gone = set(names) - {row[0] for row in rows}
        assert gone == set(names[300:320])
    finally:
        await store.stop()
        await db.close()


async def test_a_waiting_request_sees_what_the_leader_said_before_the_watch_began(
    tmp_path: Path,
) -> None:
    """The leader's word that only counts are left (``Room.DRY``) said between a request's
    look and the start of the worker's watch still wakes it: it pays at once (here 503: its
    key holds nothing), not at the next check or its deadline."""
    cap = 1024 * 1024
    db = SqliteDatabase(tmp_path / "buffer.db", BUFFER_SCHEMA, "NORMAL")
    await db.open()
    shared = Shared.private(Layout.of(1, 10))
    store = MetricsStore(db, 512, 3600.0, touched=True)
    sink = Admitted(store, None, shared, cap)
    store.start()
    try:
        shared.measured(2 * cap, shared.settled(), False, 3.0)  # over: it waits for room
        waiting = asyncio.create_task(sink.write(owned(11, ["new"]), None))
        await asyncio.sleep(0)  # it asked, and the watch is made but has not looked yet
        assert shared.wanted() > 0
        shared.set_room(Room.DRY, 1)
        with pytest.raises(Unpaid):
            await asyncio.wait_for(waiting, 1.0)
        assert shared.wanted() == 0
    finally:
        await store.stop()
        await db.close()
