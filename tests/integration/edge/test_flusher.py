"""Relay flushing against a fault-injecting upstream: every answer the upstream can give."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path
from typing import Any

import pytest
from bufferkit import dead_letters
from conftest import DEV_KEY, PROD_KEY, auth, bulk, metric, post, relay_settings
from fake_upstream import Answer, FakeUpstream
from prometheus_client import REGISTRY
from service import eventually, sample

from relay.app import build_app

pytestmark = pytest.mark.workers  # at one worker and at two (conftest.make_relay)

REGISTRATION = {
    "appName": "app",
    "environment": "development",
    "instanceId": "i1",
    "connectVia": [{"appName": "edge-b", "instanceId": "b1"}],
}


async def test_counts_are_aggregated_and_flushed_once_per_environment_per_interval(
    make_relay: Any, upstream: FakeUpstream
) -> None:
    client = await make_relay(flush_interval=3600)  # only the final flush on shutdown
    for _ in range(50):
        assert (await post(client, bulk([metric(yes=1, no=2, variants={"v": 1})], [REGISTRATION])))[
            0
        ] == 202
    assert (await post(client, bulk([metric(env="production", yes=7)]), PROD_KEY))[0] == 202
    assert upstream.bulks == []
    await client.close()  # graceful shutdown: the final flush
    assert len(upstream.bulks) == 2
    by_env = {r.headers["Authorization"]: r for r in upstream.bulks}
    dev = by_env[DEV_KEY].json()
    assert [(m["yes"], m["no"], m["variants"]) for m in dev["metrics"]] == [(50, 100, {"v": 50})]
    [app] = dev["applications"]
    assert app["connectVia"] == [
        {"appName": "edge-b", "instanceId": "b1"},
        {"appName": "relay", "instanceId": "relay-under-test"},
    ]
    assert app["interval"] == 0 and app["started"]  # a real Unleash refuses them missing
    assert [m["yes"] for m in by_env[PROD_KEY].json()["metrics"]] == [7]
    keys = {r.headers["Idempotency-Key"] for r in upstream.bulks}
    assert len(keys) == 2


async def test_counts_posted_while_flushing_are_neither_lost_nor_doubled(
    make_relay: Any, upstream: FakeUpstream
) -> None:
    client = await make_relay(flush_interval=0.01)
    upstream.default = Answer(202, delay=0.005)
    posted = 0

    async def post_300_more_while_flushing() -> bool:
        nonlocal posted
        answers = await asyncio.gather(*(post(client, bulk([metric(yes=1)])) for _ in range(300)))
        assert {status for status, _ in answers} == {202}
        posted += 300
        return len(upstream.bulks) > 1  # a slow machine may answer 300 posts in one interval

    await eventually(post_300_more_while_flushing, "flushes while posts arrive")
    await client.close()
    assert upstream.totals() == {("f1", "app"): (posted, 0)}
    assert len(upstream.bulks) > 1  # flushes really ran while posts arrived


async def test_413_splits_batches_until_they_fit(
    make_relay: Any, upstream: FakeUpstream, tmp_path: Path
) -> None:
    upstream.default = Answer(202, too_large_over=3000)
    client = await make_relay()
    assert (
        await post(client, bulk([metric(feature=f"feature-{i}", yes=i + 1) for i in range(100)]))
    )[0] == 202
    expected = {(f"feature-{i}", "app"): (i + 1, 0) for i in range(100)}
    await eventually(lambda: upstream.totals() == expected)
    assert any(r.headers["X-Fake-Status"] == "413" for r in upstream.bulks)
    assert dead_letters(tmp_path / "relay") == []


async def test_a_single_entry_still_too_large_is_dead_lettered(
    make_relay: Any, upstream: FakeUpstream, tmp_path: Path
) -> None:
    upstream.default = Answer(202, too_large_over=3000)
    client = await make_relay()
    huge = metric(
        feature="huge", yes=1, variants={f"variant-{i:03}-{'x' * 40}": 1 for i in range(80)}
    )
    assert (await post(client, bulk([huge, metric(feature="small", yes=2)])))[0] == 202
    await eventually(lambda: upstream.totals() == {("small", "app"): (2, 0)})
    await eventually(lambda: len(dead_letters(tmp_path / "relay")) == 1)
    [(status, entries, _)] = dead_letters(tmp_path / "relay")
    assert (status, entries) == (413, 1)
    text = await (await client.get("/internal-backstage/metrics")).text()
    assert "relay_dead_lettered_entries_total" in text


async def test_400_is_dead_lettered_with_its_reason_and_later_batches_flow(
    make_relay: Any, upstream: FakeUpstream, tmp_path: Path
) -> None:
    upstream.script = [Answer(400, body=b'{"message": "nope"}')]
    client = await make_relay()
    assert (await post(client, bulk([metric(yes=1)])))[0] == 202
    await eventually(lambda: len(dead_letters(tmp_path / "relay")) == 1)
    [(status, entries, reason)] = dead_letters(tmp_path / "relay")
    assert (status, entries) == (400, 1) and "nope" in reason
    assert (await post(client, bulk([metric(yes=5)])))[0] == 202
    await eventually(lambda: upstream.totals() == {("f1", "app"): (5, 0)})


async def test_401_keeps_the_batch_and_retries_after_a_long_backoff(
    make_relay: Any, upstream: FakeUpstream
) -> None:
    upstream.script = [Answer(401), Answer(403)]
    client = await make_relay(backoff_max=0.3)
    assert (await post(client, bulk([metric(yes=3)])))[0] == 202
    await eventually(lambda: upstream.totals() == {("f1", "app"): (3, 0)})
    statuses = [r.headers["X-Fake-Status"] for r in upstream.bulks]
    assert statuses == ["401", "403", "202"]
    assert len({r.headers["Idempotency-Key"] for r in upstream.bulks}) == 1
    gaps = [b.at - a.at for a, b in zip(upstream.bulks, upstream.bulks[1:], strict=False)]
    assert all(gap >= 0.25 for gap in gaps)  # waited backoff_max, not the 50 ms interval


async def test_429_honours_retry_after(make_relay: Any, upstream: FakeUpstream) -> None:
    upstream.script = [Answer(429, headers={"Retry-After": "1"})]
    client = await make_relay(backoff_max=5)
    assert (await post(client, bulk([metric(yes=1)])))[0] == 202
    await eventually(lambda: upstream.totals() == {("f1", "app"): (1, 0)})
    first, second = upstream.bulks
    assert second.at - first.at >= 0.95
    assert first.headers["Idempotency-Key"] == second.headers["Idempotency-Key"]


async def test_5xx_retries_with_the_same_idempotency_key_and_backs_off(
    make_relay: Any, upstream: FakeUpstream
) -> None:
    upstream.script = [Answer(500), Answer(502), Answer(503)]
    client = await make_relay(backoff_max=0.4)
    assert (await post(client, bulk([metric(yes=2)])))[0] == 202
    await eventually(lambda: upstream.totals() == {("f1", "app"): (2, 0)})
    assert [r.headers["X-Fake-Status"] for r in upstream.bulks] == ["500", "502", "503", "202"]
    assert len({r.headers["Idempotency-Key"] for r in upstream.bulks}) == 1
    text = await (await client.get("/internal-backstage/metrics")).text()
    assert 'relay_flush_batches_total{outcome="retry"}' in text


async def test_timeouts_are_retried_with_the_same_key(
    make_relay: Any, upstream: FakeUpstream
) -> None:
    upstream.script = [Answer(202, delay=1.0)]  # answers after the relay gave up
    client = await make_relay(upstream_timeout=0.2)
    assert (await post(client, bulk([metric(yes=4)])))[0] == 202
    await eventually(lambda: len(upstream.bulks) >= 2)
    first, second = upstream.bulks[:2]
    assert first.headers["Idempotency-Key"] == second.headers["Idempotency-Key"]
    assert upstream.totals() == {("f1", "app"): (4, 0)}  # upstream deduplicates by key


async def test_ready_without_upstream_and_counts_wait_on_disk(
    make_relay: Any, upstream: FakeUpstream, tmp_path: Path
) -> None:
    upstream.default = Answer(503)  # to counts; its flags are served
    client = await make_relay(backoff_max=0.2)

    async def ready() -> bool:
        return (await client.get("/ready")).status == 200

    await eventually(ready, "ready: the configured keys have their flags")
    for _ in range(5):
        assert (await post(client, bulk([metric(yes=1)])))[0] == 202
    await eventually(lambda: len(upstream.bulks) >= 2)
    upstream.default = Answer(202)
    await eventually(lambda: upstream.totals() == {("f1", "app"): (5, 0)})


async def test_a_full_buffer_evicts_the_oldest_hour(
    make_relay: Any, upstream: FakeUpstream
) -> None:
    upstream.default = Answer(503)
    # the bound counts pages on disk (indexes, WAL): one hour's 4,500 entries take ~1.4 MB
    # (with the time each was first written), three pass the bound well (two came within a
    # WAL's size of it), and one fits in what counts have after the WAL's and keys' parts
    # (at 11/4 MiB it did not always: 42 of the newest hour's went)
    # no flush until the close: batches the flusher cuts meanwhile would take counts of any
    # hour out of the order the counts table keeps (docs/relays.md: outbox batches)
    client = await make_relay(
        buffer_max_bytes=3 * 1024 * 1024,
        backoff_max=60,
        flush_interval=3600,
        final_flush_timeout=120,  # what is kept (two hours' worth) sent whole however loaded
    )
    before = REGISTRY.get_sample_value("relay_evicted_entries_total") or 0
    hours = ("2026-01-01T00:00:00Z", "2026-01-01T01:00:00Z", "2026-01-01T02:00:00Z")
    for hour in hours:
        entries = [
            metric(feature=f"feature-{i:05}-{'x' * 60}", yes=1, timestamp=hour) for i in range(4500)
        ]
        response = await client.post(
            "/api/client/metrics/bulk",
            data=io.BytesIO(json.dumps(bulk(entries)).encode()),
            headers={**auth(DEV_KEY), "Content-Type": "application/json"},
        )
        assert response.status == 202

    async def evicted_some() -> bool:
        return await _evicted(client) > before

    await eventually(evicted_some, within=15)
    upstream.default = Answer(202)
    await client.close()  # the final flush sends what is left
    evicted = (REGISTRY.get_sample_value("relay_evicted_entries_total") or 0) - before
    sent: dict[str, int] = {}
    for request in upstream.accepted_bulks():
        for m in request.json()["metrics"]:
            sent[m["timestamp"]] = sent.get(m["timestamp"], 0) + 1
    assert sent[hours[-1]] == 4500  # the newest hour is kept whole
    assert sent.get(hours[0], 0) < 4500
    assert sum(sent.values()) + evicted == 3 * 4500  # each entry sent or counted evicted


async def _evicted(client: Any) -> int:
    text = await (await client.get("/internal-backstage/metrics")).text()
    for line in text.splitlines():
        if line.startswith("relay_evicted_entries_total "):
            return int(float(line.split()[1]))
    return 0


async def test_upstream_requests_do_not_grow_with_sdk_requests(
    make_relay: Any, upstream: FakeUpstream
) -> None:
    """Posts arriving during a flush wait for the next interval instead of extending it."""
    client = await make_relay(flush_interval=0.3)
    upstream.default = Answer(202, delay=0.02)
    loop = asyncio.get_running_loop()
    started = loop.time()
    posts = 0
    while loop.time() - started < 1.5:
        answers = await asyncio.gather(*(post(client, bulk([metric(yes=1)])) for _ in range(10)))
        assert {status for status, _ in answers} == {202}
        posts += 10
    elapsed = loop.time() - started
    await client.close()
    assert upstream.totals() == {("f1", "app"): (posts, 0)}
    intervals = elapsed / 0.3
    assert len(upstream.bulks) <= intervals + 2, (len(upstream.bulks), posts)


async def test_a_slow_upstream_does_not_grow_tasks_and_backoff_shows(
    make_relay: Any, upstream: FakeUpstream
) -> None:
    upstream.default = Answer(202, delay=1.5)  # always slower than the relay waits
    client = await make_relay(upstream_timeout=0.1, backoff_max=0.4)
    for _ in range(20):
        assert (await post(client, bulk([metric(yes=1)])))[0] == 202
    await eventually(lambda: len(upstream.bulks) >= 2)
    tasks = len(asyncio.all_tasks())
    attempts = len(upstream.bulks)
    await eventually(lambda: len(upstream.bulks) >= attempts + 4)  # timed out, backed off
    for _ in range(20):
        assert (await post(client, bulk([metric(yes=1)])))[0] == 202
    assert len(asyncio.all_tasks()) <= tasks + 2  # no task per attempt or per request is left
    text = await (await client.get("/internal-backstage/metrics")).text()
    assert sample(text, "relay_flush_batches_total", outcome="retry") >= 2
    gaps = [b.at - a.at for a, b in zip(upstream.bulks, upstream.bulks[1:], strict=False)]
    assert all(gap >= 0.09 for gap in gaps)  # backed off, never a tight retry loop


async def test_a_garbage_upstream_gives_503_not_500(aiohttp_client: Any, tmp_path: Path) -> None:
    fake = FakeUpstream()
    fake.validate_answer = Answer(
        200, headers={"Content-Type": "application/json"}, body=b"\x00not json{"
    )
    url = await fake.start()
    try:
        settings = relay_settings(tmp_path, url, client_tokens=[])
        client = await aiohttp_client(build_app(settings))
        response = await client.post(
            "/api/client/metrics/bulk", json=bulk([metric(yes=1)]), headers=auth(DEV_KEY)
        )
        assert response.status == 503
        assert (await response.json())["name"] == "ServiceUnavailableError"
    finally:
        await fake.close()
