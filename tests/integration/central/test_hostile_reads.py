"""Admin reads and writes under hostile input (issue 14): path parameters by the rules of
names on both backends, a feature's raw counts paged and streamed however many rows it has,
and admin bodies that must hold in every field."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from conftest import (
    ADMIN_KEY,
    DEV_KEY,
    MakeClient,
    assert_error,
    auth,
    bulk,
    metric,
    relay_settings,
)
from fake_upstream import FakeUpstream

from relay.app import build_app
from relay.central.usage_api import PAGE_ROWS
from relay.wire.common import MAX_METRICS, MAX_NAME

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
    for path, key in (
        ("/api/client/features/%00", DEV_KEY),
        ("/api/admin/projects/%00/environments", ADMIN_KEY),
    ):
        response = await relay.request(
            "POST" if "admin" in path else "GET", path, json={}, headers=auth(key)
        )
        assert response.status == 400, path
        assert_error(await response.json(), "BadDataError")
    assert [r.path for r in upstream.received if "\x00" in r.path or "admin" in r.path] == []


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


async def raw_page(client: Any, url: str) -> dict[str, Any]:
    response = await client.get(url, headers=auth(ADMIN_KEY))
    assert response.status == 200, await response.text()
    assert response.content_type == "application/json"
    page: dict[str, Any] = json.loads(await response.read())
    return page


async def test_raw_counts_are_paged_however_many_rows_a_feature_has(client: Any) -> None:
    """On today's main one read returned every row whole (300,000 rows: 52 MB, 1 GB of
    memory, ingest stalled for 2 s)."""
    hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    stamps = [(hour - timedelta(hours=h)).isoformat() for h in range(3)]
    apps = [f"app-{i:05d}" for i in range(PAGE_ROWS // 2 + 3)]
    for stamp in stamps[:2]:
        rows = [metric("hot", app=a, yes=1, timestamp=stamp) for a in apps]
        for start in range(0, len(rows), MAX_METRICS):
            response = await client.post(
                "/api/client/metrics/bulk",
                json=bulk(rows[start : start + MAX_METRICS]),
                headers=auth(DEV_KEY),
            )
            assert response.status == 202
    first = await raw_page(client, "/api/admin/client-metrics/features/hot/raw?hoursBack=744")
    assert len(first["data"]) == PAGE_ROWS
    assert first["next"].startswith("/api/admin/client-metrics/features/hot/raw?")
    second = await raw_page(client, first["next"])
    assert second["next"] is None
    seen = [(r["appName"], r["timestamp"]) for r in first["data"] + second["data"]]
    assert len(seen) == len(set(seen)) == 2 * len(apps)
    assert seen == sorted(seen)  # app, environment, hour


async def test_raw_pages_of_any_size_read_every_row_once(client: Any) -> None:
    hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    rows = [
        metric(
            "f",
            app=f"a{i % 4}",
            yes=i + 1,
            variants={"v": i} if i % 2 else {},
            timestamp=(hour - timedelta(hours=i // 4)).isoformat(),
        )
        for i in range(23)
    ]
    response = await client.post("/api/client/metrics/bulk", json=bulk(rows), headers=auth(DEV_KEY))
    assert response.status == 202
    whole = (await raw_page(client, "/api/admin/client-metrics/features/f/raw"))["data"]
    assert len(whole) == 23
    for limit in (1, 2, 5, 22, 23, 24):
        url: str | None = f"/api/admin/client-metrics/features/f/raw?limit={limit}"
        paged: list[dict[str, Any]] = []
        while url is not None:
            page = await raw_page(client, url)
            assert len(page["data"]) <= limit
            paged += page["data"]
            url = page["next"]
        assert paged == whole, limit


@pytest.mark.parametrize(
    "query",
    [
        "limit=0",
        f"limit={PAGE_ROWS + 1}",
        "limit=%EF%BC%91",  # a full-width 1: a digit to str.isdigit, not to this API
        "limit=%C2%B2",  # a superscript 2: a digit to str.isdigit, refused by int()
        f"limit={'9' * 5000}",
        "hoursBack=%D9%A3",
        "after=nope",
        "after=WzEsImEiLCJiIl0",
        "after=WzEsIlx1MDAwMCIsImIiLDFd",
        "after=WzEwMDAwMDAwMDAwMDAwMDAwMDAwMDBd",
        # three strings (the shape of an instance's or a relay's cursor), one with a NUL
        "after=WyJcdTAwMDAiLCJbXSIsIngiXQ",
        "after=WyJhIiwiW1wiXHUwMDAwXCJdIiwieCJd",
        "after=WyJhIiwiW10iLCJ4XHUwMDAwIl0",
    ],
)
@pytest.mark.parametrize(
    "path",
    [
        "/api/admin/client-metrics/features/f/raw",
        "/api/admin/metrics/impact",
        "/api/admin/metrics/applications",
        "/api/admin/metrics/applications/app",
        "/api/admin/metrics/edges",
    ],
)
async def test_odd_paged_queries_are_400(client: Any, path: str, query: str) -> None:
    """A cursor is checked like any input: not a 503 from the database (NUL, huge numbers),
    on every paged read."""
    if not path.endswith("/raw") and query.startswith("hoursBack"):
        query = "limit=-1"  # only the raw read has a period
    response = await client.get(f"{path}?{query}", headers=auth(ADMIN_KEY))
    assert response.status == 400, query
    assert_error(await response.json(), "BadDataError")


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity"])
async def test_sort_order_must_be_a_number(client: Any, value: str) -> None:
    """On today's main NaN and Infinity were stored as null."""
    body = (
        '{"environment": "development", "defaultStrategy": {"name": "flexibleRollout",'
        f' "sortOrder": {value}}}}}'
    )
    response = await client.post(
        "/api/admin/projects/default/environments",
        data=body,
        headers={**auth(ADMIN_KEY), "Content-Type": "application/json"},
    )
    assert response.status == 400, value
    error = await response.json()
    assert_error(error, "BadDataError")
    assert error["details"][0]["path"] == "/body/defaultStrategy/sortOrder"


@pytest.mark.parametrize(
    "body",
    [
        {"type": "client", "environment": "development", "projects": ["nope"]},
        {"type": "client", "environment": "development", "project": "nope"},
        {"type": "client", "environment": "development", "projects": ["default", "nope"]},
        {"type": "admin", "environment": "development"},
        {"type": "admin", "projects": ["default"]},
        {"type": "client", "environment": "development", "expiresAt": "2030-01-01T00:00:00Z"},
    ],
)
async def test_api_token_bodies_must_hold_in_every_field(
    make_client: MakeClient, body: dict[str, Any]
) -> None:
    """On today's main a key was made for a project that does not exist, and the environment
    and projects given for an admin key were dropped without a word."""
    client = await make_client()
    response = await client.post("/api/admin/api-tokens", json=body, headers=auth(ADMIN_KEY))
    assert response.status == 400, body
    assert_error(await response.json(), "BadDataError")
    made = await client.post(
        "/api/admin/api-tokens",
        json={"type": "client", "environment": "development", "projects": ["default"]},
        headers=auth(ADMIN_KEY),
    )
    assert made.status == 201
