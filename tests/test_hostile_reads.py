"""Admin reads and writes under hostile input (issue 14): path parameters by the rules of
names on both backends."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import ADMIN_KEY, assert_error, auth, relay_settings
from fake_upstream import FakeUpstream

from relay.app import build_app
from relay.wire.common import MAX_NAME

ODD = ["%00", "a%00b", "x" * (MAX_NAME + 1)]
PATHS = [
    ("GET", "/api/admin/projects/{}"),
    ("DELETE", "/api/admin/projects/{}/environments/development"),
    ("DELETE", "/api/admin/projects/default/environments/{}"),
    ("POST", "/api/admin/projects/{}/environments"),
    ("GET", "/api/admin/client-metrics/features/{}/raw"),
    ("GET", "/api/admin/metrics/applications/{}"),
]


@pytest.mark.parametrize("value", ODD, ids=["nul", "inner-nul", "too-long"])
async def test_path_parameters_follow_the_rules_of_names(client: Any, value: str) -> None:
    """On today's main PostgreSQL answered 503 ("storage unavailable") and SQLite 404."""
    for method, template in PATHS:
        path = template.format(value)
        body = {"environment": "development"} if method == "POST" else None
        response = await client.request(method, path, json=body, headers=auth(ADMIN_KEY))
        assert response.status == 400, (method, path)
        error = await response.json()
        assert_error(error, "BadDataError")
        assert error["details"][0]["path"].startswith("/path/"), error


async def test_a_relay_checks_path_parameters_before_passing_them_on(
    aiohttp_client: Any, tmp_path: Any, upstream: FakeUpstream
) -> None:
    url = str(upstream.server.make_url("")).rstrip("/") if upstream.server else ""
    relay = await aiohttp_client(build_app(relay_settings(tmp_path, url)))
    for path in ("/api/client/features/%00", "/api/admin/projects/%00/environments"):
        response = await relay.request(
            "POST" if "admin" in path else "GET", path, json={}, headers=auth(ADMIN_KEY)
        )
        assert response.status == 400, path
        assert_error(await response.json(), "BadDataError")
    assert [r.path for r in upstream.received if "features" in r.path or "admin" in r.path] == []


def documented_parameters(document: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        parameter
        for item in document["paths"].values()
        for operation in item.values()
        for parameter in operation.get("parameters", [])
    ]


async def test_the_document_states_the_rules_of_path_parameters(client: Any) -> None:
    document = await (await client.get("/docs/openapi.json")).json()
    parameters = documented_parameters(document)
    assert parameters
    for parameter in parameters:
        assert parameter["schema"]["minLength"] == 1
        assert parameter["schema"]["maxLength"] == MAX_NAME
