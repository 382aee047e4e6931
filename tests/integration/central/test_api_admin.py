"""Admin endpoints of the standalone service."""

from __future__ import annotations

from typing import Any

from conftest import ADMIN_KEY, DEV_KEY, assert_error, auth

ENVS = "/api/admin/projects/default/environments"

STRATEGY = {
    "name": "flexibleRollout",
    "title": "Half",
    "disabled": False,
    "sortOrder": 1,
    "constraints": [
        {
            "contextName": "userId",
            "operator": "IN",
            "values": ["1", "2"],
            "inverted": False,
            "caseInsensitive": True,
        }
    ],
    "variants": [
        {
            "name": "blue",
            "weight": 1000,
            "weightType": "variable",
            "stickiness": "default",
            "payload": {"type": "json", "value": "{}"},
        }
    ],
    "parameters": {"groupId": "g", "rollout": "50", "stickiness": "default"},
    "segments": [1, 2],
}


async def admin_post(client: Any, path: str, body: Any, key: str = ADMIN_KEY) -> Any:
    return await client.post(path, json=body, headers=auth(key))


async def new_environment(client: Any, name: str) -> None:
    response = await admin_post(client, "/api/admin/environments", {"name": name, "type": "test"})
    assert response.status == 201


async def project(client: Any, project_id: str = "default") -> dict[str, Any]:
    response = await client.get(f"/api/admin/projects/{project_id}", headers=auth(ADMIN_KEY))
    assert response.status == 200
    body: dict[str, Any] = await response.json()
    return body


async def test_fresh_store_has_default_project_with_two_environments(client: Any) -> None:
    body = await project(client)
    assert body["id"] == "default"
    assert [(e["environment"], e["enabled"]) for e in body["environments"]] == [
        ("development", True),
        ("production", True),
    ]


async def test_add_environment_stores_change_requests_and_strategy(client: Any) -> None:
    await new_environment(client, "staging")
    response = await admin_post(
        client,
        ENVS,
        {"environment": "staging", "changeRequestsEnabled": True, "defaultStrategy": STRATEGY},
    )
    assert response.status == 200
    assert await response.read() == b""
    envs = {e["environment"]: e for e in (await project(client))["environments"]}
    assert envs["staging"]["changeRequestsEnabled"] is True
    assert envs["staging"]["defaultStrategy"] == STRATEGY
    assert envs["development"]["changeRequestsEnabled"] is False


async def test_add_environment_already_enabled_is_409(client: Any) -> None:
    response = await admin_post(client, ENVS, {"environment": "development"})
    assert response.status == 409
    error = await response.json()
    assert_error(error, "NameExistsError")
    assert error["message"] == "default already has the environment development enabled"


async def test_add_environment_unknown_project_is_404(client: Any) -> None:
    response = await admin_post(
        client, "/api/admin/projects/nope/environments", {"environment": "development"}
    )
    assert response.status == 404
    error = await response.json()
    assert_error(error, "NotFoundError")
    assert error["message"] == "No project found"


async def test_add_environment_bad_bodies_are_400(client: Any) -> None:
    cases: list[tuple[Any, str]] = [
        ({}, "/body/environment"),
        ({"environment": 5}, "/body/environment"),
        ({"environment": "staging", "extra": 1}, "/body/extra"),
        (
            {"environment": "development", "changeRequestsEnabled": "yes"},
            "/body/changeRequestsEnabled",
        ),
        (
            {
                "environment": "development",
                "defaultStrategy": {
                    **STRATEGY,
                    "constraints": [{**STRATEGY["constraints"][0], "operator": "LIKE"}],
                },
            },
            "/body/defaultStrategy/constraints/0/operator",
        ),
        (
            {
                "environment": "development",
                "defaultStrategy": {
                    **STRATEGY,
                    "variants": [{**STRATEGY["variants"][0], "weightType": "heavy"}],
                },
            },
            "/body/defaultStrategy/variants/0/weightType",
        ),
        (
            {
                "environment": "development",
                "defaultStrategy": {
                    **STRATEGY,
                    "variants": [{**STRATEGY["variants"][0], "weight": 1001}],
                },
            },
            "/body/defaultStrategy/variants/0/weight",
        ),
        (
            {
                "environment": "development",
                "defaultStrategy": {
                    **STRATEGY,
                    "variants": [
                        {**STRATEGY["variants"][0], "payload": {"type": "xml", "value": "<a/>"}}
                    ],
                },
            },
            "/body/defaultStrategy/variants/0/payload/type",
        ),
    ]
    for body, path in cases:
        response = await admin_post(client, ENVS, body)
        assert response.status == 400, body
        error = await response.json()
        assert_error(error, "BadDataError")
        assert path in [d["path"] for d in error["details"]], (body, error)


async def test_add_environment_that_does_not_exist_is_400(client: Any) -> None:
    response = await admin_post(client, ENVS, {"environment": "nope"})
    assert response.status == 400
    error = await response.json()
    assert_error(error, "BadDataError")
    assert error["message"] == "Environment nope does not exist"


async def test_admin_endpoints_need_an_admin_key(client: Any) -> None:
    body = {"environment": "development"}
    no_key = await client.post(ENVS, json=body)
    assert no_key.status == 401
    assert_error(await no_key.json(), "AuthenticationRequired")
    unknown = await admin_post(client, ENVS, body, key="*:*.not-a-real-key")
    assert unknown.status == 401
    assert_error(await unknown.json(), "AuthenticationRequired")
    client_key = await admin_post(client, ENVS, body, key=DEV_KEY)
    assert client_key.status == 403
    assert_error(await client_key.json(), "NoAccessError")
    for path in ("/api/admin/projects/default", "/api/admin/metrics/applications"):
        response = await client.get(path, headers=auth(DEV_KEY))
        assert response.status == 403, path


async def test_remove_then_add_environment(client: Any) -> None:
    path = f"{ENVS}/production"
    response = await client.delete(path, headers=auth(ADMIN_KEY))
    assert response.status == 200
    assert [e["environment"] for e in (await project(client))["environments"]] == ["development"]
    again = await client.delete(path, headers=auth(ADMIN_KEY))
    assert again.status == 200  # removed already: Unleash 8.2 answers 200 too
    assert (await admin_post(client, ENVS, {"environment": "production"})).status == 200


async def test_create_project_and_enable_environment(client: Any) -> None:
    response = await admin_post(client, "/api/admin/projects", {"id": "shop", "name": "Shop"})
    assert response.status == 201
    assert (await response.json())["environments"] == []
    duplicate = await admin_post(client, "/api/admin/projects", {"id": "shop", "name": "Shop"})
    assert duplicate.status == 409
    assert_error(await duplicate.json(), "NameExistsError")
    bad = await admin_post(client, "/api/admin/projects", {"id": "no spaces", "name": "x"})
    assert bad.status == 400
    assert (
        await admin_post(
            client, "/api/admin/projects/shop/environments", {"environment": "production"}
        )
    ).status == 200
    assert [e["environment"] for e in (await project(client, "shop"))["environments"]] == [
        "production"
    ]
    missing = await client.get("/api/admin/projects/nope", headers=auth(ADMIN_KEY))
    assert missing.status == 404


async def test_create_environment_conflict(client: Any) -> None:
    await new_environment(client, "qa")
    response = await admin_post(client, "/api/admin/environments", {"name": "qa", "type": "x"})
    assert response.status == 409
    assert_error(await response.json(), "NameExistsError")


async def test_api_tokens_created_by_admin_work_once_shown(client: Any) -> None:
    response = await admin_post(
        client, "/api/admin/api-tokens", {"type": "client", "environment": "production"}
    )
    assert response.status == 201
    token = await response.json()
    assert token["type"] == "client" and token["environment"] == "production"
    assert token["secret"].startswith("*:production.")
    bulk = {"applications": [], "metrics": []}
    ok = await client.post("/api/client/metrics/bulk", json=bulk, headers=auth(token["secret"]))
    assert ok.status == 202
    admin = await admin_post(client, "/api/admin/api-tokens", {"type": "admin"})
    assert admin.status == 201
    admin_secret = (await admin.json())["secret"]
    assert admin_secret.startswith("*:*.")
    assert (
        await client.get("/api/admin/projects/default", headers=auth(admin_secret))
    ).status == 200


async def test_api_token_validation(client: Any) -> None:
    for body in (
        {"type": "client"},
        {"type": "client", "environment": "nope"},
        {"type": "frontend"},  # frontend keys are made (issue 21), with an environment
        {"type": "personal", "environment": "development"},
    ):
        response = await admin_post(client, "/api/admin/api-tokens", body)
        assert response.status == 400, body
        assert_error(await response.json(), "BadDataError")


async def test_edge_validate_returns_only_valid_keys(client: Any) -> None:
    response = await client.post(
        "/edge/validate", json={"tokens": [DEV_KEY, "default:development.wrong", ADMIN_KEY]}
    )
    assert response.status == 200
    assert await response.json() == {
        "tokens": [
            {
                "token": DEV_KEY,
                "type": "client",
                "projects": ["default"],
                "environment": "development",
            },
            {"token": ADMIN_KEY, "type": "admin", "projects": ["*"], "environment": "*"},
        ]
    }
    bad = await client.post("/edge/validate", json={"nope": []})
    assert bad.status == 400


async def test_raw_metrics_hours_back_is_validated(client: Any) -> None:
    for value in ("0", "abc", "100000"):
        response = await client.get(
            f"/api/admin/client-metrics/features/f/raw?hoursBack={value}", headers=auth(ADMIN_KEY)
        )
        assert response.status == 400, value
        assert_error(await response.json(), "BadDataError")


async def test_unknown_route_and_method_get_json_errors(client: Any) -> None:
    response = await client.get("/api/nothing-here")
    assert response.status == 404
    assert_error(await response.json(), "NotFoundError")
    response = await client.get("/api/client/metrics/bulk")
    assert response.status == 405
    assert_error(await response.json(), "MethodNotAllowedError")
