"""The SQLite store on real files: group commit, idempotency, restart, migrations, key hashes."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path

import pytest
from service import eventually

from relay.central.key_records import SqlKeyRecords
from relay.central.key_store import KeyStore
from relay.core.errors import StorageError
from relay.core.ingest_batch import (
    IdempotencyKey,
    IngestBatch,
    MetricKey,
    Registration,
    RegistrationKey,
)
from relay.core.keys import new_key
from relay.store.groupcommit import GroupCommitter
from relay.store.metrics import MetricsStore
from relay.store.sql import CENTRAL_SCHEMA, ROWS_PER_STATEMENT, migration_scripts
from relay.store.sqlite import SqliteDatabase
from relay.wire.common import KeyType


def retry_key(name: str) -> IdempotencyKey:
    """A request's key: the same caller and request every time it is sent."""
    return IdempotencyKey("caller", name, "fingerprint")


def one(feature: str = "f", yes: int = 1, variants: dict[str, int] | None = None) -> IngestBatch:
    batch = IngestBatch()
    batch.add_count(MetricKey("app", "development", feature, 3600), yes, 0, variants or {})
    return batch


async def open_store(
    path: Path, ttl: float = 3600, clock: Callable[[], float] = time.time
) -> tuple[SqliteDatabase, MetricsStore]:
    db = SqliteDatabase(path, CENTRAL_SCHEMA, "NORMAL")
    await db.open()
    store = MetricsStore(db, max_group=64, idempotency_ttl=ttl, clock=clock)
    store.start()
    return db, store


async def close(db: SqliteDatabase, store: MetricsStore) -> None:
    await store.stop()
    await db.close()


async def totals(path: Path) -> list[tuple[str, int]]:
    with sqlite3.connect(path) as conn:
        return list(conn.execute("SELECT feature_name, yes FROM metrics ORDER BY feature_name"))


async def test_concurrent_writes_share_transactions_and_all_count(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    db, store = await open_store(path)
    results = await asyncio.gather(*(store.write(one(variants={"v": 1}), None) for _ in range(300)))
    assert all(results)
    await close(db, store)
    assert await totals(path) == [("f", 300)]
    with sqlite3.connect(path) as conn:
        assert list(conn.execute("SELECT variant, count FROM metric_variants")) == [("v", 300)]


async def test_committed_counts_survive_reopen(tmp_path: Path) -> None:
    path = tmp_path / "r.db"
    db, store = await open_store(path)
    await store.write(one(yes=5), retry_key("k1"))
    await close(db, store)
    db, store = await open_store(path)
    assert await store.write(one(yes=5), retry_key("k1")) is False  # the key outlives the restart
    assert await store.write(one(yes=2), None) is True
    await close(db, store)
    assert await totals(path) == [("f", 7)]


async def test_a_group_of_many_statements_with_a_replay_writes_the_rest(tmp_path: Path) -> None:
    path = tmp_path / "big.db"
    db, store = await open_store(path)
    assert await store.write(one(yes=1), retry_key("seen")) is True
    many = IngestBatch()
    n = ROWS_PER_STATEMENT * 2 + 1
    for i in range(n):
        many.add_count(MetricKey("app", "development", f"f{i:04d}", 3600), 1, 0, {"a": 1, "b": 2})
        key = RegistrationKey("app", "development", f"pod-{i}")
        many.add_registration(
            Registration(key, (), None, ("default",), None, None, datetime.now(UTC))
        )
    # one group: the replay makes the transaction merge again without it
    results = await asyncio.gather(
        store.write(many, retry_key("new")), store.write(one(yes=5), retry_key("seen"))
    )
    assert list(results) == [True, False]
    await close(db, store)
    with sqlite3.connect(path) as conn:
        counts = [conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in TABLES]
        assert counts == [n + 1, 2 * n, n]
        assert conn.execute("SELECT yes FROM metrics WHERE feature_name = 'f'").fetchone() == (1,)


TABLES = ("metrics", "metric_variants", "registrations")


async def test_expired_idempotency_keys_apply_again_and_are_pruned(tmp_path: Path) -> None:
    path = tmp_path / "i.db"
    now = [1_000_000.0]
    db, store = await open_store(path, ttl=0.05, clock=lambda: now[0])
    assert await store.write(one(), retry_key("k")) is True
    now[0] += 0.1  # the key is older than its TTL
    assert await store.prune_idempotency() == 1
    assert await store.write(one(), retry_key("k")) is True
    await close(db, store)
    assert await totals(path) == [("f", 2)]


async def test_migrations_run_once(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    for _ in range(2):
        db = SqliteDatabase(path, CENTRAL_SCHEMA)
        await db.open()
        await db.close()
    with sqlite3.connect(path) as conn:
        versions = sorted(row[0] for row in conn.execute("SELECT version FROM schema_migrations"))
        assert versions == sorted(version for version, _ in migration_scripts(CENTRAL_SCHEMA))
        assert list(conn.execute("SELECT count(*) FROM projects")) == [(1,)]


async def test_keys_are_stored_as_hashes_only(tmp_path: Path) -> None:
    path = tmp_path / "k.db"
    db = SqliteDatabase(path, CENTRAL_SCHEMA)
    await db.open()
    keys = KeyStore(SqlKeyRecords(db))
    spec = new_key(KeyType.CLIENT, "development", ("default",))
    assert await keys.add(spec) is True
    assert await keys.add(spec) is False
    principal = await keys.resolve(spec.secret)
    assert principal is not None and principal.environment == "development"
    assert (
        await KeyStore(SqlKeyRecords(db)).resolve(spec.secret) == principal
    )  # from disk, not cache
    assert await keys.resolve(spec.secret + "x") is None
    await db.close()
    assert spec.secret.split(".")[1].encode() not in path.read_bytes()


async def set_max_pages(db: SqliteDatabase, pages: int | None) -> None:
    async with db.transaction() as tx:
        if pages is None:
            await tx.execute("PRAGMA max_page_count = 1073741823")
        else:
            [row] = await tx.fetch_all("PRAGMA page_count")
            await tx.execute(f"PRAGMA max_page_count = {row[0] + pages}")


async def test_full_disk_fails_every_waiter_and_the_writer_recovers(tmp_path: Path) -> None:
    """SQLite's page limit gives the same SQLITE_FULL error as a full disk."""
    path = tmp_path / "f.db"
    db, store = await open_store(path)
    await store.write(one(feature="before"), None)
    await set_max_pages(db, 0)
    big = IngestBatch()
    for i in range(2000):
        big.add_count(MetricKey("app", "development", f"feature-{i:05}", 3600), 1, 0, {})
    outcomes = await asyncio.gather(
        store.write(big, None), store.write(one(feature="other"), None), return_exceptions=True
    )
    assert all(isinstance(o, StorageError) for o in outcomes), outcomes
    await set_max_pages(db, None)
    assert await store.write(one(feature="after"), None) is True
    await close(db, store)
    assert await totals(path) == [("after", 1), ("before", 1)]


async def test_unopenable_database_is_a_storage_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    db = SqliteDatabase(tmp_path / "file" / "x.db", CENTRAL_SCHEMA)
    with pytest.raises(StorageError, match="cannot open database"):
        await db.open()


async def test_a_lingering_group_waits_for_as_many_as_the_last_and_no_one_alone() -> None:
    """``linger``: a group waits (at most that long) for as many items as the previous group
    held; a group after a group of one never waits."""
    groups: list[list[int]] = []
    release = asyncio.Event()

    def plan(items: Sequence[int]) -> Callable[[None], Awaitable[list[int]]]:
        async def work(_: None) -> list[int]:
            groups.append(list(items))
            if len(groups) == 1:
                await release.wait()  # the first commit is slow: three queue meanwhile
            return list(items)

        return work

    async def run(work: Callable[[None], Awaitable[list[int]]]) -> list[int]:
        return await work(None)

    committer: GroupCommitter[None, int, int] = GroupCommitter(run, plan, 64, linger=3600)
    committer.start()
    try:
        first = asyncio.create_task(committer.submit(0))  # alone: committed at once
        await eventually(lambda: len(groups) == 1, "the first group committing")
        queued = [asyncio.create_task(committer.submit(n)) for n in (1, 2, 3)]
        await eventually(lambda: all(not task.done() for task in queued))
        release.set()
        await asyncio.gather(first, *queued)
        trickling = [asyncio.create_task(committer.submit(4))]
        await eventually(lambda: len(groups) == 2, "the group of three committed")
        for n in (5, 6):  # the linger ends when the group is as large as the last
            await asyncio.sleep(0)
            trickling.append(asyncio.create_task(committer.submit(n)))
        assert await asyncio.gather(*trickling) == [4, 5, 6]
    finally:
        await committer.stop()
    assert groups == [[0], [1, 2, 3], [4, 5, 6]]
