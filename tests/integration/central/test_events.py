"""The event log (issue 23), on SQLite and PostgreSQL: every admin change recorded with who
made it (the admin key's name, the web session's key; never a secret), in Unleash's shape,
newest first, paged and bounded; a change that rolls back logs nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from clikit import relay
from conftest import ADMIN_KEY, MakeClient, assert_error
from flagkit import FEATURES, add_strategy, call, create_flag, env_path, feature_path, ok, turn
from webkit import csrf, page, sign_in

from relay.central.event_records import EventLog
from relay.central.events import MAX_PAGE_CHARS, EventFilter, EventReader
from relay.central.flags.writes import Writer
from relay.core.audit import MAX_DATA_BYTES, Actor, EventType
from relay.store.sql import CENTRAL_SCHEMA
from relay.store.sqlite import SqliteDatabase

EVENTS = "/api/admin/events"
SHAPE = {
    "id",
    "createdAt",
    "type",
    "createdBy",
    "createdByUserId",
    "environment",
    "project",
    "featureName",
    "data",
    "preData",
    "tags",
}
ROLLOUT = {"name": "flexibleRollout", "parameters": {"rollout": "50", "stickiness": "default"}}


async def named_admin(client: Any, name: str) -> str:
    """A new admin key called ``name``: its secret."""
    body = {"type": "admin", "tokenName": name}
    secret: str = (await ok(client, "POST", "/api/admin/api-tokens", body, 201))["secret"]
    return secret


async def events(client: Any, query: str = "") -> Any:
    return await ok(client, "GET", f"{EVENTS}{query}")


async def test_each_change_is_an_event_in_unleash_shape_by_the_key_that_made_it(
    client: Any,
) -> None:
    secret = await named_admin(client, "release-bot")

    async def by_bot(method: str, path: str, body: Any = None, status: int = 200) -> Any:
        got, answer = await call(client, method, path, body, key=secret)
        assert got == status, (path, got, answer)
        return answer

    await by_bot("POST", FEATURES.format(project="default"), {"name": "checkout"}, 201)
    await by_bot("PUT", feature_path("checkout"), {"description": "New checkout"})
    strategy = await by_bot("POST", f"{env_path('checkout')}/strategies", ROLLOUT)
    changed = {**ROLLOUT, "parameters": {**ROLLOUT["parameters"], "rollout": "75"}}
    await by_bot("PUT", f"{env_path('checkout')}/strategies/{strategy['id']}", changed)
    await by_bot("POST", f"{env_path('checkout')}/on")
    await by_bot("DELETE", f"{env_path('checkout')}/strategies/{strategy['id']}")
    await by_bot("DELETE", feature_path("checkout"), status=202)
    await by_bot("POST", "/api/admin/archive/revive/checkout")

    answer = await events(client, "?feature=checkout")
    assert answer["version"] == 1 and answer["totalEvents"] == 9
    found = answer["events"]
    assert [e["type"] for e in found] == [
        "feature-revived",
        "feature-archived",
        "feature-environment-disabled",  # its last strategy gone, the flag is off there
        "feature-strategy-remove",
        "feature-environment-enabled",
        "feature-strategy-update",
        "feature-strategy-add",
        "feature-metadata-updated",
        "feature-created",
    ]
    assert all(set(e) == SHAPE for e in found), found[0]
    assert {e["createdBy"] for e in found} == {"release-bot"}
    assert {(e["project"], e["featureName"]) for e in found} == {("default", "checkout")}
    assert [e["id"] for e in found] == sorted((e["id"] for e in found), reverse=True)
    created, described = found[-1], found[-2]
    assert created["preData"] is None and created["data"]["name"] == "checkout"
    assert created["data"]["environments"][0]["enabled"] is False
    assert (described["preData"]["description"], described["data"]["description"]) == (
        None,
        "New checkout",
    )
    update = found[-4]
    assert update["environment"] == "development"
    assert update["preData"]["parameters"]["rollout"] == "50"
    assert update["data"]["parameters"]["rollout"] == "75"
    assert update["data"]["id"] == strategy["id"]
    enabled = found[4]
    assert enabled["environment"] == "development"
    assert enabled["data"]["environments"][0]["enabled"] is True
    removed = found[3]
    assert removed["data"] is None and removed["preData"]["id"] == strategy["id"]
    assert found[2]["environment"] == "development"
    assert found[1]["data"]["archived"] is True and found[1]["preData"]["archived"] is False

    # the per-flag path answers the same events as Unleash's featureEventsSchema
    per_flag = await ok(client, "GET", f"{EVENTS}/checkout")
    assert per_flag["toggleName"] == "checkout" and per_flag["events"] == found
    # the key's secret is in no event, nor is the first admin key's
    whole = json.dumps(await events(client))
    assert secret not in whole and secret.split(".")[1] not in whole
    assert ADMIN_KEY.split(".")[1] not in whole


async def test_projects_environments_segments_and_keys_are_logged(client: Any) -> None:
    await ok(client, "POST", "/api/admin/projects", {"id": "shop", "name": "Shop"}, 201)
    await ok(client, "PUT", "/api/admin/projects/shop", {"name": "Web shop"})
    await ok(client, "POST", "/api/admin/environments", {"name": "qa", "type": "test"}, 201)
    await ok(client, "POST", "/api/admin/projects/shop/environments", {"environment": "qa"})
    await ok(client, "DELETE", "/api/admin/projects/shop/environments/qa")
    segment = {"name": "nordics", "constraints": []}
    created = await ok(client, "POST", "/api/admin/segments", segment, 201)
    await ok(client, "DELETE", f"/api/admin/segments/{created['id']}", status=204)
    body = {"type": "client", "environment": "development", "projects": ["shop"], "tokenName": "k"}
    key = await ok(client, "POST", "/api/admin/api-tokens", body, 201)
    await ok(client, "DELETE", f"/api/admin/api-tokens/{key['id']}")

    found = (await events(client))["events"]
    kinds = [(e["type"], e["project"], e["environment"]) for e in found]
    assert kinds[:9] == [
        ("api-token-deleted", "shop", "development"),
        ("api-token-created", "shop", "development"),
        ("segment-deleted", None, None),
        ("segment-created", None, None),
        ("project-environment-removed", "shop", "qa"),
        ("project-environment-added", "shop", "qa"),
        ("environment-created", None, "qa"),
        ("project-updated", "shop", None),
        ("project-created", "shop", None),
    ]
    token = found[1]["data"]
    assert token == {
        "id": key["id"],
        "tokenName": "k",
        "type": "client",
        "environment": "development",
        "projects": ["shop"],
    }
    assert key["secret"] not in json.dumps(found)
    assert found[7]["preData"]["name"] == "Shop" and found[7]["data"]["name"] == "Web shop"
    # the first admin key has no name: the event names it as it may be shown, never whole
    assert found[0]["createdBy"].startswith("*:*.") and found[0]["createdBy"] != ADMIN_KEY


async def test_the_web_page_logs_its_changes_as_the_signed_in_key(client: Any) -> None:
    secret = await named_admin(client, "alice")
    await create_flag(client, "checkout")
    assert (await sign_in(client, secret)).status == 303
    html = await page(client, "/flags/checkout")
    action = "/flags/checkout/environments/development"
    data = {"on": "true", "csrf": csrf(html), "next": "/flags/checkout"}
    answer = await client.post(action, data=data, allow_redirects=False)
    assert answer.status == 303
    [newest] = (await events(client, "?limit=1"))["events"]
    assert (newest["type"], newest["createdBy"]) == ("feature-environment-enabled", "alice")


async def test_reads_are_paged_filtered_and_bounded(client: Any) -> None:
    for name in ("a", "b", "c"):
        await create_flag(client, name)
        await turn(client, name)
    everything = await events(client, "?feature=b")
    assert everything["totalEvents"] == 2
    first = await events(client, "?limit=2")
    second = await events(client, "?limit=2&offset=2")
    assert first["totalEvents"] == second["totalEvents"] == 6
    ids = [e["id"] for e in first["events"] + second["events"]]
    assert len(set(ids)) == 4 and ids == sorted(ids, reverse=True)
    assert (await events(client, "?offset=6"))["events"] == []
    assert (await events(client, "?project=nope"))["totalEvents"] == 0
    per_flag = await ok(client, "GET", f"{EVENTS}/c?limit=1")
    assert [e["type"] for e in per_flag["events"]] == ["feature-environment-enabled"]
    assert per_flag["totalEvents"] == 2
    odd = ("?limit=1001", "?limit=0", "?limit=x", "?offset=-1", "?offset=1e3", "?feature=")
    for query in (*odd, "?project=a%00b", "?feature=%00", f"?feature={'x' * 256}"):
        status, error = await call(client, "GET", f"{EVENTS}{query}")
        assert status == 400, query
        assert_error(error, "BadDataError")
    status, _ = await call(client, "GET", EVENTS, key="nope")
    assert status == 401


async def test_a_refused_change_logs_nothing(client: Any) -> None:
    await create_flag(client, "checkout")
    before = (await events(client))["totalEvents"]
    refused = [
        ("POST", FEATURES.format(project="default"), {"name": "checkout"}, 409),
        ("POST", "/api/admin/projects", {"id": "default", "name": "Again"}, 409),
        ("DELETE", "/api/admin/projects/default", None, 403),
        ("POST", f"{env_path('checkout')}/strategies", {"name": "x", "segments": [9]}, 400),
    ]
    for method, path, body, status in refused:
        assert (await call(client, method, path, body))[0] == status, path
    assert (await events(client))["totalEvents"] == before


async def test_a_write_that_rolls_back_after_its_event_logs_nothing(tmp_path: Path) -> None:
    """The event is written in the write's transaction: an error after it (here, raised
    inside the write) takes the event back with the change."""
    db = SqliteDatabase(tmp_path / "relay.db", CENTRAL_SCHEMA)
    await db.open()
    try:
        writer = Writer(db)
        with pytest.raises(RuntimeError):
            async with writer(Actor("tests")) as w:
                await w.tx.execute("UPDATE projects SET name = 'Changed' WHERE id = 'default'")
                await w.event(EventType.PROJECT_UPDATED, project="default")
                raise RuntimeError("after the event, before the commit")
        assert await EventReader(EventLog(db)).page(EventFilter(), 0, 10) == ([], 0)
        async with writer(Actor("tests")) as w:
            await w.event(EventType.PROJECT_UPDATED, project="default")
        found, total = await EventReader(EventLog(db)).page(EventFilter(project="default"), 0, 10)
        assert total == 1 and found[0].createdBy == "tests"
    finally:
        await db.close()


async def test_the_log_keeps_at_most_event_log_kept_events(make_client: MakeClient) -> None:
    client = await make_client(event_log_kept=100)
    for i in range(120):
        await create_flag(client, f"flag-{i:03d}")
    answer = await events(client, "?limit=1000")
    assert answer["totalEvents"] == 100 == len(answer["events"])
    assert answer["events"][0]["featureName"] == "flag-119"
    assert answer["events"][-1]["featureName"] == "flag-020"


async def test_before_and_after_are_bounded_in_bytes(client: Any) -> None:
    """A strategy of ~50 KB (a flag may hold 256 KB in an environment) is kept in its
    event as its name and size, not whole."""
    await create_flag(client, "big")
    values = [f"user-{i:06d}-{'x' * 36}" for i in range(1000)]
    constraint = {"contextName": "userId", "operator": "IN", "values": values}
    await add_strategy(client, "big", {"name": "default", "constraints": [constraint]})
    [event] = (await events(client, "?limit=1"))["events"]
    assert event["type"] == "feature-strategy-add"
    assert event["data"]["name"] == "default" and event["data"]["truncated"] is True
    assert event["data"]["bytes"] > MAX_DATA_BYTES
    assert len(json.dumps(event)) < 2000


async def test_the_command_line_is_logged_as_its_user(tmp_path: Path) -> None:
    """``relay flags`` writes the store directly: its events name the OS user."""
    done = relay("flags", "create", "checkout", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    db = SqliteDatabase(tmp_path / "data" / "relay.db", CENTRAL_SCHEMA)
    await db.open()
    try:
        found, _ = await EventReader(EventLog(db)).page(EventFilter(feature="checkout"), 0, 10)
    finally:
        await db.close()
    assert [e.type for e in found] == ["feature-created"]
    assert found[0].createdBy.endswith("(command line)")


async def test_a_reorder_of_strategies_is_an_event_with_both_orders(client: Any) -> None:
    await create_flag(client, "ordered")
    first = await add_strategy(client, "ordered", ROLLOUT)
    second = await add_strategy(client, "ordered", {"name": "default"})
    body = [{"id": second["id"], "sortOrder": 0}, {"id": first["id"], "sortOrder": 1}]
    await ok(client, "POST", f"{env_path('ordered')}/strategies/set-sort-order", body)
    latest = (await events(client, "?feature=ordered"))["events"][0]
    assert latest["type"] == "strategy-order-changed"
    assert latest["environment"] == "development"
    assert latest["preData"] == {"strategyIds": [first["id"], second["id"]]}
    assert latest["data"] == {"strategyIds": [second["id"], first["id"]]}


async def test_dependencies_variants_and_tags_are_logged(client: Any) -> None:
    """The flag model's other changes are events too, each with before and after."""
    await create_flag(client, "parent")
    await create_flag(client, "child")
    path = feature_path("child")
    await ok(client, "POST", f"{path}/dependencies", {"feature": "parent", "enabled": False})
    await ok(client, "DELETE", f"{path}/dependencies")
    pushed = {"variants": [{"name": "blue", "weight": 0}], "environments": ["development"]}
    await ok(client, "PUT", f"{path}/variants-batch", pushed)
    await ok(client, "POST", "/api/admin/features/child/tags", {"value": "team-a"}, status=201)
    await ok(client, "DELETE", "/api/admin/features/child/tags/simple/team-a")
    found = (await events(client, "?feature=child"))["events"]
    assert [e["type"] for e in found[:5]] == [
        "feature-untagged",
        "feature-tagged",
        "feature-environment-variants-updated",
        "feature-dependency-removed",
        "feature-dependency-added",
    ]
    untagged, tagged, variants, removed, added = found[:5]
    assert added["preData"] is None
    assert added["data"] == {"feature": "parent", "enabled": False, "variants": []}
    assert removed["preData"] == added["data"] and removed["data"] is None
    assert variants["environment"] == "development" and variants["preData"] == []
    assert [v["name"] for v in variants["data"]] == ["blue"]
    assert tagged["data"] == untagged["preData"] == {"value": "team-a", "type": "simple"}


async def test_a_page_of_large_events_is_bounded_in_bytes_and_pages_on(client: Any) -> None:
    """A thousand events of 64 KB each would be a 64 MB answer (and several times that in
    memory): a read stops at ``MAX_PAGE_CHARS`` of before and after, and the rest is the
    next page, by offset, on the API and the page alike."""
    await create_flag(client, "big")
    values = [f"v{i}-{'a' * 4000}" for i in range(7)]  # ~28 KB: kept whole, before and after
    constraint = {"contextName": "userId", "operator": "IN", "values": values}
    strategy = {"name": "flexibleRollout", "parameters": {"rollout": "0"}}
    added = await add_strategy(client, "big", {**strategy, "constraints": [constraint]})
    updates = MAX_PAGE_CHARS // (2 * len(json.dumps(values))) + 10
    for rollout in range(1, updates + 1):
        changed = {**strategy, "parameters": {"rollout": str(rollout)}, "constraints": [constraint]}
        await ok(client, "PUT", f"{env_path('big')}/strategies/{added['id']}", changed)

    first = await events(client, "?limit=1000")
    assert first["totalEvents"] == updates + 2
    assert 1 <= len(first["events"]) < updates
    assert len(json.dumps(first)) < MAX_PAGE_CHARS + 100_000
    rest = await events(client, f"?limit=1000&offset={len(first['events'])}")
    ids = [e["id"] for e in first["events"] + rest["events"]]
    assert ids == list(range(ids[0], ids[0] - len(ids), -1))  # no gap, no overlap

    assert (await sign_in(client)).status == 303
    html = await page(client, "/events?limit=1000")
    assert html.count('class="event"') == len(first["events"])
    assert f"offset={len(first['events'])}&amp;limit=1000" in html
