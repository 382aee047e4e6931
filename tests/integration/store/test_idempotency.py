"""Issue 13, item 6: Idempotency-Keys are scoped by caller and bound to their request.

A retry (same key, same request) is answered 202 and applied once; the same key with a
different body is refused with 422 and a JSON error (the IETF Idempotency-Key draft), never
silently dropped; two callers using the same key are two requests.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from conftest import DEV_KEY, PROD_KEY, assert_error, bulk, metric, post, raw
from fake_upstream import FakeUpstream

from relay.core import errors, ingest_batch
from relay.core.ingest_batch import IngestBatch, MetricKey
from relay.store.metrics import MetricsStore
from relay.store.sql import CENTRAL_SCHEMA
from relay.store.sqlite import SqliteDatabase


def once(key: str) -> dict[str, str]:
    return {"Idempotency-Key": key}


async def total(client: Any, feature: str) -> int:
    return sum(row["yes"] for row in await raw(client, feature))


async def test_a_key_reused_with_another_body_is_422_and_not_dropped_silently(client: Any) -> None:
    first = bulk([metric("f", yes=1)])
    assert (await post(client, first, headers=once("k-1")))[0] == 202
    assert (await post(client, first, headers=once("k-1")))[0] == 202  # a retry: applied once
    status, body = await post(client, bulk([metric("f", yes=50)]), headers=once("k-1"))
    assert status == 422
    assert_error(body, "UnprocessableContentError")
    assert "Idempotency-Key" in body["message"]
    assert await total(client, "f") == 1
    # the same key on another endpoint is another request too
    sdk = {"appName": "app", "bucket": {"toggles": {"f": {"yes": 1}}}}
    assert (await post(client, sdk, path="/api/client/metrics", headers=once("k-1")))[0] == 422


async def test_the_same_key_from_two_callers_is_two_requests(client: Any) -> None:
    """Two environments' SDKs pick the same key: both are applied."""
    for key, env in ((DEV_KEY, "development"), (PROD_KEY, "production")):
        status, _ = await post(
            client, bulk([metric("shared", env=env, yes=3)]), key, headers=once("same")
        )
        assert status == 202
    rows = await raw(client, "shared")
    assert sorted((row["environment"], row["yes"]) for row in rows) == [
        ("development", 3),
        ("production", 3),
    ]


async def test_a_relay_scopes_keys_and_refuses_reuse_too(
    make_relay: Any, upstream: FakeUpstream
) -> None:
    client = await make_relay(flush_interval=3600)
    for key, env in ((DEV_KEY, "development"), (PROD_KEY, "production")):
        assert (await post(client, bulk([metric(env=env, yes=2)]), key, headers=once("same")))[
            0
        ] == 202
    assert (await post(client, bulk([metric(yes=9)]), DEV_KEY, headers=once("same")))[0] == 422
    await client.close()
    sent = sorted(
        (m["environment"], m["yes"]) for r in upstream.accepted_bulks() for m in r.json()["metrics"]
    )
    assert sent == [("development", 2), ("production", 2)]


async def test_one_key_with_two_bodies_in_one_group_applies_one(tmp_path: Path) -> None:
    db = SqliteDatabase(tmp_path / "g.db", CENTRAL_SCHEMA, "NORMAL")
    await db.open()
    store = MetricsStore(db, max_group=64, idempotency_ttl=3600)
    store.start()

    def batch(yes: int) -> IngestBatch:
        one = IngestBatch()
        one.add_count(MetricKey("app", "development", "g", 3600), yes, 0, {})
        return one

    try:
        outcomes = await asyncio.gather(
            store.write(batch(1), ingest_batch.IdempotencyKey("caller", "k", "body-a")),
            store.write(batch(1), ingest_batch.IdempotencyKey("caller", "k", "body-a")),
            store.write(batch(7), ingest_batch.IdempotencyKey("caller", "k", "body-b")),
            store.write(batch(5), ingest_batch.IdempotencyKey("other", "k", "body-b")),
            return_exceptions=True,
        )
        assert outcomes[:2] == [True, False] and outcomes[3] is True
        assert isinstance(outcomes[2], errors.KeyReused)
        [row] = await db.fetch_all("SELECT yes FROM metrics")
        assert row[0] == 6
    finally:
        await store.stop()
        await db.close()
