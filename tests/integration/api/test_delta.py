"""``GET /api/client/delta`` of the standalone service, on SQLite and PostgreSQL: a hydration
first, then the events after the client's revision (ETag: the last event's id) or 304, each
key's scope, segments before the features that use them, the change log written with each
write and bounded, a hydration for a revision no longer held."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

from conftest import PROD_KEY
from deltakit import delta, names
from flagkit import add_strategy, client_features, create_flag, feature_path, ok, turn

from relay.central.flags.flag_records import FlagRecords
from relay.central.flags.flags import FlagService
from relay.central.flags.served_deltas import ServedDeltas
from relay.central.flags.serving import ClientFeaturesCache
from relay.central.flags.writes import Writer
from relay.core.audit import Actor
from relay.core.catalog import Scope
from relay.core.errors import Conflict
from relay.store.sql import CENTRAL_SCHEMA
from relay.store.sqlite import SqliteDatabase
from relay.wire.flags import CreateFlag

ACTOR = Actor("tests")


async def test_hydration_then_events_then_304(client: Any) -> None:
    await create_flag(client, "checkout")
    await turn(client, "checkout")
    status, events, etag = await delta(client)
    assert status == 200
    [hydration] = events
    assert hydration["type"] == "hydration"
    _, answer, _ = await client_features(client, spec="5.2.0")
    assert hydration["features"] == answer["features"]
    assert hydration["segments"] == answer["segments"]
    assert etag == f'"{hydration["eventId"]}"'

    assert (await delta(client, etag))[0] == 304
    await turn(client, "checkout", on=False)
    await create_flag(client, "search")
    status, events, next_etag = await delta(client, etag)
    assert status == 200
    assert names(events) == [("feature-updated", "checkout"), ("feature-updated", "search")]
    assert events[0]["feature"]["enabled"] is False
    assert next_etag == f'"{events[-1]["eventId"]}"'
    assert [e["eventId"] for e in events] == sorted(e["eventId"] for e in events)
    assert (await delta(client, next_etag))[0] == 304

    await ok(client, "DELETE", feature_path("search"), status=202)  # archived: removed
    status, events, _ = await delta(client, next_etag)
    assert events == [
        {
            "eventId": events[0]["eventId"],
            "type": "feature-removed",
            "featureName": "search",
            "project": "default",
        }
    ]


async def test_scope_of_the_key_and_query(client: Any) -> None:
    _, _, etag = await delta(client)
    await create_flag(client, "a.one")
    await create_flag(client, "b.two")
    await turn(client, "a.one", env="production")
    _, events, _ = await delta(client, etag, query="?namePrefix=a.")
    assert names(events) == [("feature-updated", "a.one")]
    _, events, _ = await delta(client, etag, key=PROD_KEY)
    assert names(events) == [("feature-updated", "b.two"), ("feature-updated", "a.one")]
    assert [e["feature"]["enabled"] for e in events] == [False, True]  # in order of change


def user_in(*values: str) -> dict[str, Any]:
    return {"contextName": "userId", "operator": "IN", "values": list(values)}


async def test_a_segment_comes_before_the_feature_that_uses_it(client: Any) -> None:
    body = {"name": "beta", "constraints": [user_in("1")]}
    segment = await ok(client, "POST", "/api/admin/segments", body, status=201)
    await create_flag(client, "checkout")
    _, _, etag = await delta(client)
    await add_strategy(client, "checkout", {"name": "default", "segments": [segment["id"]]})
    _, events, etag = await delta(client, etag)
    assert names(events) == [("segment-updated", ""), ("feature-updated", "checkout")]
    assert events[0]["segment"]["id"] == segment["id"]

    body = {"name": "beta", "constraints": [user_in("2")]}
    await ok(client, "PUT", f"/api/admin/segments/{segment['id']}", body, status=204)
    _, events, _ = await delta(client, etag)
    assert names(events) == [("segment-updated", "")]
    assert events[0]["segment"]["constraints"][0]["values"] == ["2"]


async def test_a_revision_no_longer_held_gets_a_hydration(client: Any) -> None:
    # digits of other scripts are no revision: "\u00b2" made int() fail (a 500), "\u0661" read as 1
    for unknown in ("nonsense", '"-1"', '"99999999"', "\u00b2", '"\u0661"', "1\u00b2"):
        assert [e["type"] for e in (await delta(client, unknown))[1]] == ["hydration"]


async def test_the_change_log_is_written_with_each_write_and_bounded(tmp_path: Path) -> None:
    db = SqliteDatabase(tmp_path / "relay.db", CENTRAL_SCHEMA)
    await db.open()
    try:
        flags = FlagService(Writer(db, kept=2), FlagRecords())
        await flags.create(ACTOR, "default", CreateFlag(name="checkout"))
        await flags.create(ACTOR, "default", CreateFlag(name="search"))
        with contextlib.suppress(Conflict):  # refused: rolled back, not logged
            await flags.create(ACTOR, "default", CreateFlag(name="search"))
        for on in (True, False):
            await flags.set_enabled(ACTOR, "default", "checkout", "development", on)
        rows = await db.fetch_all("SELECT revision, kind, key FROM flag_changes ORDER BY revision")
        assert [tuple(row) for row in rows] == [(3, "flag", "checkout"), (4, "flag", "checkout")]
        [(floor,)] = await db.fetch_all("SELECT changes_floor FROM flag_revision")
        assert floor == 2  # a client at 1 (before search was created) gets a hydration
        cache = ServedDeltas(ClientFeaturesCache(db))
        scope = Scope("development", None, None, False)
        assert json.loads((await cache.delta(scope, 1)).body)["events"][0]["type"] == "hydration"
        events = json.loads((await cache.delta(scope, 2)).body)["events"]
        assert [(e["eventId"], e["type"]) for e in events] == [(4, "feature-updated")]
    finally:
        await db.close()


async def test_made_up_revisions_share_one_hydration(tmp_path: Path) -> None:
    """A client naming revisions the service never held gets the scope's one hydration,
    put together once: made-up values cannot fill memory with copies of it."""
    db = SqliteDatabase(tmp_path / "relay.db", CENTRAL_SCHEMA)
    await db.open()
    try:
        flags = FlagService(Writer(db), FlagRecords())
        await flags.create(ACTOR, "default", CreateFlag(name="checkout"))
        cache = ServedDeltas(ClientFeaturesCache(db))
        scope = Scope("development", None, None, False)
        first = await cache.delta(scope, None)
        for made_up in (-1, 10**9, 10**9 + 1):
            assert await cache.delta(scope, made_up) is first
    finally:
        await db.close()


async def test_a_project_key_hears_only_of_its_own_segments_removed(client: Any) -> None:
    """A segment of another project deleted was announced to every key as
    ``segment-removed``: a key of project ``default`` learnt the id of a segment of project
    ``other``, which it never saw. It hears of its own projects' segments and of global
    ones (which its flags may have used); a key of every project hears of all."""
    await ok(client, "POST", "/api/admin/projects", {"id": "other", "name": "other"}, status=201)
    body = {"environment": "development"}
    await ok(client, "POST", "/api/admin/projects/other/environments", body)
    every = await ok(
        client,
        "POST",
        "/api/admin/api-tokens",
        {"type": "client", "tokenName": "all", "environment": "development", "projects": ["*"]},
        status=201,
    )
    made = {}
    for name, project in (("theirs", "other"), ("ours", "default"), ("shared", None)):
        body = {"name": name, "constraints": [user_in("1")], "project": project}
        made[name] = (await ok(client, "POST", "/api/admin/segments", body, status=201))["id"]
    await create_flag(client, "their-flag", project="other")
    their = {"name": "default", "segments": [made["theirs"], made["shared"]]}
    strategy = await add_strategy(client, "their-flag", their, project="other")
    await create_flag(client, "our-flag")
    ours = await add_strategy(client, "our-flag", {"name": "default", "segments": [made["ours"]]})
    _, _, mine = await delta(client)
    _, _, all_of_them = await delta(client, key=every["secret"])

    await ok(
        client,
        "DELETE",
        f"{feature_path('their-flag', 'other')}/environments/development"
        f"/strategies/{strategy['id']}",
    )
    await ok(
        client,
        "DELETE",
        f"{feature_path('our-flag')}/environments/development/strategies/{ours['id']}",
    )
    for id in made.values():
        await ok(client, "DELETE", f"/api/admin/segments/{id}", status=204)

    _, events, _ = await delta(client, mine)
    removed = {e["segmentId"] for e in events if e["type"] == "segment-removed"}
    assert removed == {made["ours"], made["shared"]}
    _, events, _ = await delta(client, all_of_them, key=every["secret"])
    assert {e["segmentId"] for e in events if e["type"] == "segment-removed"} == set(made.values())
