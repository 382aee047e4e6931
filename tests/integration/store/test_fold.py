"""Issue 37: the central service appends each group commit to the ingest log and folds the
log into its tables; every acknowledged count ends up there exactly once, and every read
includes what was acknowledged before it, on any instance. On both backends unless named.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from conftest import ADMIN_KEY, DEV_KEY, MakeClient, auth, bulk, metric, raw, standalone_settings
from foldkit import blocked_fold
from impactkit import FOUR_BYTES, impact, series
from prometheus_client import REGISTRY
from service import eventually
from webkit import page, sign_in

from relay.central.database import central_database
from relay.central.usage import UsageReader
from relay.central.usage_records import SqlUsageRecords
from relay.core.errors import StorageError
from relay.core.ingest_batch import IdempotencyKey, IngestBatch, MetricKey
from relay.store import ingest_log
from relay.store.fold import FOLD_LOCK, Folder
from relay.store.metrics import MetricsStore
from relay.store.sql import Database

HOUR = 3600 * 490_000


@dataclass
class Instance:
    """What one standalone instance holds of the ingest path, on a shared database."""

    db: Database
    store: MetricsStore
    folder: Folder

    @property
    def reader(self) -> UsageReader:
        return UsageReader(SqlUsageRecords(self.db), self.folder.caught_up)


@pytest.fixture
async def instances(database_url: str | None, tmp_path: Path) -> AsyncIterator[list[Instance]]:
    """Three instances on one database (on SQLite, three connections to one file)."""
    made = []
    for _ in range(3):
        db = central_database(standalone_settings(tmp_path, database_url=database_url))
        await db.open()
        store = MetricsStore(db, 16, 3600, arrived=True, instances_kept=1000, logged=True)
        store.start()
        made.append(Instance(db, store, Folder(db, 1000)))
    yield made
    for instance in made:
        await instance.store.stop()
        await instance.folder.stop()
        await instance.db.close()


def counts(feature: str, yes: int, app: str = "app") -> IngestBatch:
    batch = IngestBatch()
    batch.add_count(MetricKey(app, "development", feature, HOUR), yes, 0, {"v": yes})
    return batch


async def log_rows(db: Database) -> int:
    row = await db.fetch_one("SELECT count(*) FROM ingest_log")
    assert row is not None
    return int(row[0])


async def stored(db: Database, feature: str) -> tuple[int, int]:
    """(yes, variant v) of ``feature`` in the tables, read directly: what the fold wrote."""
    row = await db.fetch_one(
        "SELECT sum(m.yes), sum(v.count) FROM metrics m JOIN metric_variants v USING"
        " (feature_name, app_name, environment, hour) WHERE m.feature_name = ?",
        (feature,),
    )
    assert row is not None
    return int(row[0] or 0), int(row[1] or 0)


async def test_a_count_is_in_the_log_until_folded_then_in_the_tables_once(
    instances: list[Instance],
) -> None:
    [one, other, _] = instances
    for yes in (1, 2, 3):
        assert await one.store.write(counts("f", yes), None)
    assert await log_rows(one.db) >= 1
    assert await stored(one.db, "f") == (0, 0)  # answered 202: in the log, not yet summed
    await other.folder.caught_up()  # any instance folds what any other appended
    assert await log_rows(one.db) == 0
    assert await stored(one.db, "f") == (6, 6)
    await one.folder.caught_up()  # nothing left to fold twice
    assert await stored(one.db, "f") == (6, 6)


async def test_a_read_includes_every_count_acknowledged_before_it_on_any_instance(
    instances: list[Instance],
) -> None:
    """Writes to two instances go on while a third reads: each read holds at least every
    count answered before it began, and never more than was sent."""
    acknowledged, sent = 0, 0
    stop = asyncio.Event()

    async def writer(instance: Instance, start: int) -> None:
        nonlocal acknowledged, sent
        n = start
        while not stop.is_set():
            sent += 1
            key = IdempotencyKey("caller", f"w-{n}", "fp")
            assert await instance.store.write(counts("busy", 1, app=f"a{n % 3}"), key)
            acknowledged += 1
            n += 2

    writers = [asyncio.create_task(writer(instances[i], i)) for i in range(2)]
    try:
        for _ in range(30):
            before = acknowledged
            rows = await instances[2].reader.raw_metrics("busy", 0)
            total = sum(row.yes for row in rows)
            assert before <= total <= sent, (before, total, sent)
            await asyncio.sleep(0.01)
    finally:
        stop.set()
        await asyncio.gather(*writers)
    rows = await instances[2].reader.raw_metrics("busy", 0)
    assert sum(row.yes for row in rows) == acknowledged


async def test_folders_at_once_fold_each_row_once(instances: list[Instance]) -> None:
    """Every instance folding at the same time as the others and as new writes commit."""
    writes = [
        instances[i % 3].store.write(counts("many", 1, app=f"a{i % 7}"), None) for i in range(600)
    ]
    folds = [instance.folder.caught_up() for instance in instances for _ in range(5)]
    await asyncio.gather(*writes, *folds)
    await asyncio.gather(*(instance.folder.caught_up() for instance in instances))
    assert await stored(instances[0].db, "many") == (600, 600)
    assert await log_rows(instances[0].db) == 0


async def test_a_replay_on_another_instance_is_counted_once(instances: list[Instance]) -> None:
    keys = [IdempotencyKey("relay", f"batch-{n}", "same-body") for n in range(50)]
    writes = [instances[n % 3].store.write(counts("replayed", 1), keys[n % 50]) for n in range(150)]
    applied = await asyncio.gather(*writes)
    assert sum(applied) == 50
    await instances[1].folder.caught_up()
    assert await stored(instances[1].db, "replayed") == (50, 50)


async def test_rows_it_cannot_fold_are_set_aside_and_the_rest_is_folded(
    instances: list[Instance], backend: str
) -> None:
    """Below the API's validation: log rows this version cannot read (a damaged one, a later
    version's) on both backends and, on PostgreSQL, a key too large for its index, merged
    into one group with innocent counts."""
    [one, other, _] = instances
    before = REGISTRY.get_sample_value("relay_fold_refused_total") or 0.0
    async with one.db.transaction() as tx:
        await ingest_log.append(tx, '{"c": [["not a count"]]}', 0.0)
        await ingest_log.append(tx, '{"c": [], "later": [["a part of a later version"]]}', 0.0)
    poison = []
    if backend == "postgres":  # (feature, app, environment, hour, variant) over 2,704 bytes
        batch, key = IngestBatch(), MetricKey(FOUR_BYTES, "development", FOUR_BYTES, HOUR)
        batch.add_count(key, 1, 0, {FOUR_BYTES: 1})
        poison.append(batch)
    writes = [one.store.write(counts(f"f{i % 5}", 1), None) for i in range(200)]
    writes[100:100] = [one.store.write(batch, None) for batch in poison]
    assert all(await asyncio.gather(*writes))  # all durably in the log
    await other.folder.caught_up()
    assert await log_rows(one.db) == 0
    for i in range(5):
        assert await stored(one.db, f"f{i}") == (40, 40)
    refused = await one.db.fetch_all("SELECT batch, error FROM ingest_refused ORDER BY id")
    assert len(refused) == 2 + len(poison)
    assert "not a count" in refused[0][0] and "later" in refused[1][0]
    if poison:  # the one count alone, not the group it shared
        batch = ingest_log.decode(refused[2][0])
        assert [key.feature_name for key in batch.counts] == [FOUR_BYTES]
    after = REGISTRY.get_sample_value("relay_fold_refused_total") or 0.0
    assert after - before == 2 + len(poison)


async def test_totals_past_the_largest_integer_stay_there_in_one_fold(
    instances: list[Instance],
) -> None:
    [one, _, _] = instances
    for _ in range(3):
        assert await one.store.write(counts("huge", 2**62), None)
    [row] = await one.reader.raw_metrics("huge", 0)
    assert (row.yes, row.variants) == (2**63 - 1, {"v": 2**63 - 1})


async def test_arrival_times_are_kept_per_count_whatever_order_they_come_in(
    instances: list[Instance],
) -> None:
    """A clock that went back between two groups: their log rows fold into one pass by id,
    each count stamped with the latest time it arrived, none with the other's."""
    [one, _, _] = instances
    async with one.db.transaction() as tx:
        await ingest_log.append(tx, ingest_log.encode(counts("late", 1)), 2000.0)
        await ingest_log.append(tx, ingest_log.encode(counts("late", 1)), 1000.0)
        await ingest_log.append(tx, ingest_log.encode(counts("early", 1, app="b")), 1500.0)
    await one.folder.caught_up()
    rows = await one.db.fetch_all("SELECT feature_name, arrived FROM metrics ORDER BY 1")
    assert [(row[0], row[1]) for row in rows] == [("early", 1500.0), ("late", 2000.0)]
    apps = await one.db.fetch_all("SELECT app_name, arrived FROM application_counts ORDER BY 1")
    assert [(row[0], row[1]) for row in apps] == [("app", 2000.0), ("b", 1500.0)]
    assert await stored(one.db, "late") == (2, 2)


async def test_every_read_sees_what_another_instance_acknowledged(
    make_client: MakeClient, tmp_path: Path
) -> None:
    """Raw counts, applications, unknown flags, impact metrics and the web page's usage,
    read on a second instance at once after the first answered 202: no wait, no retry."""
    first = await make_client(tmp_path / "shared")
    second = await make_client(tmp_path / "shared")
    made = await first.post(
        "/api/admin/projects/default/features", json={"name": "checkout"}, headers=auth(ADMIN_KEY)
    )
    assert made.status == 201
    await sign_in(second)
    registration = {"appName": "shop", "environment": "development", "instanceId": "pod-1"}
    for n in range(1, 4):
        counted = [metric("checkout", app="shop", yes=n), metric("ghost", app="shop", no=1)]
        body = {
            **bulk(counted, applications=[registration]),
            "impactMetrics": impact(n, n, [0.3]),
        }
        answer = await first.post("/api/client/metrics/bulk", json=body, headers=auth(DEV_KEY))
        assert answer.status == 202
        total = n * (n + 1) // 2
        assert sum(row["yes"] for row in await raw(second, "checkout")) == total
        assert (await series(second))["checkouts"]["value"] == total
        assert f"{total} / {total}" in await page(second, "/")  # the flags page's usage
    answer = await second.get("/api/admin/metrics/applications", headers=auth(ADMIN_KEY))
    assert [app["appName"] for app in (await answer.json())["applications"]] == ["shop"]
    answer = await second.get("/api/admin/metrics/unknown-flags", headers=auth(ADMIN_KEY))
    assert [flag["name"] for flag in (await answer.json())["unknownFlags"]] == ["ghost"]
    assert "shop" in await page(second, "/applications")


async def test_the_periodic_fold_empties_the_log_without_any_read(
    make_client: MakeClient, tmp_path: Path, database_url: str | None
) -> None:
    client = await make_client()
    body = bulk([metric("quiet", yes=1)])
    for _ in range(5):
        answer = await client.post("/api/client/metrics/bulk", json=body, headers=auth(DEV_KEY))
        assert answer.status == 202
    db = central_database(standalone_settings(tmp_path / "data", database_url=database_url))
    await db.open()
    try:
        await eventually(lambda: _emptied(db), "the log folded by the periodic fold")
        assert await stored_yes(db, "quiet") == 5
    finally:
        await db.close()


async def _emptied(db: Database) -> bool:
    return await log_rows(db) == 0


async def stored_yes(db: Database, feature: str) -> int:
    row = await db.fetch_one("SELECT sum(yes) FROM metrics WHERE feature_name = ?", (feature,))
    assert row is not None
    return int(row[0] or 0)


@pytest.mark.parametrize("backend", ["postgres"])
async def test_a_fold_cut_off_mid_transaction_leaves_its_rows_to_the_next(
    instances: list[Instance], database_url: str
) -> None:
    """The folding instance's connection lost after its pass deleted log rows and before it
    committed (as its process killed, or the database restarting): nothing of the pass
    stays, and the next fold, on another instance, counts each row once."""
    [one, other, third] = instances
    assert await one.store.write(counts("cut", 1), None)
    await one.folder.caught_up()  # the row exists, for the test to hold its lock
    for _ in range(10):
        assert await one.store.write(counts("cut", 1), None)
    blocker, watcher = await asyncpg.connect(database_url), await asyncpg.connect(database_url)
    try:
        holding = blocker.transaction()
        await holding.start()
        await blocker.execute("SELECT * FROM metrics WHERE feature_name = 'cut' FOR UPDATE")
        folding = asyncio.create_task(one.folder.caught_up())
        pid = await blocked_fold(watcher)
        waiting = asyncio.create_task(other.folder.caught_up())  # waits for the fold lock
        await eventually(lambda: _lock_waiters(watcher, 1), "a second fold waiting")
        await watcher.execute("SELECT pg_terminate_backend($1)", pid)
        with pytest.raises(StorageError):
            await folding
        await holding.rollback()
        await waiting  # the second instance's fold, once the lock was free
    finally:
        await blocker.close()
        await watcher.close()
    assert await stored(third.db, "cut") == (11, 11)
    assert await log_rows(third.db) == 0


async def _lock_waiters(conn: asyncpg.Connection[Any], count: int) -> bool:
    rows = await conn.fetch(
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
        " AND ((classid::bigint << 32) | objid::bigint) = $1"
        " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
        FOLD_LOCK,
    )
    return bool(rows[0][0] >= count)


def test_the_log_row_encoding_reads_back_what_it_wrote() -> None:
    batch = counts("f", 7)
    text = ingest_log.encode(batch)
    assert json.loads(text)["c"][0][:4] == ["app", "development", "f", HOUR]
    back = ingest_log.decode(text)
    assert back.counts == batch.counts


async def test_log_ids_never_go_back_once_the_log_is_emptied(instances: list[Instance]) -> None:
    """A fold takes the rows up to the last id it saw: were ids handed out again after the
    log emptied (SQLite's rowid without AUTOINCREMENT), a fold could keep finding new rows
    under that bound as long as ingest goes on, and a read wait as long."""
    [one, _, _] = instances
    assert await one.store.write(counts("ids", 1), None)
    first = await one.db.fetch_one("SELECT max(id) FROM ingest_log")
    assert first is not None
    await one.folder.caught_up()
    assert await one.store.write(counts("ids", 1), None)
    second = await one.db.fetch_one("SELECT max(id) FROM ingest_log")
    assert second is not None and second[0] > first[0]
