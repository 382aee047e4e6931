"""Export and import of flags in Unleash 8.2's format (``/api/admin/features-batch``),
through the admin API of real standalones: a round trip between two of them serves the
same flags, a file in Unleash's exact shape is taken, refusals and a failure half-way
leave nothing behind (no flag, no event), on SQLite and PostgreSQL (``client``)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from conftest import DATA, PROD_KEY, assert_error, standalone_settings
from deltakit import delta, names
from flagkit import add_strategy, call, create_flag, env_path, feature_path, ok, served, turn

from relay.app import build_app
from relay.wire.transfer import MAX_FLAG_STRATEGIES, MAX_IMPORT_FLAGS

BATCH = "/api/admin/features-batch"
FIXTURE = DATA / "unleash_export.json"


def unleash_file() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(FIXTURE.read_text())
    return loaded


async def export(client: Any, environment: str = "development", **query: Any) -> Any:
    return await ok(client, "POST", f"{BATCH}/export", {"environment": environment, **query})


async def importing(
    client: Any, data: Any, environment: str = "development", project: str = "default"
) -> tuple[int, Any]:
    body = {"project": project, "environment": environment, "data": data}
    return await call(client, "POST", f"{BATCH}/import", body)


async def events(client: Any) -> list[str]:
    return [e["type"] for e in (await ok(client, "GET", "/api/admin/events"))["events"]]


def without_ids(features: dict[str, Any]) -> dict[str, Any]:
    """The client features answer without strategy ids (each instance gives its own)."""
    features = copy.deepcopy(features)
    for feature in features.values():
        for strategy in feature["strategies"]:
            strategy.pop("id", None)
    return features


async def build(client: Any) -> None:
    """Flags using every part of the model Unleash exports."""
    segment = {
        "name": "beta-users",
        "constraints": [{"contextName": "plan", "operator": "IN", "values": ["beta"]}],
    }
    await ok(client, "POST", "/api/admin/segments", segment, 201)
    await create_flag(client, "checkout", description="New", impressionData=True)
    await create_flag(client, "banner", type="experiment")
    await create_flag(client, "untouched")
    rollout = {
        "name": "flexibleRollout",
        "title": "half of Norway",
        "parameters": {"rollout": "50", "stickiness": "userId", "groupId": "checkout"},
        "constraints": [{"contextName": "country", "operator": "IN", "values": ["NO"]}],
        "variants": [
            {"name": "blue", "weight": 1000, "weightType": "variable", "stickiness": "userId"}
        ],
        "segments": [1],
    }
    await add_strategy(client, "checkout", rollout)
    await add_strategy(
        client,
        "checkout",
        {"name": "userWithId", "disabled": True, "parameters": {"userIds": "1,2"}},
    )
    await add_strategy(client, "checkout", {"name": "default"}, env="production")
    await turn(client, "checkout")
    variants = {"variants": [{"name": "a", "weight": 1000}], "environments": ["development"]}
    await ok(client, "PUT", f"{feature_path('banner')}/variants-batch", variants)
    await ok(
        client,
        "POST",
        f"{feature_path('banner')}/dependencies",
        {"feature": "checkout", "variants": ["blue"]},
    )
    await ok(
        client,
        "PATCH",
        feature_path("banner"),
        [{"op": "replace", "path": "/stale", "value": True}],
    )
    await ok(client, "POST", "/api/admin/tag-types", {"name": "team"}, 201)
    await ok(
        client,
        "POST",
        "/api/admin/features/checkout/tags",
        {"type": "team", "value": "payments"},
        201,
    )


async def test_a_round_trip_between_two_standalones_serves_the_same_flags(
    aiohttp_client: Any, tmp_path: Path
) -> None:
    source = await aiohttp_client(build_app(standalone_settings(tmp_path / "a")))
    target = await aiohttp_client(build_app(standalone_settings(tmp_path / "b")))
    await build(source)
    exported = await export(source, project="default")
    assert set(exported) == {
        "features",
        "featureStrategies",
        "featureEnvironments",
        "contextFields",
        "featureTags",
        "segments",
        "tagTypes",
        "dependencies",
        "links",
    }
    assert exported["segments"] == [{"id": 1, "name": "beta-users"}]
    assert [s["featureName"] for s in exported["featureStrategies"]] == ["checkout"] * 2
    # the segment is matched by name, so it must exist where the file goes
    status, answer = await importing(target, exported)
    assert status == 400, answer
    assert_error(answer, "BadDataError")
    assert "segments that need to be created first: beta-users" in answer["message"]
    segment = (await ok(source, "GET", "/api/admin/segments"))["segments"][0]
    await ok(
        target, "POST", "/api/admin/segments", {k: segment[k] for k in ("name", "constraints")}, 201
    )
    assert await importing(target, exported) == (200, None)
    assert without_ids(await served(target)) == without_ids(await served(source))
    again = await export(target, project="default")
    for strategy in [*again["featureStrategies"], *exported["featureStrategies"]]:
        strategy.pop("id")
    assert again == exported
    # production was not exported: only the development strategies went
    assert (await ok(target, "GET", env_path("checkout", "production")))["strategies"] == []


async def test_a_file_in_unleash_82s_shape_is_imported(client: Any) -> None:
    await ok(client, "POST", "/api/admin/segments", {"name": "beta-users", "constraints": []}, 201)
    validation = await ok(
        client,
        "POST",
        f"{BATCH}/validate",
        {"project": "default", "environment": "production", "data": unleash_file()},
    )
    assert validation == {"errors": [], "warnings": [], "permissions": []}
    _, _, etag = await delta(client, key=PROD_KEY)
    assert await importing(client, unleash_file(), "production") == (200, None)
    # one write: SDKs following the delta get both flags in one revision
    status, changed, _ = await delta(client, etag, key=PROD_KEY)
    assert status == 200 and len({e["eventId"] for e in changed}) == 1, changed
    assert sorted(n for n in names(changed) if n[0] == "feature-updated") == [
        ("feature-updated", "checkout-banner"),
        ("feature-updated", "new-checkout"),
    ]
    features = await served(client, key=PROD_KEY)
    checkout, banner = features["new-checkout"], features["checkout-banner"]
    assert (checkout["enabled"], checkout["impressionData"], banner["stale"]) == (True, True, True)
    assert banner["type"] == "experiment" and banner["enabled"] is False
    assert [s["name"] for s in checkout["strategies"]] == ["flexibleRollout"]
    assert checkout["strategies"][0]["segments"] == [1]
    saved = (await ok(client, "GET", env_path("new-checkout", "production")))["strategies"]
    assert saved[0]["title"] == "Half of Nordic users"
    assert [(s["name"], s["disabled"]) for s in saved] == [
        ("flexibleRollout", False),
        ("userWithId", True),
    ]
    assert [v["name"] for v in banner["variants"]] == ["variantA", "variantB"]
    assert banner["dependencies"] == [
        {"feature": "new-checkout", "enabled": True, "variants": ["blue"]}
    ]
    flag = await ok(client, "GET", feature_path("new-checkout"))
    assert flag["project"] == "default"  # the file's own project is not ours
    tags = await ok(client, "GET", "/api/admin/features/new-checkout/tags")
    assert tags["tags"] == [
        {"value": "checkout", "type": "simple"},
        {"value": "payments", "type": "team"},
    ]
    logged = await events(client)
    assert logged[0] == "features-imported"
    assert {
        "feature-created",
        "feature-strategy-add",
        "feature-environment-enabled",
        "feature-tagged",
        "tag-type-created",
        "feature-dependency-added",
        "feature-environment-variants-updated",
    } <= set(logged)


async def test_an_import_replaces_the_environments_strategies_and_the_tags(client: Any) -> None:
    await ok(client, "POST", "/api/admin/segments", {"name": "beta-users", "constraints": []}, 201)
    await create_flag(client, "new-checkout")
    await add_strategy(
        client, "new-checkout", {"name": "remoteAddress", "parameters": {"IPs": "10.0.0.1"}}
    )
    await add_strategy(client, "new-checkout", {"name": "default"}, env="production")
    await ok(
        client,
        "POST",
        "/api/admin/features/new-checkout/tags",
        {"type": "simple", "value": "old-tag"},
        201,
    )
    data = unleash_file()
    validation = await ok(
        client,
        "POST",
        f"{BATCH}/validate",
        {"project": "default", "environment": "development", "data": data},
    )
    assert validation["warnings"] == [
        {
            "message": "The following features already exist in this project and will be"
            " overwritten:",
            "affectedItems": ["new-checkout"],
        }
    ]
    assert await importing(client, data) == (200, None)
    flag = await ok(client, "GET", feature_path("new-checkout"))
    environments = {e["name"]: e for e in flag["environments"]}
    assert [s["name"] for s in environments["development"]["strategies"]] == [
        "flexibleRollout",
        "userWithId",
    ]
    assert [s["name"] for s in environments["production"]["strategies"]] == ["default"]
    assert flag["description"] == "The new checkout flow"
    tags = (await ok(client, "GET", "/api/admin/features/new-checkout/tags"))["tags"]
    assert {t["value"] for t in tags} == {"checkout", "payments"}
    logged = await events(client)
    assert {"feature-strategy-remove", "feature-untagged", "feature-metadata-updated"} <= set(
        logged
    )


async def refused_import(
    client: Any,
    data: Any,
    expected: str,
    environment: str = "development",
    project: str = "default",
) -> None:
    before = (await events(client), await served(client))
    status, answer = await importing(client, data, environment, project)
    assert status == 400, answer
    assert_error(answer, "BadDataError")
    assert expected in answer["message"], answer
    assert (await events(client), await served(client)) == before


async def test_refusals_leave_everything_as_it_was(client: Any) -> None:
    await ok(client, "POST", "/api/admin/projects", {"id": "shop", "name": "Shop"}, 201)
    await create_flag(client, "new-checkout", project="shop")
    await refused_import(client, unleash_file(), "segments that need to be created first")
    await ok(client, "POST", "/api/admin/segments", {"name": "beta-users", "constraints": []}, 201)
    await refused_import(
        client, unleash_file(), "outside of project default: new-checkout (in project shop)"
    )
    await ok(client, "DELETE", feature_path("new-checkout", "shop"), status=202)
    data = unleash_file()
    data["features"].append(data["features"][0])
    await refused_import(client, data, "duplicate in your import data: new-checkout")
    data = unleash_file()
    data["dependencies"][0]["dependencies"][0]["feature"] = "nowhere"
    await refused_import(client, data, "dependencies that need to be created first: nowhere")
    data = unleash_file()
    data["featureStrategies"][2]["featureName"] = "unlisted"
    await refused_import(client, data, "not listed in features: unlisted")
    await refused_import(
        client, unleash_file(), "not enabled in project shop: development", project="shop"
    )
    data = unleash_file()
    data["features"] = [{"name": f"flag-{i}"} for i in range(MAX_IMPORT_FLAGS + 1)]
    await refused_import(client, data, "/body/data/features")
    data = unleash_file()
    data["featureStrategies"][0]["constraints"][0]["operator"] = "NUM_EQ"
    await refused_import(client, data, "/body/data/featureStrategies/0/constraints/0")
    empty = {"features": [], "featureStrategies": []}
    assert await importing(client, empty) == (200, None)
    status, answer = await call(client, "POST", f"{BATCH}/import", {"project": "default"})
    assert status == 400, answer
    assert_error(answer, "BadDataError")


async def test_a_tag_the_admin_api_refuses_is_refused_as_it_is_read(client: Any) -> None:
    tag = {"featureName": "a", "tagType": "pay ments", "tagValue": "v1"}
    data = {"features": [{"name": "a"}], "featureStrategies": [], "featureTags": [tag]}
    await refused_import(client, data, "/body/data/featureTags/0/tagType")


async def test_a_flag_with_more_strategies_than_unleash_allows_is_refused(client: Any) -> None:
    """Each strategy added re-reads its flag's: 5,000 on one flag held the write 299 s."""
    strategies = [{"name": "default", "featureName": "a"}] * (MAX_FLAG_STRATEGIES + 1)
    data = {"features": [{"name": "a"}], "featureStrategies": strategies}
    await refused_import(client, data, "more than 30 strategies: a")
    assert await importing(client, {**data, "featureStrategies": strategies[1:]}) == (200, None)
    twice = [{"name": "a", "enabled": True}] * 2  # each one more write of the same flag
    data = {"features": [{"name": "a"}], "featureStrategies": [], "featureEnvironments": twice}
    await refused_import(client, data, "named twice in featureEnvironments: a")


async def test_a_flag_archived_here_is_left_out(client: Any) -> None:
    await ok(client, "POST", "/api/admin/segments", {"name": "beta-users", "constraints": []}, 201)
    await create_flag(client, "checkout-banner")
    await ok(client, "DELETE", feature_path("checkout-banner"), status=202)
    data = unleash_file()
    validation = await ok(
        client,
        "POST",
        f"{BATCH}/validate",
        {"project": "default", "environment": "development", "data": data},
    )
    assert validation["errors"] == []
    assert validation["warnings"][0]["affectedItems"] == ["checkout-banner"]
    assert await importing(client, data) == (200, None)
    assert set(await served(client)) == {"new-checkout"}


async def test_a_failure_half_way_rolls_back_every_change_and_event(client: Any) -> None:
    """The plan's checks pass; the dependency's own rule (no second level) refuses it last,
    after flags, variants, tags and strategies were written in the same transaction."""
    await ok(client, "POST", "/api/admin/segments", {"name": "beta-users", "constraints": []}, 201)
    await create_flag(client, "root")
    data = unleash_file()
    data["dependencies"].append({"feature": "new-checkout", "dependencies": [{"feature": "root"}]})
    before = (await events(client), await served(client))
    # validate tries the import and undoes it, so it refuses what the import refuses
    body = {"project": "default", "environment": "development", "data": data}
    validation = await ok(client, "POST", f"{BATCH}/validate", body)
    assert "Transitive dependency detected" in validation["errors"][0]["message"], validation
    assert (await events(client), await served(client)) == before
    status, answer = await importing(client, data)
    assert status == 403, answer
    assert_error(answer, "InvalidOperationError")
    assert (await events(client), await served(client)) == before
    for name in ("new-checkout", "checkout-banner"):
        assert (await call(client, "GET", feature_path(name)))[0] == 404
    types = (await ok(client, "GET", "/api/admin/tag-types"))["tagTypes"]
    assert [t["name"] for t in types] == ["simple"]


async def test_an_export_chooses_flags_by_name_tag_or_project_and_is_logged(client: Any) -> None:
    await create_flag(client, "one")
    await create_flag(client, "two")
    await ok(client, "POST", "/api/admin/projects", {"id": "shop", "name": "Shop"}, 201)
    await create_flag(client, "three", project="shop")
    await ok(client, "POST", "/api/admin/features/two/tags", {"value": "keep"}, 201)
    names = [f["name"] for f in (await export(client, features=["one", "three"]))["features"]]
    assert names == ["one", "three"]
    assert [f["name"] for f in (await export(client, tag="keep"))["features"]] == ["two"]
    assert [f["name"] for f in (await export(client, project="shop"))["features"]] == ["three"]
    assert len((await export(client, downloadFile=True))["features"]) == 3
    assert (await events(client))[0] == "features-exported"
    status, answer = await call(client, "POST", f"{BATCH}/export", {"features": ["one"]})
    assert status == 400 and "/body/environment" in answer["message"], answer


async def test_an_export_past_the_import_bounds_is_refused_in_parts(client: Any) -> None:
    """A flag with more strategies than an import takes, or more flags than one import
    takes, answer a 400 naming the bound (they were a 500: the file model refused them)."""
    await create_flag(client, "crowded")
    for _ in range(MAX_FLAG_STRATEGIES + 1):
        await add_strategy(client, "crowded", {"name": "default"})
    status, answer = await call(client, "POST", f"{BATCH}/export", {"environment": "development"})
    assert status == 400 and "more than 30 strategies: crowded" in answer["message"], answer
    assert (await export(client, environment="production"))["features"][0]["name"] == "crowded"
    for i in range(MAX_IMPORT_FLAGS):  # with "crowded": one flag more than an import takes
        await create_flag(client, f"many-{i:03}")
    status, answer = await call(client, "POST", f"{BATCH}/export", {"environment": "production"})
    assert status == 400, answer
    assert f"251 flags, at most {MAX_IMPORT_FLAGS}" in answer["message"], answer
    named = {"environment": "production", "features": ["many-000", "crowded"]}
    status, answer = await call(client, "POST", f"{BATCH}/export", named)
    assert status == 200 and len(answer["features"]) == 2, answer
