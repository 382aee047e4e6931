"""Segments of the standalone service, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
from typing import Any

from conftest import assert_error
from flagkit import add_strategy, call, client_features, create_flag, env_path, ok, turn

SEGMENTS = "/api/admin/segments"
IN_7 = {"contextName": "userId", "operator": "IN", "values": ["7"]}


async def new_segment(client: Any, name: str, **fields: Any) -> dict[str, Any]:
    body = {"name": name, "constraints": [IN_7], **fields}
    segment: dict[str, Any] = await ok(client, "POST", SEGMENTS, body, status=201)
    return segment


async def test_segment_lifecycle(client: Any) -> None:
    segment = await new_segment(client, "beta", description="Beta users")
    assert segment["id"] >= 1 and segment["name"] == "beta"
    assert segment["description"] == "Beta users" and segment["project"] is None
    assert segment["constraints"] == [{**IN_7, "inverted": False, "caseInsensitive": False}]
    assert (segment["usedInFeatures"], segment["usedInProjects"]) == (0, 0)
    one = f"{SEGMENTS}/{segment['id']}"
    assert await ok(client, "GET", one) == segment
    assert await ok(client, "GET", SEGMENTS) == {"segments": [segment]}
    changed = {"name": "beta-2", "constraints": [], "project": "default"}
    assert await ok(client, "PUT", one, changed, status=204) is None
    after = await ok(client, "GET", one)
    assert (after["name"], after["constraints"], after["project"]) == ("beta-2", [], "default")
    assert await ok(client, "DELETE", one, status=204) is None
    assert (await call(client, "GET", one))[0] == 404
    again = await new_segment(client, "beta")
    assert again["id"] > segment["id"]  # ids are never reused


async def test_segment_names_are_unique_and_bodies_checked(client: Any) -> None:
    first = await new_segment(client, "beta")
    second = await new_segment(client, "gamma")
    status, error = await call(client, "POST", SEGMENTS, {"name": "beta", "constraints": []})
    assert status == 409
    assert_error(error, "NameExistsError")
    status, _ = await call(
        client, "PUT", f"{SEGMENTS}/{second['id']}", {"name": "beta", "constraints": []}
    )
    assert status == 409
    assert (
        await call(client, "PUT", f"{SEGMENTS}/{first['id']}", {"name": "beta", "constraints": []})
    )[0] == 204
    for body in (
        {"name": "x"},
        {"name": "x", "constraints": [{"contextName": "a", "operator": "NUM_EQ", "value": "x"}]},
        {"name": "", "constraints": []},
        {"name": "x", "constraints": [], "extra": 1},
    ):
        status, error = await call(client, "POST", SEGMENTS, body)
        assert status == 400, body
        assert_error(error, "BadDataError")
    status, _ = await call(
        client, "POST", SEGMENTS, {"name": "x", "constraints": [], "project": "nope"}
    )
    assert status == 404
    for bad in ("0", "abc", "99999999999999999999", "-1", "1.5", "²"):
        assert (await call(client, "GET", f"{SEGMENTS}/{bad}"))[0] == 404, bad
        assert (await call(client, "DELETE", f"{SEGMENTS}/{bad}"))[0] == 404, bad


async def test_a_segment_in_use_cannot_be_deleted(client: Any) -> None:
    segment = await new_segment(client, "beta")
    await create_flag(client, "checkout")
    strategy = await add_strategy(
        client, "checkout", {"name": "default", "segments": [segment["id"]]}
    )
    assert strategy["segments"] == [segment["id"]]
    used = await ok(client, "GET", f"{SEGMENTS}/{segment['id']}")
    assert (used["usedInFeatures"], used["usedInProjects"]) == (1, 1)
    status, error = await call(client, "DELETE", f"{SEGMENTS}/{segment['id']}")
    assert status == 409
    assert_error(error, "NameExistsError")
    # a change of the segment is served at once
    await ok(client, "PUT", f"{SEGMENTS}/{segment['id']}", {"name": "beta", "constraints": []}, 204)
    _, body, _ = await client_features(client)
    assert body["segments"] == [{"id": segment["id"], "name": "beta", "constraints": []}]
    await ok(client, "DELETE", f"{env_path('checkout')}/strategies/{strategy['id']}")
    await ok(client, "DELETE", f"{SEGMENTS}/{segment['id']}", status=204)


async def test_strategies_name_existing_segments_of_their_project(client: Any) -> None:
    await ok(client, "POST", "/api/admin/projects", {"id": "shop", "name": "Shop"}, 201)
    shop = await new_segment(client, "shop-only", project="shop")
    await create_flag(client, "checkout")
    for ids, problem in (([999], "does not exist"), ([shop["id"]], "belongs to project shop")):
        status, error = await call(
            client,
            "POST",
            f"{env_path('checkout')}/strategies",
            {"name": "default", "segments": ids},
        )
        assert status == 400, error
        assert error["details"][0]["path"] == "/body/segments/0"
        assert problem in error["message"]
    shared = await new_segment(client, "shared")
    await add_strategy(client, "checkout", {"name": "default", "segments": [shared["id"]]})
    status, error = await call(
        client,
        "PUT",
        f"{SEGMENTS}/{shared['id']}",
        {"name": "shared", "constraints": [], "project": "shop"},
    )
    assert status == 400 and error["details"][0]["path"] == "/body/project"


async def test_a_flag_with_its_segments_inlined_holds_at_most_256_kib(client: Any) -> None:
    """On the merged main a flag's 256 KiB counted its strategies without their segments:
    a strategy naming four 200 KB segments was saved, and an SDK older than segments (or
    one that sends no Unleash-Client-Spec) got an 800 KB flag; a segment could also grow
    past the bound after the flag named it."""
    big = {"contextName": "u", "operator": "IN", "values": [f"{i:0200d}" for i in range(1000)]}
    ids = [(await new_segment(client, f"big-{n}", constraints=[big]))["id"] for n in range(4)]
    small = (await new_segment(client, "small"))["id"]
    await create_flag(client, "checkout")
    path = f"{env_path('checkout')}/strategies"
    status, error = await call(client, "POST", path, {"name": "default", "segments": ids})
    assert status == 400 and "262144" in error["message"], error
    assert error["details"][0]["path"] == "/body", error
    saved = await add_strategy(client, "checkout", {"name": "default", "segments": [ids[0]]})
    one = f"{path}/{saved['id']}"
    status, error = await call(client, "PUT", one, {"name": "default", "segments": ids[:2]})
    assert status == 400 and "262144" in error["message"], error
    await add_strategy(client, "checkout", {"name": "default", "segments": [small]})
    twice = {"name": "small", "constraints": [big, big]}
    status, error = await call(client, "PUT", f"{SEGMENTS}/{small}", twice)
    assert status == 400 and "checkout" in error["message"], error
    await turn(client, "checkout", True)
    status, body, _ = await client_features(client, spec=None)
    assert status == 200
    [flag] = body["features"]
    assert len(json.dumps(flag)) < 300 * 1024
