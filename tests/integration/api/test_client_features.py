"""``GET /api/client/features`` of the standalone service, on SQLite and PostgreSQL: Unleash's
format, what each key sees, ETags and 304s, segments by ``Unleash-Client-Spec``, and the
cache (no database read per poll; another instance's write seen within the poll interval)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from conftest import ADMIN_KEY, DEV_KEY, PROD_KEY, assert_error, auth, bulk, metric
from flagkit import add_strategy, client_features, create_flag, ok, served, turn
from service import eventually

from relay.api.client_features import RENDERS
from relay.central.flags.flag_records import FlagRecords
from relay.central.flags.flags import FlagService
from relay.central.flags.records import load_state
from relay.central.flags.serving import LOADS, POLL_INTERVAL, ClientFeaturesCache
from relay.central.flags.writes import Writer
from relay.core.audit import Actor
from relay.core.client_features import Scope, render
from relay.store.sql import CENTRAL_SCHEMA
from relay.store.sqlite import SqliteDatabase
from relay.wire.client_features import ClientFeatures
from relay.wire.flags import CreateFlag

ACTOR = Actor("tests")


async def key_for(client: Any, projects: list[str], env: str = "development") -> str:
    body = {"type": "client", "environment": env, "projects": projects}
    token = await ok(client, "POST", "/api/admin/api-tokens", body, status=201)
    secret: str = token["secret"]
    return secret


async def test_answer_has_unleash_format_and_its_etag(client: Any) -> None:
    await create_flag(client, "checkout", description="New checkout", type="experiment")
    await turn(client, "checkout")
    status, body, etag = await client_features(client)
    assert status == 200
    ClientFeatures.model_validate(body)  # the documented schema, exactly (no extra keys)
    assert list(body) == ["version", "features", "query", "segments", "meta"]
    assert body["version"] == 2 and body["segments"] == []
    [feature] = body["features"]
    assert feature == {
        "name": "checkout",
        "type": "experiment",
        "enabled": True,
        "project": "default",
        "stale": False,
        "strategies": [
            {
                "name": "flexibleRollout",
                "constraints": [],
                "parameters": {"rollout": "100", "stickiness": "default", "groupId": "checkout"},
                "variants": [],
            }
        ],
        "variants": [],
        "description": "New checkout",
        "impressionData": False,
    }
    # the test key is for project default: the answer says so
    assert body["query"] == {
        "project": ["default"],
        "environment": "development",
        "inlineSegmentConstraints": False,
    }
    assert body["meta"]["etag"] == etag and etag.startswith('"')
    assert body["meta"]["revisionId"] >= 1 and body["meta"]["queryHash"]


async def test_a_key_sees_its_projects_and_environment_only(client: Any) -> None:
    await ok(client, "POST", "/api/admin/projects", {"id": "shop", "name": "Shop"}, 201)
    await ok(
        client, "POST", "/api/admin/projects/shop/environments", {"environment": "development"}
    )
    await create_flag(client, "in-default")
    await create_flag(client, "in-shop", project="shop")
    await create_flag(client, "shop-other", project="shop")
    await turn(client, "in-default", env="production")
    shop = await key_for(client, ["shop"])
    every = await key_for(client, ["*"])
    assert set(await served(client, shop)) == {"in-shop", "shop-other"}
    assert set(await served(client, DEV_KEY)) == {"in-default"}
    assert set(await served(client, every)) == {"in-default", "in-shop", "shop-other"}
    # the project parameter narrows a key's projects, never widens them
    assert set(await served(client, every, query="?project=shop")) == {"in-shop", "shop-other"}
    assert set(await served(client, shop, query="?project=default")) == set()
    both = "?project=default&project=shop"
    assert set(await served(client, every, query=both)) == {"in-default", "in-shop", "shop-other"}
    assert set(await served(client, every, query="?namePrefix=in-")) == {"in-default", "in-shop"}
    _, body, _ = await client_features(client, every, query="?namePrefix=in-&project=shop")
    assert body["query"]["namePrefix"] == "in-" and body["query"]["project"] == ["shop"]
    # the key's environment decides the state served
    assert (await served(client, DEV_KEY))["in-default"]["enabled"] is False
    assert (await served(client, PROD_KEY))["in-default"]["enabled"] is True
    # admin keys are refused, as on every client endpoint
    status, error, _ = await client_features(client, ADMIN_KEY)
    assert status == 403
    assert_error(error, "NoAccessError")


async def test_etag_changes_exactly_when_what_the_key_sees_changes(client: Any) -> None:
    await create_flag(client, "checkout")
    status, first, etag = await client_features(client)
    assert status == 200
    assert (await client_features(client, etag=etag))[:2] == (304, None)
    assert (await client_features(client, etag=f'"other", W/{etag}'))[0] == 304
    # writes this key cannot see: another environment's state, another project's flags
    await turn(client, "checkout", env="production")
    await ok(client, "POST", "/api/admin/projects", {"id": "shop", "name": "Shop"}, 201)
    await create_flag(client, "elsewhere", project="shop")
    status, again, same = await client_features(client)
    assert (status, same) == (200, etag)
    assert again["features"] == first["features"]
    assert (await client_features(client, etag=etag))[0] == 304
    # a write it sees
    await turn(client, "checkout")
    status, changed, new = await client_features(client, etag=etag)
    assert status == 200 and new != etag
    assert changed["features"][0]["enabled"] is True
    assert changed["meta"]["revisionId"] > first["meta"]["revisionId"]
    # the same scope asked differently is another answer with its own ETag
    assert (await client_features(client, query="?namePrefix=check"))[2] not in (etag, new)


async def test_polls_are_answered_without_reading_the_database(client: Any) -> None:
    await create_flag(client, "checkout")
    await client_features(client)
    loads = LOADS._value.get()
    for _ in range(50):
        assert (await client_features(client))[0] == 200
    assert LOADS._value.get() == loads
    await turn(client, "checkout")  # this worker's write: the next poll sees it
    assert (await served(client))["checkout"]["enabled"] is True
    assert LOADS._value.get() == loads + 1


async def test_another_instance_write_is_seen_within_the_poll_interval(
    make_client: Any,
) -> None:
    """Two apps on one database, as two instances (or two workers) would be."""
    first = await make_client()
    second = await make_client()
    await create_flag(first, "checkout")
    assert (await served(second))["checkout"]["enabled"] is False
    started = time.monotonic()
    await turn(first, "checkout")

    async def seen() -> bool:
        return bool((await served(second))["checkout"]["enabled"])

    await eventually(seen, within=10 * POLL_INTERVAL)
    print(f"seen by the other instance after {time.monotonic() - started:.2f} s")


async def test_segments_by_client_spec(client: Any) -> None:
    segment = await ok(
        client,
        "POST",
        "/api/admin/segments",
        {
            "name": "beta",
            "constraints": [{"contextName": "userId", "operator": "IN", "values": ["7"]}],
        },
        status=201,
    )
    await create_flag(client, "checkout")
    constraint = {"contextName": "appName", "operator": "IN", "values": ["shop"]}
    await add_strategy(
        client,
        "checkout",
        {"name": "default", "constraints": [constraint], "segments": [segment["id"]]},
    )
    await ok(client, "POST", "/api/admin/segments", {"name": "unused", "constraints": []}, 201)
    for spec in ("4.2.0", "5.1.9", "4.10.0"):
        _, body, _ = await client_features(client, spec=spec)
        [strategy] = body["features"][0]["strategies"]
        assert strategy["segments"] == [segment["id"]], spec
        assert [c["contextName"] for c in strategy["constraints"]] == ["appName"]
        assert body["segments"] == [
            {"id": segment["id"], "name": "beta", "constraints": segment["constraints"]}
        ], spec
        assert body["query"]["inlineSegmentConstraints"] is False
    for spec in (None, "4.1.9", "4.2.0-beta.1", "3.0.0"):
        _, body, _ = await client_features(client, spec=spec)
        assert "segments" not in body, spec
        [strategy] = body["features"][0]["strategies"]
        assert "segments" not in strategy
        assert [c["contextName"] for c in strategy["constraints"]] == ["appName", "userId"]
        assert body["query"]["inlineSegmentConstraints"] is True
        ClientFeatures.model_validate(body)
    for spec in ("v5.0.0", "5", "garbage", "5.0"):
        status, error, _ = await client_features(client, spec=spec)
        assert status == 400, spec
        assert_error(error, "BadDataError")
        assert error["details"][0]["path"] == "/header/Unleash-Client-Spec"


async def test_one_feature(client: Any) -> None:
    await create_flag(client, "checkout")
    await turn(client, "checkout")
    response = await client.get("/api/client/features/checkout", headers=auth(DEV_KEY))
    assert response.status == 200
    assert response.content_type == "application/json"
    assert await response.json() == (await served(client))["checkout"]
    await ok(client, "POST", "/api/admin/projects", {"id": "shop", "name": "Shop"}, 201)
    await create_flag(client, "elsewhere", project="shop")
    for name in ("nothing", "elsewhere"):
        response = await client.get(f"/api/client/features/{name}", headers=auth(DEV_KEY))
        assert response.status == 404, name
        error = await response.json()
        assert_error(error, "NotFoundError")
        assert error["message"] == f"Could not find feature flag {name}"


async def test_metrics_of_unknown_names_are_kept_and_listed(client: Any) -> None:
    await create_flag(client, "known")
    body = bulk(
        [
            metric("known", yes=1),
            metric("ghost", app="shop", yes=2),
            metric("ghost", app="web", no=1),
            metric("typo", app="shop", yes=1),
        ]
    )
    response = await client.post("/api/client/metrics/bulk", json=body, headers=auth(DEV_KEY))
    assert response.status == 202
    answer = await ok(client, "GET", "/api/admin/metrics/unknown-flags")
    flags = {f["name"]: f for f in answer["unknownFlags"]}
    assert list(flags) == ["ghost", "typo"]
    ghost = flags["ghost"]
    assert [r["appName"] for r in ghost["reports"]] == ["shop", "web"]
    assert ghost["reports"][0]["environments"][0]["environment"] == "development"
    assert ghost["lastSeenAt"] == ghost["reports"][0]["environments"][0]["seenAt"]
    assert ghost["lastEventAt"] is None
    raw = await client.get("/api/admin/client-metrics/features/ghost/raw", headers=auth(ADMIN_KEY))
    assert [row["yes"] for row in (await raw.json())["data"]] in ([2, 0], [0, 2])


async def test_cached_answers_are_bounded_in_bytes(tmp_path: Path) -> None:
    """Scopes a client makes up (prefixes, projects) cannot grow memory past the budget:
    the least recently used answers are dropped and rendered again when asked."""
    db = SqliteDatabase(tmp_path / "relay.db", CENTRAL_SCHEMA)
    await db.open()
    try:
        flags = FlagService(Writer(db), FlagRecords())
        for i in range(20):
            await flags.create(
                ACTOR, "default", CreateFlag(name=f"flag-{i:02d}", description="x" * 500)
            )
        whole = Scope("development", None, None, inline_segments=False)
        size = len(render(await load_state(db), whole).body)
        cache = ClientFeaturesCache(db, max_bytes=2 * size)
        scopes = [Scope("development", None, prefix, False) for prefix in (None, "flag", "flag-")]
        for scope in scopes:
            await cache.answer(scope)
        renders = RENDERS.labels("derived")._value.get()
        await cache.answer(scopes[2])  # recent: still cached
        assert RENDERS.labels("derived")._value.get() == renders
        await cache.answer(scopes[0])  # the oldest was dropped to stay within 2 answers
        assert RENDERS.labels("derived")._value.get() == renders + 1
    finally:
        await db.close()
