"""Issue 13, item 1: valid input never makes a batch the upstream refuses, and a batch it
refuses anyway costs only the entries it refuses on their own.

The upstream here checks every body against the bulk model (the contract: counts up to
2^31-1, 100 variants, 100 connectVia hops, 1,000 registrations, 10,000 metrics) and answers
400 to a body that breaks it, as our standalone and Unleash do.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from bufferkit import dead_letters
from conftest import DEV_KEY, auth, bulk, metric, post, raw, standalone_settings
from fake_upstream import Answer, FakeUpstream, Received
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client import REGISTRY
from pydantic import ValidationError
from service import eventually

from relay.central.database import central_database
from relay.central.usage import UsageReader
from relay.central.usage_records import SqlUsageRecords
from relay.core.convert import from_bulk
from relay.core.ingest_batch import IngestBatch, MetricKey
from relay.edge.metrics.flusher import REFUSALS
from relay.settings import SettingsError, load_settings
from relay.store.fold import Folder
from relay.store.metrics import MetricsStore
from relay.store.outbox import SqliteOutbox
from relay.store.shards import drain_shards
from relay.store.sql import BUFFER_SCHEMA
from relay.store.sqlite import SqliteDatabase
from relay.wire.client import BulkMetrics
from relay.wire.common import MAX_APPLICATIONS, MAX_COUNT, MAX_LIST, MAX_VARIANTS

MAX_TOTAL = 2**63 - 1


class Strict:
    """The fake upstream's ``bulk_answer``: 400 to a body the bulk model refuses, and to any
    body holding an entry for a feature in ``refused`` (an upstream refusing one entry, for
    its own reasons)."""

    def __init__(self) -> None:
        self.refused: set[str] = set()
        self.invalid: list[str] = []

    def __call__(self, received: Received) -> Answer | None:
        try:
            parsed = BulkMetrics.model_validate_json(received.body)
        except ValidationError as exc:
            self.invalid.append(str(exc)[:300])
            return self._refusal(f"invalid: {exc}")
        poison = [m.featureName for m in parsed.metrics if m.featureName in self.refused]
        return self._refusal(f"refused feature {poison[0]}") if poison else None

    @staticmethod
    def _refusal(message: str) -> Answer:
        body = json.dumps({"name": "BadDataError", "message": message}).encode()
        return Answer(400, headers={"Content-Type": "application/json"}, body=body)


@pytest.fixture
def strict(upstream: FakeUpstream) -> Strict:
    hook = upstream.bulk_answer = Strict()
    return hook


def dead_bodies(data_dir: Path) -> list[bytes]:
    with sqlite3.connect(data_dir / "buffer.db") as conn:
        return [row[0] for row in conn.execute("SELECT body FROM dead_letters")]


async def test_sums_past_an_entrys_limits_go_out_as_several_entries(
    make_relay: Any, upstream: FakeUpstream, strict: Strict, tmp_path: Path
) -> None:
    client = await make_relay(flush_interval=3600)  # summed in the buffer, sent at shutdown
    full = {f"v{i:03}": MAX_COUNT for i in range(MAX_VARIANTS)}
    for _ in range(2):
        assert (
            await post(client, bulk([metric("big", yes=MAX_COUNT, no=MAX_COUNT, variants=full)]))
        )[0] == 202
    for first in (0, 50):  # 150 variants once summed
        variants = {f"v{i:03}": 1 for i in range(first, first + MAX_VARIANTS)}
        assert (await post(client, bulk([metric("wide", yes=3, variants=variants)])))[0] == 202
    assert (await post(client, bulk([metric("innocent", yes=1)])))[0] == 202
    await client.close()
    assert strict.invalid == []
    assert upstream.totals() == {
        ("big", "app"): (2 * MAX_COUNT, 2 * MAX_COUNT),
        ("wide", "app"): (6, 0),
        ("innocent", "app"): (1, 0),
    }
    assert upstream.variants()[("big", "app")] == {name: 2 * MAX_COUNT for name in full}
    assert upstream.variants()[("wide", "app")] == {
        f"v{i:03}": 2 if 50 <= i < 100 else 1 for i in range(150)
    }
    assert dead_letters(tmp_path / "relay") == []


async def test_a_full_connect_via_chain_stays_within_its_limit(
    make_relay: Any, upstream: FakeUpstream, strict: Strict
) -> None:
    client = await make_relay()
    hops = [{"appName": "edge", "instanceId": f"hop-{i:03}"} for i in range(MAX_LIST)]
    registration = {"appName": "app", "environment": "development", "instanceId": "i1"}
    assert (await post(client, bulk(applications=[{**registration, "connectVia": hops}])))[0] == 202
    await eventually(lambda: len(upstream.accepted_bulks()) == 1)
    [app] = upstream.accepted_bulks()[0].json()["applications"]
    chain = [hop["instanceId"] for hop in app["connectVia"]]
    # the relay the SDK connected to, then the latest hops ending in this relay
    assert chain == ["hop-000", *[f"hop-{i:03}" for i in range(2, MAX_LIST)], "relay-under-test"]
    assert strict.invalid == []


async def test_batches_are_cut_by_entry_counts_as_well_as_bytes(
    make_relay: Any, upstream: FakeUpstream, strict: Strict
) -> None:
    client = await make_relay(flush_interval=3600, max_batch_bytes=1024 * 1024)
    registrations = [
        {"appName": "app", "environment": "development", "instanceId": f"pod-{i:04}"}
        for i in range(1500)
    ]
    for half in (registrations[:750], registrations[750:]):
        assert (await post(client, bulk(applications=half)))[0] == 202
    await client.close()
    assert strict.invalid == []
    sent = [len(r.json()["applications"]) for r in upstream.accepted_bulks()]
    assert sum(sent) == 1500 and max(sent) <= MAX_APPLICATIONS


@pytest.mark.parametrize("value", [0, 1023, 1024 * 1024 + 1])
def test_max_batch_bytes_is_bounded(value: int) -> None:
    with pytest.raises(SettingsError, match="max_batch_bytes"):
        load_settings({"mode": "relay", "upstream_url": "http://x", "max_batch_bytes": value})


async def test_a_refused_batch_is_bisected_until_only_the_refused_entry_is_left(
    make_relay: Any, upstream: FakeUpstream, strict: Strict, tmp_path: Path
) -> None:
    strict.refused = {"poison"}
    client = await make_relay(flush_interval=3600)
    innocent = [metric(f"feature-{i:02}", yes=i + 1) for i in range(40)]
    assert (await post(client, bulk([*innocent[:20], metric("poison", yes=7), *innocent[20:]])))[
        0
    ] == 202
    before = REGISTRY.get_sample_value("relay_dead_lettered_entries_total", {"reason": "rejected"})
    await client.close()
    assert upstream.totals() == {(f"feature-{i:02}", "app"): (i + 1, 0) for i in range(40)}
    [(status, entries, reason)] = dead_letters(tmp_path / "relay")
    [body] = dead_bodies(tmp_path / "relay")
    assert (status, entries) == (400, 1)
    assert "refused feature poison" in reason
    assert [m.featureName for m in BulkMetrics.model_validate_json(body).metrics] == ["poison"]
    after = REGISTRY.get_sample_value("relay_dead_lettered_entries_total", {"reason": "rejected"})
    assert (after or 0) - (before or 0) == 1


async def test_the_shard_merge_moves_sums_past_an_entrys_limits(tmp_path: Path) -> None:
    """An older relay's per-worker files are read back with the bulk model at start."""
    path = tmp_path / "buffer.db"
    leader = SqliteDatabase(path, BUFFER_SCHEMA, "NORMAL")
    await leader.open()
    into = MetricsStore(leader, max_group=64, idempotency_ttl=3600)
    into.start()
    shard = SqliteDatabase(tmp_path / "buffer-1.db", BUFFER_SCHEMA, "NORMAL")
    await shard.open()
    store = MetricsStore(shard, max_group=64, idempotency_ttl=3600)
    store.start()
    key = MetricKey("app", "development", "big", 3600 * 490_000)
    for _ in range(3):
        batch = IngestBatch()
        batch.add_count(key, MAX_COUNT, 1, {"v": MAX_COUNT})
        assert await store.write(batch, None)
    await store.stop()
    await shard.close()
    try:
        assert await drain_shards(path, into, "NORMAL", None) >= 2
    finally:
        await into.stop()
        await leader.close()
    with sqlite3.connect(path) as conn:
        assert list(conn.execute("SELECT yes, no FROM metrics")) == [(3 * MAX_COUNT, 3)]
        assert list(conn.execute("SELECT count FROM metric_variants")) == [(3 * MAX_COUNT,)]
    assert not (tmp_path / "buffer-1.db").exists()  # drained whole, no dead letter: removed


async def test_the_standalone_keeps_totals_past_an_entrys_limit(client: Any) -> None:
    """On both backends (``client`` runs on SQLite and on PostgreSQL)."""
    for _ in range(3):
        body = bulk([metric("sum", yes=MAX_COUNT, no=1, variants={"v": MAX_COUNT})])
        response = await client.post("/api/client/metrics/bulk", json=body, headers=auth(DEV_KEY))
        assert response.status == 202
    [row] = await raw(client, "sum")
    assert (row["yes"], row["no"], row["variants"]) == (3 * MAX_COUNT, 3, {"v": 3 * MAX_COUNT})


async def test_a_total_stays_at_the_largest_64_bit_integer(
    database_url: str | None, tmp_path: Path
) -> None:
    """2^32 maximal counts on one key: the total neither overflows (PostgreSQL refuses a
    BIGINT overflow) nor becomes a float (SQLite), and writing goes on."""
    db = central_database(standalone_settings(tmp_path, database_url=database_url))
    await db.open()
    store = MetricsStore(db, max_group=8, idempotency_ttl=3600, logged=True)
    store.start()
    key = MetricKey("app", "development", "huge", 3600)
    try:
        for _ in range(3):
            batch = IngestBatch()
            batch.add_count(key, 2**62, 1, {"v": 2**62})
            assert await store.write(batch, None)
        reader = UsageReader(SqlUsageRecords(db), Folder(db, None).caught_up)
        [row] = await reader.raw_metrics("huge", 0)  # summed past it in one fold
        assert (row.yes, row.no, row.variants) == (MAX_TOTAL, 3, {"v": MAX_TOTAL})
        assert isinstance(row.yes, int)
        assert await store.write(batch, None)
        [row] = await reader.raw_metrics("huge", 0)  # added to the total stored
    finally:
        await store.stop()
        await db.close()
    assert (row.yes, row.no, row.variants) == (MAX_TOTAL, 4, {"v": MAX_TOTAL})
    assert isinstance(row.yes, int)


# --- the aggregation property: sums across requests, drained as bodies the upstream takes ---

VARIANT_NAMES = [f"v{i:03}" for i in range(150)]
COUNTS = st.one_of(st.sampled_from([0, 1, MAX_COUNT]), st.integers(0, MAX_COUNT))
ENTRIES = st.fixed_dictionaries(
    {
        "featureName": st.sampled_from(["f1", "f2"]),
        "appName": st.just("app"),
        "environment": st.just("development"),
        "timestamp": st.sampled_from(["2026-01-01T00:10:00Z", "2026-01-01T01:00:00Z"]),
        "yes": COUNTS,
        "no": COUNTS,
        "variants": st.dictionaries(st.sampled_from(VARIANT_NAMES), COUNTS, max_size=MAX_VARIANTS),
    }
)
REQUESTS = st.lists(st.lists(ENTRIES, min_size=1, max_size=4), min_size=1, max_size=5)


def summed(entries: Any) -> dict[tuple[str, str, str], Any]:
    """(feature, app, timestamp) -> [yes, no, {variant: count}] over ``entries``."""
    totals: dict[tuple[str, str, str], Any] = {}
    for e in entries:
        hour = e["timestamp"][:13]
        total = totals.setdefault((e["featureName"], e["appName"], hour), [0, 0, {}])
        total[0] += e["yes"]
        total[1] += e["no"]
        for name, count in e["variants"].items():
            if count:
                total[2][name] = total[2].get(name, 0) + count
    return {k: v for k, v in totals.items() if v != [0, 0, {}]}


async def drain(requests: list[list[dict[str, Any]]], budget: int, path: Path) -> list[bytes]:
    """Ingest the requests into a relay buffer file, then claim everything in batches."""
    db = SqliteDatabase(path, BUFFER_SCHEMA, "OFF")
    await db.open()
    store = MetricsStore(db, max_group=8, idempotency_ttl=3600)
    store.start()
    now = datetime.now(UTC)
    try:
        for body in requests:
            parsed = BulkMetrics.model_validate_json(json.dumps(bulk(body)))
            assert await store.write(from_bulk(parsed, "development", now).batch, None)
        outbox = SqliteOutbox(db, max_batch_bytes=8 * 1024)
        while await outbox.claim({"development"}, budget):
            pass
        return [batch.body for batch in await outbox.pending({"development"}, 10**6)]
    finally:
        await store.stop()
        await db.close()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(requests=REQUESTS, budget=st.integers(1, 40))
def test_buffered_sums_leave_as_valid_bodies_with_the_same_totals(
    requests: list[list[dict[str, Any]]], budget: int
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        bodies = asyncio.run(drain(requests, budget, Path(folder) / "buffer.db"))
    sent = []
    for body in bodies:
        parsed = BulkMetrics.model_validate_json(body)  # the upstream's own model takes it
        sent += [e.model_dump() for e in parsed.metrics]
    assert summed(sent) == summed([e for body in requests for e in body])


async def test_an_upstream_refusing_everything_pauses_instead_of_bisecting_it_all(
    make_relay: Any, upstream: FakeUpstream, strict: Strict, tmp_path: Path
) -> None:
    """Two requests an entry would hammer it and dead-letter every entry one by one."""
    strict.refused = {f"feature-{i:03}" for i in range(200)}
    client = await make_relay(backoff_max=60)
    assert (await post(client, bulk([metric(f"feature-{i:03}", yes=1) for i in range(200)])))[
        0
    ] == 202
    await eventually(lambda: len(upstream.bulks) >= REFUSALS)
    await asyncio.sleep(0.5)  # ten flush intervals: nothing more is sent
    assert len(upstream.bulks) == REFUSALS
    assert dead_letters(tmp_path / "relay") == []  # every entry kept, in halves
    with sqlite3.connect(tmp_path / "relay" / "buffer.db") as conn:
        assert conn.execute("SELECT sum(entries) FROM outbox").fetchone()[0] == 200
