"""Strategies of flags through the admin API, on SQLite and PostgreSQL: what "on" adds,
project environments' default strategies, environments outside the project, strategies and
constraints saved as Unleash saves them, PUT/PATCH/DELETE."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from conftest import assert_error, standalone_settings
from flagkit import (
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

from relay.central.database import central_database


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
    for index in ("\u00b2", "9" * 5000, "00", "1"):  # not digits to int, too long, not one
        patch = [{"op": "replace", "path": f"/constraints/{index}", "value": {}}]
        status, error = await call(client, "PATCH", one, patch)
        assert status == 400, (index[:10], error)
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


async def test_a_flag_holds_at_most_256_kib_in_an_environment_by_any_route(client: Any) -> None:
    """On today's main ``copy`` counted a string as one value, whatever its length: 93 KB of
    PATCH bodies built a 410 MB strategy."""
    await create_flag(client, "checkout")
    big = {"contextName": "u", "operator": "IN", "values": [f"{i:0150d}" for i in range(1000)]}
    saved = await add_strategy(client, "checkout", {"name": "default", "constraints": [big]})
    one = f"{env_path('checkout')}/strategies/{saved['id']}"
    copy = {"op": "copy", "from": "/constraints/0", "path": "/constraints/-"}
    # one copy fits the patch's budget but not the flag; two copies are over the budget
    for patch, path in (([copy], "/body"), ([copy, copy], "/body/1"), ([copy] * 50, "/body/1")):
        status, error = await call(client, "PATCH", one, patch)
        assert status == 400, error
        assert_error(error, "BadDataError")
        assert error["details"][0]["path"] == path, error
    body = {"name": "default", "constraints": [big]}
    status, error = await call(client, "POST", f"{env_path('checkout')}/strategies", body)
    assert status == 400 and "262144" in error["message"], error
    assert await ok(client, "GET", f"{env_path('checkout')}/strategies") == [saved]
    replaced = await ok(client, "PUT", one, body)
    assert replaced["constraints"] == saved["constraints"]  # a strategy replaces itself
