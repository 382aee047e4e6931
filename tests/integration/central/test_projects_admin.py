"""Projects, environments and the archive through the admin API (issue 23), on SQLite and
PostgreSQL: renamed, deleted by Unleash 8's rules, archived flags deleted for good and
listed."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Coroutine
from typing import Any

import asyncpg
import pytest
from conftest import ADMIN_KEY, DEV_KEY, MakeClient, assert_error, auth
from flagkit import add_strategy, call, client_features, create_flag, feature_path, ok, turn
from service import eventually

PROJECTS = "/api/admin/projects"
ENVIRONMENTS = "/api/admin/environments"
ARCHIVE = "/api/admin/archive"


async def project(client: Any, id: str, name: str = "Shop") -> Any:
    return await ok(client, "POST", PROJECTS, {"id": id, "name": name}, 201)


async def key(client: Any, projects: list[str], env: str = "development") -> Any:
    body = {"type": "client", "environment": env, "projects": projects}
    return await ok(client, "POST", "/api/admin/api-tokens", body, 201)


async def refused(client: Any, method: str, path: str, status: int, name: str) -> str:
    got, error = await call(client, method, path)
    assert got == status, (path, got, error)
    assert_error(error, name)
    message: str = error["message"]
    return message


async def test_projects_are_listed_with_their_flags_counted(client: Any) -> None:
    await project(client, "shop")
    await create_flag(client, "cart", project="shop")
    await create_flag(client, "gone", project="shop")
    await ok(client, "DELETE", feature_path("gone", "shop"), status=202)
    listed = await ok(client, "GET", PROJECTS)
    assert listed["version"] == 1
    assert [(p["id"], p["name"], p["featureCount"]) for p in listed["projects"]] == [
        ("default", "Default", 0),
        ("shop", "Shop", 1),
    ]


async def test_a_project_is_renamed_its_id_kept(client: Any) -> None:
    await project(client, "shop")
    body = {"name": "Web shop", "description": "Everything sold online"}
    renamed = await ok(client, "PUT", f"{PROJECTS}/shop", body)
    assert (renamed["id"], renamed["name"], renamed["description"]) == (
        "shop",
        "Web shop",
        "Everything sold online",
    )
    assert await ok(client, "GET", f"{PROJECTS}/shop") == renamed
    assert (await call(client, "PUT", f"{PROJECTS}/nope", {"name": "x"}))[0] == 404
    status, error = await call(client, "PUT", f"{PROJECTS}/shop", {"name": ""})
    assert status == 400 and error["details"][0]["path"] == "/body/name"


async def test_the_default_project_and_one_with_active_flags_are_not_deleted(
    client: Any,
) -> None:
    message = await refused(client, "DELETE", f"{PROJECTS}/default", 403, "InvalidOperationError")
    assert message == "You can not delete the default project!"
    await project(client, "shop")
    await create_flag(client, "cart", project="shop")
    message = await refused(client, "DELETE", f"{PROJECTS}/shop", 403, "InvalidOperationError")
    assert message == "You can not delete a project with active feature flags"
    await refused(client, "DELETE", f"{PROJECTS}/nope", 404, "NotFoundError")


async def test_deleting_a_project_takes_its_archived_flags_segments_and_own_keys(
    client: Any,
) -> None:
    await project(client, "shop")
    await project(client, "blog", "Blog")
    await ok(client, "POST", f"{PROJECTS}/shop/environments", {"environment": "development"})
    await create_flag(client, "cart", project="shop")
    await turn(client, "cart", project="shop")
    await ok(client, "DELETE", feature_path("cart", "shop"), status=202)
    segment = {"name": "buyers", "project": "shop", "constraints": []}
    await ok(client, "POST", "/api/admin/segments", segment, 201)
    own, shared = await key(client, ["shop"]), await key(client, ["shop", "blog"])

    await ok(client, "DELETE", f"{PROJECTS}/shop")
    await refused(client, "GET", f"{PROJECTS}/shop", 404, "NotFoundError")
    assert (await ok(client, "GET", "/api/admin/segments"))["segments"] == []
    # the flag's name is free again, in any project
    await create_flag(client, "cart")
    # the project's own key no longer works; the shared one keeps its other project
    assert (await client.get("/api/client/features", headers=auth(own["secret"]))).status == 401
    listed = (await ok(client, "GET", "/api/admin/api-tokens"))["tokens"]
    assert own["id"] not in [k["id"] for k in listed]
    assert [k["projects"] for k in listed if k["id"] == shared["id"]] == [["blog"]]
    status, answer, _ = await client_features(client, key=shared["secret"])
    assert (status, answer["features"]) == (200, [])
    events = (await ok(client, "GET", "/api/admin/events?project=shop"))["events"]
    assert [e["type"] for e in events[:3]] == [
        "project-deleted",
        "api-token-deleted",
        "feature-deleted",
    ]


async def test_environments_are_listed_changed_and_deleted_by_the_rules(client: Any) -> None:
    created = await ok(client, "POST", ENVIRONMENTS, {"name": "qa", "type": "test"}, 201)
    assert created == {"name": "qa", "type": "test", "enabled": True, "sortOrder": 300}
    changed = await ok(client, "PUT", f"{ENVIRONMENTS}/update/qa", {"sortOrder": 50})
    assert changed == {**created, "sortOrder": 50}
    listed = await ok(client, "GET", ENVIRONMENTS)
    assert [e["name"] for e in listed["environments"]] == ["qa", "development", "production"]
    assert (await call(client, "PUT", f"{ENVIRONMENTS}/update/nope", {"type": "x"}))[0] == 404
    status, error = await call(client, "PUT", f"{ENVIRONMENTS}/update/qa", {"name": "qb"})
    assert status == 400 and error["details"][0]["path"] == "/body/name"

    await ok(client, "POST", f"{PROJECTS}/default/environments", {"environment": "qa"})
    await create_flag(client, "checkout")
    await turn(client, "checkout", env="qa")
    bound = await key(client, ["default"], env="qa")
    message = await refused(client, "DELETE", f"{ENVIRONMENTS}/qa", 409, "NameExistsError")
    assert "1 API key" in message
    await ok(client, "DELETE", f"/api/admin/api-tokens/{bound['id']}")
    await ok(client, "DELETE", f"{ENVIRONMENTS}/qa")
    flag = await ok(client, "GET", feature_path("checkout"))
    assert [e["name"] for e in flag["environments"]] == ["development", "production"]
    await refused(client, "DELETE", f"{ENVIRONMENTS}/qa", 404, "NotFoundError")


async def test_an_environment_after_the_highest_sort_order_takes_that_order(client: Any) -> None:
    """The highest order the API takes (2**31 - 1) and then one without an order: it was
    that plus 100, past PostgreSQL's integer (503, "storage unavailable"; SQLite stored it,
    past what the API takes back)."""
    top = {"name": "top", "type": "test", "sortOrder": 2**31 - 1}
    await ok(client, "POST", ENVIRONMENTS, top, 201)
    after = await ok(client, "POST", ENVIRONMENTS, {"name": "after", "type": "test"}, 201)
    assert after["sortOrder"] == 2**31 - 1
    listed = await ok(client, "GET", ENVIRONMENTS)
    assert [e["name"] for e in listed["environments"]][-2:] == ["after", "top"]


async def test_the_last_environment_is_not_deleted(client: Any) -> None:
    for token in (await ok(client, "GET", "/api/admin/api-tokens"))["tokens"]:
        if token["type"] != "admin":  # keys bound to an environment hold it
            await ok(client, "DELETE", f"/api/admin/api-tokens/{token['id']}")
    await ok(client, "DELETE", f"{ENVIRONMENTS}/production")
    message = await refused(
        client, "DELETE", f"{ENVIRONMENTS}/development", 403, "InvalidOperationError"
    )
    assert message == "You can not delete the last environment"


async def test_archived_flags_are_listed_and_deleted_for_good(client: Any) -> None:
    await project(client, "shop")
    for name, where in (("old", "default"), ("older", "shop"), ("live", "default")):
        await create_flag(client, name, project=where)
    await ok(client, "DELETE", feature_path("older", "shop"), status=202)
    await ok(client, "DELETE", feature_path("old"), status=202)

    listed = await ok(client, "GET", f"{ARCHIVE}/features")
    assert listed["version"] == 2
    assert [(f["name"], f["archived"]) for f in listed["features"]] == [
        ("old", True),
        ("older", True),
    ]
    shop = await ok(client, "GET", f"{ARCHIVE}/features/shop")
    assert [f["name"] for f in shop["features"]] == ["older"]
    paged = await ok(client, "GET", f"{ARCHIVE}/features?limit=1&offset=1")
    assert [f["name"] for f in paged["features"]] == ["older"]
    await refused(client, "GET", f"{ARCHIVE}/features/nope", 404, "NotFoundError")
    assert (await call(client, "GET", f"{ARCHIVE}/features?limit=1001"))[0] == 400

    # as Unleash: a flag that is not archived, or does not exist, is left alone with a 200
    await ok(client, "DELETE", f"{ARCHIVE}/live")
    await ok(client, "DELETE", f"{ARCHIVE}/never-was")
    assert (await ok(client, "GET", feature_path("live")))["archived"] is False
    await ok(client, "DELETE", f"{ARCHIVE}/old")
    assert (await call(client, "GET", feature_path("old")))[0] == 404
    names = [f["name"] for f in (await ok(client, "GET", f"{ARCHIVE}/features"))["features"]]
    assert names == ["older"]
    await create_flag(client, "old")  # its name is free again
    deleted = (await ok(client, "GET", "/api/admin/events/old"))["events"]
    assert [e["type"] for e in deleted] == [
        "feature-created",
        "feature-deleted",
        "feature-archived",
        "feature-created",
    ]
    assert deleted[1]["preData"]["name"] == "old" and deleted[1]["data"] is None
    assert (await client.get(f"{ARCHIVE}/features", headers=auth(DEV_KEY))).status == 403


async def test_the_archive_lists_flags_without_their_strategies(client: Any) -> None:
    """As Unleash's archive answers: names and dates, not what the flags held. A page of
    1,000 archived flags with 256 KB of strategies each would otherwise be read whole (and
    answered: 256 MB and more) to show their names."""
    values = [f"v{i}-{'a' * 4000}" for i in range(50)]  # 200 KB a flag
    constraint = {"contextName": "userId", "operator": "IN", "values": values}
    for i in range(6):
        await create_flag(client, f"old-{i}")
        strategy = {"name": "default", "constraints": [constraint]}
        await add_strategy(client, f"old-{i}", strategy)
        await ok(client, "DELETE", feature_path(f"old-{i}"), status=202)
    response = await client.get(f"{ARCHIVE}/features?limit=1000", headers=auth(ADMIN_KEY))
    body = await response.read()
    assert response.status == 200, body[:300]
    assert len(body) < 10_000
    listed = json.loads(body)["features"]
    assert [f["name"] for f in listed] == [f"old-{i}" for i in range(5, -1, -1)]
    assert all(f["archived"] and f["environments"] == [] for f in listed)


async def _lock_waiter(conn: Any) -> bool:
    """Whether another connection of this database waits for a lock (the request's)."""
    found = await conn.fetchval(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
        " AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()"
    )
    return bool(found)


async def behind_a_writer(
    conn: Any, statements: list[str], request: Coroutine[Any, Any, Any], waiting: str
) -> Any:
    """``request``, sent while another writer (``conn``, in a transaction) has run
    ``statements``: it waits for that writer's locks; its answer once the writer commits."""
    writer = conn.transaction()
    await writer.start()
    for statement in statements:
        await conn.execute(statement)
    answer = asyncio.create_task(request)
    await eventually(lambda: _lock_waiter(conn), waiting)
    await writer.commit()
    return await answer


@pytest.mark.parametrize("backend", ["postgres"], indirect=True)  # another writer's locks
async def test_enabling_an_environment_waits_for_a_deletion_of_its_project(
    make_client: MakeClient, database_url: str
) -> None:
    """A deletion of the project in flight (here held open, as an instance's deletion would
    be) when an environment is enabled in it: the enabling waits for it, as every project
    and flag write does, and answers that the project is gone (404), not a storage error
    from the foreign key it would otherwise hit (503)."""
    client = await make_client()
    await project(client, "shop")
    conn = await asyncpg.connect(database_url)
    try:
        body = {"environment": "development"}
        status, error = await behind_a_writer(
            conn,
            [
                "UPDATE flag_revision SET revision = revision + 1 WHERE id = 1",
                "DELETE FROM projects WHERE id = 'shop'",
            ],
            call(client, "POST", f"{PROJECTS}/shop/environments", body),
            "the enabling to wait for the deletion",
        )
    finally:
        await conn.close()
    assert status == 404, error
    assert_error(error, "NotFoundError")


@pytest.mark.parametrize("backend", ["postgres"], indirect=True)  # another writer's locks
async def test_a_key_made_during_its_projects_deletion_waits_and_is_refused(
    make_client: MakeClient, database_url: str
) -> None:
    """The deletion holds the project's row (as ``ProjectStore.delete`` does, before it
    looks for keys): a key asked for in it meanwhile waits, then finds it gone (400), and
    no key outlives its project."""
    client = await make_client()
    await project(client, "shop")
    conn = await asyncpg.connect(database_url)
    try:
        body = {"type": "client", "environment": "development", "projects": ["shop"]}
        status, error = await behind_a_writer(
            conn,
            [
                "UPDATE projects SET name = name WHERE id = 'shop'",
                "DELETE FROM projects WHERE id = 'shop'",
            ],
            call(client, "POST", "/api/admin/api-tokens", body),
            "the key to wait for the deletion",
        )
        left = await conn.fetchval("SELECT count(*) FROM api_tokens WHERE projects LIKE '%shop%'")
    finally:
        await conn.close()
    assert status == 400, error
    assert "shop" in error["message"]
    assert left == 0


@pytest.mark.parametrize("backend", ["postgres"], indirect=True)  # another writer's locks
async def test_a_project_deleted_while_a_key_is_made_for_it_revokes_that_key(
    make_client: MakeClient, database_url: str
) -> None:
    """A key being stored holds its project's row (``KeyStore.add``, here held open on
    another connection): the deletion waits for it, then sees the key and revokes it."""
    client = await make_client()
    await project(client, "shop")
    conn = await asyncpg.connect(database_url)
    try:
        status, error = await behind_a_writer(
            conn,
            [
                "UPDATE environments SET type = type WHERE name = 'development'",
                "UPDATE projects SET name = name WHERE id = 'shop'",
                "INSERT INTO api_tokens (id, secret_hash, display, type, environment, projects,"
                " created_at) VALUES ('k-race', 'hash-race', 'shop:development.****', 'client',"
                " 'development', '[\"shop\"]', 0)",
            ],
            call(client, "DELETE", f"{PROJECTS}/shop"),
            "the deletion to wait for the key",
        )
        left = await conn.fetchval("SELECT count(*) FROM api_tokens WHERE id = 'k-race'")
    finally:
        await conn.close()
    assert status == 200, error
    assert left == 0


@pytest.mark.parametrize("backend", ["postgres"], indirect=True)  # another writer's locks
async def test_an_environment_deleted_while_a_key_is_made_for_it_is_refused(
    make_client: MakeClient, database_url: str
) -> None:
    """A key being stored holds its environment's row: the deletion waits for it, then
    counts the key and refuses (409), rather than leave a key of no environment."""
    client = await make_client()
    await ok(client, "POST", "/api/admin/environments", {"name": "qa", "type": "test"}, 201)
    conn = await asyncpg.connect(database_url)
    try:
        status, error = await behind_a_writer(
            conn,
            [
                "UPDATE environments SET type = type WHERE name = 'qa'",
                "INSERT INTO api_tokens (id, secret_hash, display, type, environment, projects,"
                " created_at) VALUES ('k-qa', 'hash-qa', 'default:qa.****', 'client', 'qa',"
                " '[\"default\"]', 0)",
            ],
            call(client, "DELETE", "/api/admin/environments/qa"),
            "the deletion to wait for the key",
        )
    finally:
        await conn.close()
    assert status == 409, error
