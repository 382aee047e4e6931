"""The flag admin API of the standalone service, on SQLite and PostgreSQL (``client`` runs
each test on both): flags, their environments, strategies, the archive."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from conftest import DEV_KEY, assert_error, auth, standalone_settings
from flagkit import (
    FEATURES,
    add_strategy,
    call,
    create_flag,
    env_path,
    feature_path,
    ok,
    rollout,
    served,
    turn,
)

from relay.central.wiring import central_database

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
    assert (await call(client, "GET", FEATURES.format(project="nope")))[0] == 404
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


async def test_on_without_strategy_adds_flexible_rollout_at_100(client: Any) -> None:
    await create_flag(client, "checkout")
    await turn(client, "checkout")
    [env] = [
        e
        for e in (await ok(client, "GET", feature_path("checkout")))["environments"]
        if e["enabled"]
    ]
    assert env["name"] == "development"
    [strategy] = env["strategies"]
    assert strategy["name"] == "flexibleRollout"
    assert strategy["parameters"] == {
        "rollout": "100",
        "stickiness": "default",
        "groupId": "checkout",
    }
    await turn(client, "checkout", on=False)
    await turn(client, "checkout")  # again: the strategy is there, none added
    strategies = await ok(client, "GET", f"{env_path('checkout')}/strategies")
    assert [s["id"] for s in strategies] == [strategy["id"]]
    feature = (await served(client))["checkout"]
    assert feature["enabled"] is True
    assert feature["strategies"] == [
        {
            "name": "flexibleRollout",
            "constraints": [],
            "parameters": {"rollout": "100", "stickiness": "default", "groupId": "checkout"},
            "variants": [],
        }
    ]


async def test_on_uses_the_project_environment_default_strategy(client: Any) -> None:
    """Both ways of setting the default write one record: Unleash's default-strategy
    endpoint and the spec's add-environment ``defaultStrategy``."""
    default = {
        **rollout(37, groupId=""),
        "constraints": [{"contextName": "userId", "operator": "IN", "values": ["a"]}],
    }
    path = "/api/admin/projects/default/environments/development/default-strategy"
    saved = await ok(client, "POST", path, default)
    assert saved["parameters"] == default["parameters"]
    await create_flag(client, "one")
    await turn(client, "one")
    [strategy] = await ok(client, "GET", f"{env_path('one')}/strategies")
    assert strategy["parameters"] == {"rollout": "37", "stickiness": "default", "groupId": "one"}
    assert strategy["constraints"] == [
        {
            "contextName": "userId",
            "operator": "IN",
            "values": ["a"],
            "inverted": False,
            "caseInsensitive": False,
        }
    ]
    await ok(client, "POST", "/api/admin/environments", {"name": "staging", "type": "test"}, 201)
    add_env = {"environment": "staging", "defaultStrategy": rollout(5, groupId="fixed")}
    await ok(client, "POST", "/api/admin/projects/default/environments", add_env)
    await turn(client, "one", env="staging")
    [strategy] = await ok(client, "GET", f"{env_path('one', 'staging')}/strategies")
    assert strategy["parameters"] == {"rollout": "5", "stickiness": "default", "groupId": "fixed"}
    project = await ok(client, "GET", "/api/admin/projects/default")
    envs = {e["environment"]: e["defaultStrategy"] for e in project["environments"]}
    assert envs["development"] == saved
    assert envs["staging"]["parameters"] == add_env["defaultStrategy"]["parameters"]
    status, error = await call(client, "POST", path, {"name": "default"})
    assert status == 400 and "flexibleRollout" in error["message"]
    status, _ = await call(client, "POST", path.replace("development", "nowhere"), default)
    assert status == 404


async def test_a_saved_default_strategy_that_is_no_longer_valid_is_a_400(
    client: Any, database_url: str | None, tmp_path: Path
) -> None:
    """As an older version could have saved it (a fractional sortOrder): turning a flag on
    tells the operator to set it again, rather than failing with a 500."""
    db = central_database(standalone_settings(tmp_path / "data", database_url=database_url))
    await db.open()
    try:
        async with db.transaction() as tx:
            await tx.execute(
                "UPDATE project_environments SET default_strategy = ?"
                " WHERE project_id = 'default' AND environment = 'development'",
                ('{"name": "flexibleRollout", "sortOrder": 1.5}',),
            )
    finally:
        await db.close()
    await create_flag(client, "checkout")
    status, error = await call(client, "POST", f"{env_path('checkout')}/on")
    assert status == 400, error
    assert "default strategy of default/development is no longer valid" in error["message"]


async def test_environments_not_in_the_project_refuse_changes(client: Any) -> None:
    await ok(client, "POST", "/api/admin/environments", {"name": "staging", "type": "test"}, 201)
    await create_flag(client, "checkout")
    status, error = await call(client, "POST", f"{env_path('checkout', 'staging')}/on")
    assert status == 404
    assert error["message"] == "Could not find environment staging for feature: checkout"
    status, error = await call(
        client, "POST", f"{env_path('checkout', 'staging')}/strategies", rollout(5)
    )
    assert status == 400
    assert error["message"] == "You have not added the current environment to the project"
    status, _ = await call(client, "GET", f"{env_path('checkout', 'staging')}/strategies")
    assert status == 404


async def test_removing_an_environment_from_the_project_drops_the_flag_state_there(
    client: Any,
) -> None:
    await create_flag(client, "checkout")
    await turn(client, "checkout", env="production")
    await ok(client, "DELETE", "/api/admin/projects/default/environments/production")
    await ok(
        client, "POST", "/api/admin/projects/default/environments", {"environment": "production"}
    )
    [_, prod] = (await ok(client, "GET", feature_path("checkout")))["environments"]
    assert (prod["name"], prod["enabled"], prod["strategies"]) == ("production", False, [])


async def test_strategies_are_saved_as_unleash_saves_them(client: Any) -> None:
    await create_flag(client, "checkout")
    variants = [
        {"name": "b", "weight": 0, "weightType": "variable", "stickiness": "default"},
        {"name": "a", "weight": 0, "weightType": "variable", "stickiness": "default"},
        {"name": "c", "weight": 0, "weightType": "variable", "stickiness": "default"},
        {
            "name": "fixed",
            "weight": 100,
            "weightType": "fix",
            "stickiness": "userId",
            "payload": {"type": "json", "value": '{"x": 1}'},
        },
    ]
    first = await add_strategy(
        client,
        "checkout",
        {
            "name": "flexibleRollout",
            "parameters": {"rollout": "50", "groupId": ""},
            "variants": variants,
            "title": "Half",
        },
    )
    assert first["parameters"] == {"rollout": "50", "stickiness": "default", "groupId": "checkout"}
    assert [(v["name"], v["weight"]) for v in first["variants"]] == [
        ("a", 300),
        ("b", 300),
        ("c", 300),
        ("fixed", 100),
    ]
    assert (first["title"], first["disabled"], first["sortOrder"], first["featureName"]) == (
        "Half",
        False,
        0,
        "checkout",
    )
    second = await add_strategy(
        client, "checkout", {"name": "userWithId", "parameters": {"userIds": "1,2"}}
    )
    await create_flag(client, "last")
    top = 2**31 - 1
    assert (await add_strategy(client, "last", {"name": "default", "sortOrder": top}))[
        "sortOrder"
    ] == top
    assert (await add_strategy(client, "last", {"name": "default"}))["sortOrder"] == top
    third = await add_strategy(client, "checkout", {"name": "default", "sortOrder": -5})
    assert second["sortOrder"] == 1 and third["sortOrder"] == -5
    strategies = await ok(client, "GET", f"{env_path('checkout')}/strategies")
    assert [s["id"] for s in strategies] == [third["id"], first["id"], second["id"]]
    assert await ok(client, "GET", f"{env_path('checkout')}/strategies/{second['id']}") == second
    await turn(client, "checkout")
    assert [s["name"] for s in (await served(client))["checkout"]["strategies"]] == [
        "default",
        "flexibleRollout",
        "userWithId",
    ]
    for bad in (
        {"name": "flexibleRollout", "variants": [{**variants[3]}]},  # no variable variant
        {"name": "flexibleRollout", "variants": [variants[0], {**variants[0]}]},  # same name twice
        {"name": "flexibleRollout", "variants": [variants[0], {**variants[3], "weight": 1001}]},
    ):
        status, error = await call(client, "POST", f"{env_path('checkout')}/strategies", bad)
        assert status == 400, (bad, error)
        assert_error(error, "BadDataError")


async def test_constraints_are_checked_as_unleash_checks_them(client: Any) -> None:
    await create_flag(client, "checkout")
    good = [
        {"contextName": "userId", "operator": "IN", "values": ["1"]},
        {"contextName": "n", "operator": "NUM_GTE", "value": "3.5"},
        {
            "contextName": "currentTime",
            "operator": "DATE_AFTER",
            "value": "2024-01-01T00:00:00.000Z",
        },
        {"contextName": "version", "operator": "SEMVER_GT", "value": "1.2.3-beta.1"},
        {
            "contextName": "email",
            "operator": "STR_ENDS_WITH",
            "values": ["@x.io"],
            "caseInsensitive": True,
            "inverted": True,
        },
        {"contextName": "email", "operator": "REGEX", "value": "^a.*z$"},
    ]
    saved = await add_strategy(client, "checkout", {"name": "default", "constraints": good})
    assert [c["operator"] for c in saved["constraints"]] == [c["operator"] for c in good]
    for constraint in (
        {"contextName": "userId", "operator": "IN", "values": []},
        {"contextName": "n", "operator": "NUM_EQ", "value": "three"},
        {"contextName": "n", "operator": "NUM_EQ", "value": "NaN"},
        {"contextName": "n", "operator": "NUM_EQ"},
        {"contextName": "t", "operator": "DATE_BEFORE", "value": "yesterday"},
        {"contextName": "v", "operator": "SEMVER_EQ", "value": "v1.2.3"},
        {"contextName": "v", "operator": "REGEX", "value": "("},
        {"contextName": "v", "operator": "REGEX", "value": "a", "inverted": True},
        {"contextName": "v", "operator": "LIKE", "values": ["a"]},
    ):
        status, error = await call(
            client,
            "POST",
            f"{env_path('checkout')}/strategies",
            {"name": "default", "constraints": [constraint]},
        )
        assert status == 400, (constraint, error)
        assert error["details"][0]["path"].startswith("/body/constraints/0"), error


async def test_put_patch_and_delete_of_strategies(client: Any) -> None:
    await create_flag(client, "checkout")
    await turn(client, "checkout")
    [strategy] = await ok(client, "GET", f"{env_path('checkout')}/strategies")
    one = f"{env_path('checkout')}/strategies/{strategy['id']}"
    replaced = await ok(client, "PUT", one, rollout(25))
    assert replaced["id"] == strategy["id"] and replaced["sortOrder"] == strategy["sortOrder"]
    assert replaced["parameters"]["rollout"] == "25"
    patched = await ok(
        client,
        "PATCH",
        one,
        [
            {"op": "replace", "path": "/parameters/rollout", "value": "75"},
            {"op": "add", "path": "/title", "value": "Most"},
        ],
    )
    assert (patched["parameters"]["rollout"], patched["title"]) == ("75", "Most")
    status, error = await call(
        client, "PATCH", one, [{"op": "replace", "path": "/id", "value": "x"}]
    )
    assert status == 400, error
    status, error = await call(
        client,
        "PATCH",
        one,
        [{"op": "replace", "path": "/constraints", "value": [{"operator": "IN"}]}],
    )
    assert status == 400 and error["details"][0]["path"].startswith("/body/constraints/0"), error
    # disabling the only strategy turns the flag off there, as deleting it does
    await ok(client, "PATCH", one, [{"op": "replace", "path": "/disabled", "value": True}])
    feature = (await served(client))["checkout"]
    assert (feature["enabled"], feature["strategies"]) == (False, [])
    await turn(client, "checkout")  # only a disabled strategy: "on" adds the default one
    strategies = await ok(client, "GET", f"{env_path('checkout')}/strategies")
    assert [s["disabled"] for s in strategies] == [True, False]
    await ok(client, "DELETE", f"{env_path('checkout')}/strategies/{strategies[1]['id']}")
    assert (await served(client))["checkout"]["enabled"] is False
    await ok(client, "DELETE", one)
    assert await ok(client, "GET", f"{env_path('checkout')}/strategies") == []
    for method in ("GET", "PUT", "PATCH", "DELETE"):
        body = {"GET": None, "DELETE": None, "PUT": rollout(1), "PATCH": []}[method]
        status, error = await call(client, method, one, body)
        assert status == 404, method
        assert_error(error, "NotFoundError")


async def test_archive_stops_serving_and_revive_brings_the_flag_back_off(client: Any) -> None:
    await create_flag(client, "checkout")
    await turn(client, "checkout")
    await turn(client, "checkout", env="production")
    assert "checkout" in await served(client)
    await ok(client, "DELETE", feature_path("checkout"), status=202)
    assert "checkout" not in await served(client)
    response = await client.get("/api/client/features/checkout", headers=auth(DEV_KEY))
    assert response.status == 404
    flag = await ok(client, "GET", feature_path("checkout"))
    assert flag["archived"] is True and flag["archivedAt"]
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
