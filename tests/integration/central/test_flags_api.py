"""The flag admin API of the standalone service, on SQLite and PostgreSQL (``client`` runs
each test on both): flags, names, changes, the archive, who may call. Strategies are in
test_strategies_api.py."""

from __future__ import annotations

from typing import Any

from conftest import DEV_KEY, assert_error, auth
from flagkit import (
    FEATURES,
    call,
    create_flag,
    env_path,
    feature_path,
    ok,
    rollout,
    served,
    turn,
)

DEFAULT = FEATURES.format(project="default")


async def test_create_flag_answers_201_with_the_flag_off_everywhere(client: Any) -> None:
    flag = await create_flag(client, "checkout", description="New checkout", impressionData=True)
    assert flag["name"] == "checkout" and flag["project"] == "default"
    assert flag["type"] == "release" and flag["description"] == "New checkout"
    assert flag["impressionData"] is True and flag["stale"] is False
    assert flag["archived"] is False and flag["archivedAt"] is None
    assert [(e["name"], e["enabled"], e["strategies"]) for e in flag["environments"]] == [
        ("development", False, []),
        ("production", False, []),
    ]
    assert await ok(client, "GET", feature_path("checkout")) == flag
    listed = await ok(client, "GET", DEFAULT)
    assert listed == {"version": 2, "features": [flag]}


async def test_a_name_is_taken_in_the_whole_instance(client: Any) -> None:
    await ok(client, "POST", "/api/admin/projects", {"id": "shop", "name": "Shop"}, 201)
    await create_flag(client, "checkout")
    for project in ("default", "shop"):
        status, error = await call(
            client, "POST", FEATURES.format(project=project), {"name": "checkout"}
        )
        assert status == 409, error
        assert_error(error, "NameExistsError")
        assert error["message"] == "A flag with that name already exists"
    await ok(client, "DELETE", feature_path("checkout"), status=202)
    status, error = await call(client, "POST", DEFAULT, {"name": "checkout"})
    assert (status, error["message"]) == (409, "An archived flag with that name already exists")


async def test_names_follow_unleash_rules_and_bad_bodies_are_400(client: Any) -> None:
    for body, path in [
        ({"name": "with space"}, "/body/name"),
        ({"name": "x" * 101}, "/body/name"),
        ({"name": "käse"}, "/body/name"),
        ({"name": "a/b"}, "/body/name"),
        ({}, "/body/name"),
        ({"name": "ok", "type": "nonsense"}, "/body/type"),
        ({"name": "ok", "impressionData": "yes"}, "/body/impressionData"),
        ({"name": "ok", "tags": []}, "/body/tags"),
    ]:
        status, error = await call(client, "POST", DEFAULT, body)
        assert status == 400, body
        assert_error(error, "BadDataError")
        assert path in [d["path"] for d in error["details"]], (body, error)
    for name in (".", ".."):
        status, _ = await call(client, "POST", DEFAULT, {"name": name})
        assert status == 400, name
    assert (await create_flag(client, "Unleash.Demo_flag-(1)!~*'"))["name"]


async def test_unknown_project_and_flag_are_404(client: Any) -> None:
    status, error = await call(client, "POST", FEATURES.format(project="nope"), {"name": "f"})
    assert status == 404
    assert_error(error, "NotFoundError")
    # a project that is not there has no flags (Unleash 8.2: 200)
    assert await ok(client, "GET", FEATURES.format(project="nope")) == {
        "version": 2,
        "features": [],
    }
    await ok(client, "POST", "/api/admin/projects", {"id": "shop", "name": "Shop"}, 201)
    await create_flag(client, "checkout")
    status, error = await call(client, "GET", feature_path("checkout", project="shop"))
    assert status == 404
    assert 'in project "shop"' in error["message"]
    for method, path, body in [
        ("GET", feature_path("nothing"), None),
        ("PUT", feature_path("nothing"), {"description": "x"}),
        ("PATCH", feature_path("nothing"), []),
        ("DELETE", feature_path("nothing"), None),
        ("POST", f"{env_path('nothing')}/on", None),
        ("POST", f"{env_path('nothing')}/strategies", rollout(5)),
        ("GET", f"{env_path('nothing')}/strategies", None),
    ]:
        status, error = await call(client, method, path, body)
        assert status == 404, (method, path, error)
        assert_error(error, "NotFoundError")
    status, _ = await call(client, "POST", f"{env_path('checkout', project='shop')}/on")
    assert status == 404


async def test_put_changes_the_fields_it_names(client: Any) -> None:
    await create_flag(client, "checkout", description="one", type="experiment")
    flag = await ok(client, "PUT", feature_path("checkout"), {"impressionData": True})
    assert (flag["description"], flag["type"], flag["impressionData"]) == (
        "one",
        "experiment",
        True,
    )
    flag = await ok(
        client,
        "PUT",
        feature_path("checkout"),
        {"name": "checkout", "description": None, "type": "kill-switch", "createdAt": "x"},
    )
    assert (flag["description"], flag["type"]) == (None, "kill-switch")
    status, error = await call(client, "PUT", feature_path("checkout"), {"name": "other"})
    assert status == 400 and error["message"] == "Cannot change name of feature flag"
    status, error = await call(client, "PUT", feature_path("checkout"), {"type": "bogus"})
    assert status == 400 and error["details"][0]["path"] == "/body/type"
    features = await served(client)
    assert features["checkout"]["type"] == "kill-switch"
    assert features["checkout"]["impressionData"] is True


async def test_patch_applies_json_patch_then_validates_as_a_put(client: Any) -> None:
    await create_flag(client, "checkout")
    flag = await ok(
        client,
        "PATCH",
        feature_path("checkout"),
        [
            {"op": "replace", "path": "/description", "value": "patched"},
            {"op": "replace", "path": "/stale", "value": True},
            {"op": "test", "path": "/type", "value": "release"},
        ],
    )
    assert (flag["description"], flag["stale"]) == ("patched", True)
    assert (await served(client))["checkout"]["stale"] is True
    for patch, path in [
        ([{"op": "remove", "path": "/nothing"}], "/body/0"),
        ([{"op": "replace", "path": "/type", "value": "bogus"}], "/body/type"),
        ([{"op": "test", "path": "/type", "value": "experiment"}], "/body/0"),
        ([{"op": "replace", "path": "/name", "value": "renamed"}], None),
        ([{"op": "jump", "path": "/type"}], "/body/0/op"),
        ({"op": "replace"}, "/body"),
    ]:
        status, error = await call(client, "PATCH", feature_path("checkout"), patch)
        assert status == 400, (patch, error)
        assert_error(error, "BadDataError")
        if path is not None:
            assert error["details"][0]["path"] == path, (patch, error)
    assert (await ok(client, "GET", feature_path("checkout")))["description"] == "patched"


async def test_archive_stops_serving_and_revive_brings_the_flag_back_off(client: Any) -> None:
    await create_flag(client, "checkout")
    await turn(client, "checkout")
    await turn(client, "checkout", env="production")
    assert "checkout" in await served(client)
    await ok(client, "DELETE", feature_path("checkout"), status=202)
    assert "checkout" not in await served(client)
    response = await client.get("/api/client/features/checkout", headers=auth(DEV_KEY))
    assert response.status == 404
    # the admin read answers an archived flag 404, as Unleash 8.2; the archive lists it
    status, error = await call(client, "GET", feature_path("checkout"))
    assert status == 404 and error["message"] == "Could not find feature flag with name checkout"
    [flag] = (await ok(client, "GET", "/api/admin/archive/features"))["features"]
    assert flag["name"] == "checkout" and flag["archived"] is True and flag["archivedAt"]
    assert "checkout" not in [f["name"] for f in (await ok(client, "GET", DEFAULT))["features"]]
    for method, path, body in [
        ("POST", f"{env_path('checkout')}/on", None),
        ("PUT", feature_path("checkout"), {"description": "x"}),
        ("POST", f"{env_path('checkout')}/strategies", rollout(1)),
    ]:
        status, error = await call(client, method, path, body)
        assert (
            status == 400
            and error["message"] == "Cannot perform this operation on archived features"
        )
    await ok(client, "POST", "/api/admin/archive/revive/checkout")
    feature = (await served(client))["checkout"]
    assert feature["enabled"] is False and len(feature["strategies"]) == 1
    assert (await call(client, "POST", "/api/admin/archive/revive/nothing"))[0] == 404


async def test_flag_admin_endpoints_need_an_admin_key(client: Any) -> None:
    await create_flag(client, "checkout")
    for method, path in [
        ("GET", DEFAULT),
        ("POST", DEFAULT),
        ("POST", f"{env_path('checkout')}/on"),
        ("GET", "/api/admin/segments"),
        ("GET", "/api/admin/metrics/unknown-flags"),
    ]:
        response = await client.request(method, path, json={"name": "x"}, headers=auth(DEV_KEY))
        assert response.status == 403, (method, path)
        response = await client.request(method, path, json={"name": "x"})
        assert response.status == 401, (method, path)
