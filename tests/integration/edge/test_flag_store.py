"""The flag cache's rows in ``cache.db`` shared by processes: a copy one relay process
fetched is served by another without fetching again, refreshes are claimed by one of them
per interval, and a clock set back does not stop refreshes. Two relay apps on one data
directory stand for two workers (each opens the same ``cache.db``); real SQLite, real
sockets, the fake upstream."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

from conftest import DEV_KEY, MakeClient
from fake_upstream import Answer, FakeUpstream
from service import eventually

from relay.core.keys import hash_key
from relay.edge.flags.store import Copy, FlagScope, FlagStore, Saved
from relay.store.cache_file import cache_file
from relay.store.sql import BUFFER_SCHEMA, migration_scripts

SPEC = {"Authorization": DEV_KEY, "Unleash-Client-Spec": "5.2.0"}


async def served(relay: object) -> int:
    response = await relay.get("/api/client/features", headers=SPEC)  # type: ignore[attr-defined]
    return int(response.status)


async def test_a_copy_stored_by_one_process_is_served_by_another_without_a_fetch(
    make_relay: MakeClient, upstream: FakeUpstream, tmp_path: Path
) -> None:
    first = await make_relay(client_tokens=[], features_refresh_interval=30)
    assert await served(first) == 200
    await eventually(lambda: stored(tmp_path / "relay"), "the copy written")
    second = await make_relay(client_tokens=[], features_refresh_interval=30)
    assert await served(second) == 200
    assert len(upstream.flag_fetches) == 1  # fresh in the file: not fetched again


async def test_one_process_refreshes_a_scope_per_interval(
    make_relay: MakeClient, upstream: FakeUpstream
) -> None:
    relays = [await make_relay(client_tokens=[], features_refresh_interval=0.5) for _ in "ab"]
    for relay in relays:  # both hold the key: either may refresh
        assert await served(relay) == 200
    before = revalidations(upstream)
    started = time.monotonic()
    await eventually(lambda: revalidations(upstream) >= before + 10, "ten refreshes")
    elapsed = time.monotonic() - started
    # one refresh per interval between the two: each refreshing would take half the time
    assert revalidations(upstream) - before <= elapsed / 0.5 + 2, elapsed


def revalidations(upstream: FakeUpstream) -> int:
    return sum(1 for r in upstream.flag_fetches if "If-None-Match" in r.headers)


async def test_refreshes_go_on_when_the_clock_was_set_back(
    make_relay: MakeClient, upstream: FakeUpstream, tmp_path: Path
) -> None:
    """A refresh due an hour from now, as after the clock went back an hour, is due now."""
    relay = await make_relay(client_tokens=[], features_refresh_interval=0.2)
    assert await served(relay) == 200
    await eventually(lambda: stored(tmp_path / "relay"), "the copy written")
    with sqlite3.connect(tmp_path / "relay" / "cache.db") as conn:
        conn.execute(
            "UPDATE flag_scopes SET due_at = ?, changed = changed + 1000", (time.time() + 3600,)
        )
    fetched = len(upstream.flag_fetches)
    await eventually(lambda: len(upstream.flag_fetches) >= fetched + 3, "refreshes go on")


def stored(data_dir: Path) -> bool:
    with sqlite3.connect(data_dir / "cache.db") as conn:
        return conn.execute("SELECT count(body) FROM flag_scopes").fetchone()[0] > 0


NEW = {"ingest/0004_edge_reports_moved", "buffer/0003_cache_moved"}


async def test_a_relay_upgraded_in_place_keeps_the_flag_copies_of_its_buffer_file(
    make_relay: MakeClient, upstream: FakeUpstream, tmp_path: Path
) -> None:
    """A buffer.db written by a version that kept flag copies there (issue 20 moved them to
    cache.db): with the upstream down, the copy and the key that read it still serve."""
    data_dir = tmp_path / "relay"
    data_dir.mkdir()
    key = "default:development.read-before-the-upgrade-0123456789"
    scope = FlagScope("development", ("default",))
    body = json.dumps({"version": 2, "features": [{"name": "kept", "enabled": True}]})
    with sqlite3.connect(data_dir / "buffer.db") as conn:
        conn.execute("CREATE TABLE schema_migrations (version TEXT PRIMARY KEY, applied_at REAL)")
        for version, sql in migration_scripts(BUFFER_SCHEMA):
            if version not in NEW:
                conn.executescript(sql)
                conn.execute("INSERT INTO schema_migrations VALUES (?, 0)", (version,))
        conn.execute(
            "INSERT INTO flag_scopes VALUES (?, ?, '\"old\"', ?, ?, 1)",
            (scope.id, body.encode(), time.time(), time.time()),
        )
        conn.execute(
            "INSERT INTO flag_keys VALUES (?, ?, 'default:development.****', ?)",
            (hash_key(key), scope.id, time.time()),
        )
    upstream.features_answer = Answer(503)
    upstream.validate_down = True
    relay = await make_relay(client_tokens=[])
    response = await relay.get("/api/client/features", headers={"Authorization": key})
    assert response.status == 200, await response.text()
    assert [f["name"] for f in (await response.json())["features"]] == ["kept"]
    with sqlite3.connect(data_dir / "buffer.db") as conn:
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
    assert not tables & {"flag_scopes", "flag_keys"}  # only counts are left there


async def test_stored_answers_are_bounded_by_bytes_the_latest_kept(tmp_path: Path) -> None:
    db = cache_file(tmp_path, "NORMAL")
    await db.open()
    try:
        store = FlagStore(db, most_bytes=2_500_000)
        scopes = [FlagScope("development", (f"p{n}",)) for n in range(3)]
        for n, scope in enumerate(scopes):
            copy = Copy(bytes([n]) * 1_000_000, f'"{n}"', 1000.0 + n)
            await store.write([Saved(scope, copy)], [], 1000.0 + n, 10.0)
        kept = [scope for scope in scopes if await store.copy(scope) is not None]
        assert kept == scopes[1:]  # the oldest answer went when the third came
    finally:
        await db.close()


async def test_a_damaged_cache_file_is_moved_aside_and_the_relay_starts(
    make_relay: MakeClient, upstream: FakeUpstream, tmp_path: Path
) -> None:
    data_dir = tmp_path / "relay"
    data_dir.mkdir()
    (data_dir / "cache.db").write_bytes(b"not a database, " * 512)
    relay = await make_relay()
    assert await served(relay) == 200  # fetched again
    assert len(list(data_dir.glob("cache.db.damaged-*"))) == 1
