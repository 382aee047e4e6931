"""Dependencies, environment variants and tags through the admin API of a real standalone,
on SQLite and PostgreSQL (the ``client`` fixture runs both; migration 0007 on each):
Unleash 8.2's rules and refusals (403 InvalidOperationError, 400 with its error shape), and
what the client features answer, the Frontend API and the flag's admin GET show of them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import MakeClient, assert_error, auth, standalone_settings
from flagkit import (
    add_strategy,
    call,
    client_features,
    create_flag,
    env_path,
    feature_path,
    ok,
    served,
    turn,
)

from relay.central.database import central_database
from relay.central.flags.dependencies import MAX_PARENTS
from relay.wire.client_features import ClientFeatures

DEPENDENCIES = "{}/dependencies"
FRONT_KEY = "default:development.front-secret-for-tests-0123456789"


async def depend(client: Any, child: str, body: dict[str, Any], project: str = "default") -> Any:
    return await call(client, "POST", DEPENDENCIES.format(feature_path(child, project)), body)


async def refused(client: Any, child: str, body: dict[str, Any], message: str) -> None:
    status, answer = await depend(client, child, body)
    assert status == 403, answer
    assert_error(answer, "InvalidOperationError")
    assert message in answer["message"], answer


async def test_a_dependency_is_served_as_unleash_shapes_it(client: Any) -> None:
    for name in ("parent", "child"):
        await create_flag(client, name)
    assert (await depend(client, "child", {"feature": "parent"}))[0] == 200
    features = await served(client)
    assert features["child"]["dependencies"] == [
        {"feature": "parent", "enabled": True, "variants": []}
    ]
    assert "dependencies" not in features["parent"]
    # one parent: a second dependency replaces the first; variants only when enabled
    body = {"feature": "parent", "enabled": False, "variants": ["blue"]}
    assert (await depend(client, "child", body))[0] == 200
    features = await served(client)
    assert features["child"]["dependencies"] == [{"feature": "parent", "enabled": False}]
    child = await ok(client, "GET", feature_path("child"))
    assert child["dependencies"] == [{"feature": "parent", "enabled": False, "variants": []}]
    assert (await ok(client, "GET", feature_path("parent")))["children"] == ["child"]
    body = {"feature": "parent", "variants": ["blue", "red"]}
    assert (await depend(client, "child", body))[0] == 200
    assert (await served(client))["child"]["dependencies"] == [
        {"feature": "parent", "enabled": True, "variants": ["blue", "red"]}
    ]
    variants = {"variants": [{"name": "blue", "weight": 0}], "environments": ["development"]}
    await ok(client, "PUT", f"{feature_path('parent')}/variants-batch", variants)
    status, answer, _ = await client_features(client)
    assert status == 200
    ClientFeatures.model_validate(answer)  # the documented schema, exactly
    await ok(client, "DELETE", f"{DEPENDENCIES.format(feature_path('child'))}/parent")
    assert "dependencies" not in (await served(client))["child"]
    assert (await ok(client, "GET", feature_path("parent")))["children"] == []


async def test_dependency_rules_are_unleash_s(client: Any) -> None:
    for name in ("grandparent", "parent", "child", "other", "gone"):
        await create_flag(client, name)
    await refused(client, "child", {"feature": "child"}, "cannot depend on itself")
    await refused(client, "child", {"feature": "nothing"}, "No active feature nothing exists")
    await ok(client, "DELETE", feature_path("gone"), status=202)
    await refused(client, "child", {"feature": "gone"}, "No active feature gone exists")
    await ok(client, "POST", "/api/admin/projects", {"id": "shop", "name": "Shop"}, status=201)
    await create_flag(client, "elsewhere", project="shop")
    await refused(client, "child", {"feature": "elsewhere"}, "should be in the same project")
    assert (await depend(client, "child", {"feature": "parent"}))[0] == 200
    await refused(client, "parent", {"feature": "grandparent"}, "other features depend on")
    await refused(client, "other", {"feature": "child"}, "has parent dependency")
    # a flag with children cannot be archived; an archived child loses its dependency
    status, answer = await call(client, "DELETE", feature_path("parent"))
    assert status == 403, answer
    assert_error(answer, "InvalidOperationError")
    await ok(client, "DELETE", feature_path("child"), status=202)
    await ok(client, "POST", "/api/admin/archive/revive/child")
    assert (await ok(client, "GET", feature_path("child")))["dependencies"] == []
    await ok(client, "DELETE", feature_path("parent"), status=202)
    # the body is checked as the other bodies are
    status, answer = await depend(client, "child", {"feature": "other", "variants": "blue"})
    assert status == 400, answer
    assert_error(answer, "BadDataError")
    status, answer = await depend(client, "nothing", {"feature": "other"})
    assert status == 404, answer


async def test_parent_options_and_parent_variants(client: Any) -> None:
    for name in ("a", "b", "c", "child"):
        await create_flag(client, name)
    exist = "/api/admin/projects/default/dependencies"
    assert await ok(client, "GET", exist) is False
    assert (await depend(client, "c", {"feature": "a"}))[0] == 200
    assert await ok(client, "GET", exist) is True
    parents = await ok(client, "GET", f"{feature_path('child')}/parents")
    assert parents == ["a", "b"]  # not itself, not a flag that has a parent
    variant = {"weight": 500, "weightType": "variable", "stickiness": "default"}
    strategy = {"name": "default", "variants": [{"name": n, **variant} for n in ("d", "b")]}
    await add_strategy(client, "a", strategy)
    body = {"variants": [{"name": "e", "weight": 0}], "environments": ["production"]}
    await ok(client, "PUT", f"{feature_path('a')}/variants-batch", body)
    assert await ok(client, "GET", f"{feature_path('a')}/parent-variants") == ["b", "d", "e"]
    # a flag that is not there has none (Unleash 8.2: 200 [])
    assert await ok(client, "GET", f"{feature_path('nothing')}/parent-variants") == []


async def test_parent_options_are_bounded(make_client: MakeClient) -> None:
    """A project of many flags: the parents listed (the API's, the page's select) are the
    first ``MAX_PARENTS`` by name; one further on is still accepted by name."""
    client = await make_client()
    names = [f"p{i:04d}" for i in range(MAX_PARENTS + 1)]
    for name in names:
        await create_flag(client, name)
    parents = await ok(client, "GET", f"{feature_path(names[0])}/parents")
    assert parents == names[1:]
    await create_flag(client, "child")
    assert len(await ok(client, "GET", f"{feature_path('child')}/parents")) == MAX_PARENTS
    assert (await depend(client, "child", {"feature": names[-1]}))[0] == 200


async def test_environment_variants_as_unleash_8_keeps_them(client: Any) -> None:
    await create_flag(client, "paint")
    variants = f"{env_path('paint')}/variants"
    # deprecated: a flag without any cannot get them one environment at a time
    status, answer = await call(client, "PUT", variants, [{"name": "blue", "weight": 0}])
    assert status == 403, answer
    assert_error(answer, "InvalidOperationError")
    assert "Use strategy variants instead" in answer["message"]
    status, _ = await call(client, "PATCH", variants, [])
    assert status == 403
    assert await ok(client, "GET", variants) == {"version": 1, "variants": []}
    override = {"contextName": "userId", "values": ["7"]}
    body = {
        "variants": [
            {"name": "red", "weight": 0, "overrides": [override]},
            {"name": "blue", "weight": 0, "stickiness": "userId"},
            {
                "name": "green",
                "weight": 200,
                "weightType": "fix",
                "payload": {"type": "string", "value": "g"},
            },
        ],
        "environments": ["development"],
    }
    pushed = await ok(client, "PUT", f"{feature_path('paint')}/variants-batch", body)
    want = [
        {"name": "blue", "weight": 400, "weightType": "variable", "stickiness": "userId"},
        {
            "name": "green",
            "weight": 200,
            "weightType": "fix",
            "stickiness": "default",
            "payload": {"type": "string", "value": "g"},
        },
        {
            "name": "red",
            "weight": 400,
            "weightType": "variable",
            "stickiness": "default",
            "overrides": [override],
        },
    ]
    # answered in the order sent, as Unleash answers it; kept sorted by name
    by_name = {v["name"]: v for v in want}
    assert pushed == {"version": 1, "variants": [by_name[n] for n in ("red", "blue", "green")]}
    assert (await served(client))["paint"]["variants"] == want
    assert await ok(client, "GET", variants) == {"version": 1, "variants": want}
    [development] = [
        e
        for e in (await ok(client, "GET", feature_path("paint")))["environments"]
        if e["name"] == "development"
    ]
    assert development["variants"] == want
    # now that it has some, the per-environment paths take them
    patch = [{"op": "remove", "path": "/1"}, {"op": "replace", "path": "/0/name", "value": "navy"}]
    patched = await ok(client, "PATCH", variants, patch)
    assert [(v["name"], v["weight"]) for v in patched["variants"]] == [("navy", 500), ("red", 500)]
    put = await ok(client, "PUT", variants, [{"name": "only", "weight": 1}])
    assert put["variants"] == [
        {"name": "only", "weight": 1000, "weightType": "variable", "stickiness": "default"}
    ]
    assert [v["name"] for v in (await served(client))["paint"]["variants"]] == ["only"]


async def test_environment_variants_refused_with_unleash_s_reasons(client: Any) -> None:
    await create_flag(client, "paint")
    batch = f"{feature_path('paint')}/variants-batch"

    async def bad(variants: Any, environments: Any = ("development",), status: int = 400) -> str:
        body = {"variants": variants, "environments": list(environments)}
        got, answer = await call(client, "PUT", batch, body)
        assert got == status, answer
        assert_error(answer, "BadDataError")
        return str(answer["message"])

    assert "unique" in await bad([{"name": "a", "weight": 0}, {"name": "a", "weight": 0}])
    fixed = {"weight": 600, "weightType": "fix"}
    assert "100%" in await bad(
        [{"name": "a", **fixed}, {"name": "b", **fixed}, {"name": "c", "weight": 0}]
    )
    assert "variable" in await bad([{"name": "a", **fixed}])
    assert "No environments" in await bad([{"name": "a", "weight": 0}], ())
    assert "not enabled" in await bad([{"name": "a", "weight": 0}], ("nowhere",))
    many = [{"name": f"v{i}", "weight": 0} for i in range(101)]
    await bad(many)
    payload = {"type": "string", "value": "x" * 60_000}
    large = [{"name": f"v{i}", "weight": 0, "payload": payload} for i in range(5)]
    assert "bytes of JSON" in await bad(large)
    await bad([{"name": "a", "weight": 1001}])
    await bad(
        [{"name": "a", "weight": 0, "overrides": [{"contextName": "x", "values": ["1"] * 1001}]}]
    )
    assert (await served(client))["paint"]["variants"] == []  # nothing of it was kept


async def test_the_frontend_api_evaluates_dependencies_and_variants(
    make_client: MakeClient,
) -> None:
    client = await make_client(init_frontend_api_tokens=[FRONT_KEY])
    for name in ("parent", "child"):
        await create_flag(client, name)
        await turn(client, name)
    body = {"variants": [{"name": "blue", "weight": 0}], "environments": ["development"]}
    await ok(client, "PUT", f"{feature_path('child')}/variants-batch", body)

    async def toggles() -> dict[str, Any]:
        response = await client.get("/api/frontend", headers=auth(FRONT_KEY))
        assert response.status == 200
        return {t["name"]: t for t in (await response.json())["toggles"]}

    assert (await toggles())["child"]["variant"]["name"] == "blue"
    assert (await depend(client, "child", {"feature": "parent", "enabled": False}))[0] == 200
    assert "child" not in await toggles()  # its parent is on: the dependency fails
    await turn(client, "parent", on=False)
    assert (await toggles())["child"]["variant"]["name"] == "blue"


async def test_tags_and_tag_types_as_unleash_serves_them(client: Any) -> None:
    await create_flag(client, "paint")
    tags = "/api/admin/features/paint/tags"
    assert await ok(client, "GET", tags) == {"version": 1, "tags": []}
    assert await ok(client, "POST", tags, {"value": "team-a"}, status=201) == {
        "value": "team-a",
        "type": "simple",
    }
    await ok(client, "POST", tags, {"value": "team-a"}, status=201)  # again: no change
    status, answer = await call(client, "POST", tags, {"value": "x", "type": "colour"})
    assert status == 400, answer
    assert_error(answer, "BadDataError")
    status, answer = await call(client, "POST", tags, {"value": "red", "type": "colour"})
    assert status == 400, answer  # a tag type that is not there (Unleash 8.2: 400)
    assert answer["message"].endswith("Tag type 'colour' does not exist"), answer
    colour = {"name": "colour", "description": "", "icon": None, "color": "#FF0000"}
    await ok(client, "POST", "/api/admin/tag-types", colour, status=201)
    status, answer = await call(client, "POST", "/api/admin/tag-types", colour)
    assert status == 409, answer
    types = await ok(client, "GET", "/api/admin/tag-types")
    assert [t["name"] for t in types["tagTypes"]] == ["colour", "simple"]
    body = {"addedTags": [{"value": "red", "type": "colour"}], "removedTags": [{"value": "team-a"}]}
    assert await ok(client, "PUT", tags, body) == {
        "version": 1,
        "tags": [{"value": "red", "type": "colour"}],
    }
    await ok(client, "POST", tags, {"value": "team-b"}, status=201)
    await ok(client, "DELETE", f"{tags}/simple/team-b")
    await ok(client, "DELETE", f"{tags}/simple/x")  # a tag it does not have: no change
    await ok(client, "DELETE", "/api/admin/tag-types/colour")  # and its tags
    assert await ok(client, "GET", tags) == {"version": 1, "tags": []}
    assert (await call(client, "DELETE", "/api/admin/tag-types/colour"))[0] == 404
    status, _ = await call(client, "POST", "/api/admin/features/nothing/tags", {"value": "ab"})
    assert status == 404
    assert (await call(client, "GET", "/api/admin/features/nothing/tags"))[0] == 404
    many = {"addedTags": [{"value": f"t{i:02}"} for i in range(100)], "removedTags": []}
    await ok(client, "PUT", tags, many)
    status, answer = await call(client, "POST", tags, {"value": "one-more"})
    assert status == 400, answer
    assert "tags" not in (await served(client))["paint"]  # for people, not SDKs


@pytest.mark.schema
async def test_migration_0007_keeps_an_older_database_s_flags(
    make_client: MakeClient, database_url: str | None, tmp_path: Path
) -> None:
    """A database as the version before 0007 left it (its tables and column taken away
    again, its record of 0007 forgotten): upgraded in place, its flags are served as
    they were, with no variants and no parent, and take dependencies and tags."""
    client = await make_client()
    for name in ("kept", "other"):
        await create_flag(client, name)
        await turn(client, name)
    before = (await served(client))["kept"]
    db = central_database(standalone_settings(tmp_path / "data", database_url=database_url))
    await db.open()
    try:
        async with db.transaction() as tx:
            for table in ("feature_tags", "tag_types", "feature_dependencies"):
                await tx.execute(f"DROP TABLE {table}")
            await tx.execute("ALTER TABLE feature_environments DROP COLUMN variants")
            await tx.execute(
                "DELETE FROM schema_migrations WHERE version = 'central/0007_flag_model'"
            )
    finally:
        await db.close()
    upgraded = await make_client()
    assert (await served(upgraded))["kept"] == before
    assert before["variants"] == [] and "dependencies" not in before
    assert (await depend(upgraded, "kept", {"feature": "other"}))[0] == 200
    await ok(upgraded, "POST", "/api/admin/features/kept/tags", {"value": "old"}, status=201)
