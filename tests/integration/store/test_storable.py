"""Issue 13, item 2: whatever the API accepts can be stored on both backends; one request's
data cannot fail the requests sharing its transaction; no batch blocks the outbox forever."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from conftest import (
    assert_error,
    bulk,
    metric,
    post,
    raw,
    standalone_settings,
)
from fake_upstream import Answer, FakeUpstream, Received
from impactkit import FOUR_BYTES
from prometheus_client import REGISTRY
from service import eventually

from relay.central.database import central_database
from relay.core import errors
from relay.core.ingest_batch import IdempotencyKey, IngestBatch, MetricKey
from relay.store.metrics import MetricsStore

TWO_BYTES = "\u0436" * 255  # 255 characters, 510 bytes: within the rule


@pytest.mark.parametrize(
    ("path", "body", "pointer"),
    [
        (
            "/api/client/metrics/bulk",
            bulk([metric("ok", yes=1), metric(FOUR_BYTES, yes=1)]),
            "/body/metrics/1/featureName",
        ),
        (
            "/api/client/metrics/bulk",
            bulk([metric("ok", app=FOUR_BYTES, yes=1)]),
            "/body/metrics/0/appName",
        ),
        (
            "/api/client/metrics/bulk",
            bulk([metric("ok", yes=1, variants={FOUR_BYTES: 1})]),
            f"/body/metrics/0/variants/{FOUR_BYTES}",
        ),
        (
            "/api/client/metrics/bulk",
            bulk(
                applications=[
                    {"appName": "a", "environment": "development", "instanceId": FOUR_BYTES}
                ]
            ),
            "/body/applications/0/instanceId",
        ),
        (
            "/api/client/metrics",
            {"appName": "a", "bucket": {"toggles": {FOUR_BYTES: {"yes": 1}}}},
            f"/body/bucket/toggles/{FOUR_BYTES}",
        ),
        ("/api/client/register", {"appName": FOUR_BYTES}, "/body/appName"),
    ],
    ids=["feature", "app", "variant", "instance", "sdk-toggle", "sdk-register"],
)
async def test_names_too_long_to_store_are_refused_alike_on_both_backends(
    client: Any, path: str, body: Any, pointer: str
) -> None:
    status, error = await post(client, body, path=path)
    assert status == 400, error
    assert_error(error, "BadDataError")
    assert error["details"][0]["path"] == pointer
    assert "512 bytes" in error["message"]
    assert await raw(client, "ok") == []  # nothing of the request was stored


async def test_the_longest_storable_names_are_stored_and_read_back(client: Any) -> None:
    body = bulk([metric(TWO_BYTES, app=TWO_BYTES, yes=2, variants={TWO_BYTES: 1})])
    assert (await post(client, body))[0] == 202
    [row] = await raw(client, TWO_BYTES)
    assert (row["appName"], row["yes"], row["variants"]) == (TWO_BYTES, 2, {TWO_BYTES: 1})


async def test_names_of_entries_not_stored_are_not_held_against_the_request(
    client: Any,
) -> None:
    """Entries for another environment, or with no count, are dropped, names and all."""
    long = "a" * 200  # long, but within the rule: the exact check runs
    body = bulk(
        [
            metric(long, yes=1),
            metric(FOUR_BYTES, env="production", yes=1),
            metric(FOUR_BYTES, yes=0, variants={"v": 0}),
        ]
    )
    assert (await post(client, body))[0] == 202
    sdk = {"appName": long, "bucket": {"toggles": {long: {"yes": 1}, FOUR_BYTES: {"no": 0}}}}
    assert (await post(client, sdk, path="/api/client/metrics"))[0] == 202
    assert sum(row["yes"] for row in await raw(client, long)) == 2


async def test_the_rule_is_in_the_openapi_document(client: Any) -> None:
    document = await (await client.get("/docs/openapi.json")).json()
    entry = document["components"]["schemas"]["ClientMetricsEnv"]["properties"]["featureName"]
    assert entry["maxLength"] == 255 and "512 bytes in UTF-8" in entry["description"]


async def test_concurrent_requests_are_not_failed_by_one_that_cannot_be_stored(
    make_client: Any,
) -> None:
    """A request the database refuses shares its group commit with others: they are
    committed without it. Here through HTTP, with a name PostgreSQL cannot index."""
    client = await make_client(commit_max_requests=512)
    innocent = [bulk([metric(f"f{i % 5}", yes=1)]) for i in range(200)]
    bad = bulk([metric(FOUR_BYTES, app=FOUR_BYTES, yes=1, variants={FOUR_BYTES: 1})])
    answers = await asyncio.gather(
        *(post(client, body) for body in [*innocent[:100], bad, *innocent[100:]])
    )
    statuses = [status for status, _ in answers]
    assert statuses.count(202) == 200 and statuses[100] == 400
    for i in range(5):
        assert sum(row["yes"] for row in await raw(client, f"f{i}")) == 40


async def test_one_unstorable_batch_fails_alone_in_its_group(
    database_url: str | None, backend: str, tmp_path: Path
) -> None:
    """Below the API's validation: values the database itself refuses (a count past 64 bits
    on both backends; on PostgreSQL a key too large for its index)."""
    db = central_database(standalone_settings(tmp_path, database_url=database_url))
    await db.open()
    store = MetricsStore(db, max_group=512, idempotency_ttl=3600)
    store.start()

    def batch(feature: str, yes: int, app: str = "app", variant: str = "") -> IngestBatch:
        one = IngestBatch()
        variants = {variant: 1} if variant else {}
        one.add_count(MetricKey(app, "development", feature, 3600), yes, 0, variants)
        return one

    poison = [batch("overflow", 2**64)]
    if backend == "postgres":  # (feature, app, environment, hour, variant) over 2,704 bytes
        poison.append(batch(FOUR_BYTES, 1, app=FOUR_BYTES, variant=FOUR_BYTES))
    try:
        writes = [
            store.write(batch(f"f{i % 7}", 1), IdempotencyKey("c", f"key-{i}", "fp"))
            for i in range(300)
        ]
        writes[50:50] = [store.write(p, None) for p in poison]
        outcomes = await asyncio.gather(*writes, return_exceptions=True)
        refused = outcomes[50 : 50 + len(poison)]
        assert all(isinstance(o, errors.Unstorable) for o in refused), refused
        assert outcomes[:50] + outcomes[50 + len(poison) :] == [True] * 300
        rows = await db.fetch_all("SELECT sum(yes) FROM metrics")
        assert rows[0][0] == 300
    finally:
        await store.stop()
        await db.close()


def stuck(received: Received) -> Answer | None:
    """503 to every body holding feature ``stuck``, forever (the fake's ``bulk_answer``)."""
    return Answer(503) if b'"featureName":"stuck"' in received.body else None


async def test_a_batch_that_always_fails_does_not_hold_back_later_ones(
    make_relay: Any, upstream: FakeUpstream, tmp_path: Path
) -> None:
    upstream.bulk_answer = stuck
    client = await make_relay(backoff_max=0.1)
    first = [metric(f"first-{i}", yes=1) for i in range(6)]
    body = bulk([*first, metric("stuck", yes=9)])
    assert (await post(client, body))[0] == 202
    await eventually(lambda: len(upstream.bulks) >= 2)
    for i in range(12):  # later counts flow while the stuck batch fails
        body = bulk([metric(f"later-{i}", yes=1)])
        assert (await post(client, body))[0] == 202
        await eventually(lambda i=i: (f"later-{i}", "app") in upstream.totals())
    # failing while the upstream accepts others, it is set aside whole, with its key: a 5xx
    # does not say it was not applied, so it is never split under new keys
    with sqlite3.connect(tmp_path / "relay" / "buffer.db") as conn:

        def dead() -> list[tuple[Any, ...]]:
            return list(conn.execute("SELECT status, entries, reason FROM dead_letters"))

        await eventually(lambda: len(dead()) == 1, within=30)
        [(status, entries, reason)] = dead()
        [(key,)] = conn.execute("SELECT idempotency_key FROM dead_letters")
    assert (status, entries) == (503, 7) and "while the upstream accepted other batches" in reason
    assert all(r.headers["Idempotency-Key"] == key for r in upstream.bulks if b"stuck" in r.body)
    assert not any(name.startswith("first") for name, _ in upstream.totals())
    failing = REGISTRY.get_sample_value("relay_dead_lettered_entries_total", {"reason": "failing"})
    assert failing is not None and failing >= 7
