"""Health, readiness, Prometheus metrics and the OpenAPI document."""

from __future__ import annotations

import re
from typing import Any

from conftest import DEV_KEY, auth, bulk, metric
from openapi_spec_validator import validate

from relay.central.web.routes import PAGES


async def test_health_and_ready_at_root_and_backstage(client: Any) -> None:
    for prefix in ("", "/internal-backstage"):
        health = await client.get(f"{prefix}/health")
        assert (health.status, await health.json()) == (200, {"status": "OK"})
        ready = await client.get(f"{prefix}/ready")
        assert (ready.status, await ready.json()) == (200, {"status": "READY"})


async def test_prometheus_counts_requests_entries_and_drops(client: Any) -> None:
    body = bulk([metric(yes=1), metric(env="production", yes=1), metric(feature="z")])
    await client.post("/api/client/metrics/bulk", json=body, headers=auth(DEV_KEY))
    await client.post("/api/client/metrics/bulk", json={"x": 1}, headers=auth(DEV_KEY))
    response = await client.get("/internal-backstage/metrics")
    assert response.status == 200
    assert response.headers["Content-Type"].startswith("text/plain")
    text = await response.text()
    for needle in (
        'relay_http_requests_total{method="POST",route="/api/client/metrics/bulk",status="202"}',
        'relay_http_requests_total{method="POST",route="/api/client/metrics/bulk",status="400"}',
        'relay_http_request_duration_seconds_bucket{le="0.005",method="POST",'
        'route="/api/client/metrics/bulk"}',
        'relay_metric_entries_total{outcome="accepted"}',
        'relay_metric_entries_total{outcome="dropped_environment"}',
        'relay_metric_entries_total{outcome="dropped_empty"}',
        "relay_registrations_total",
        "relay_idempotent_replays_total",
    ):
        assert needle in text, needle


async def test_openapi_document_is_valid_and_covers_every_route(client: Any) -> None:
    response = await client.get("/docs/openapi.json")
    assert response.status == 200
    spec: dict[str, Any] = await response.json()
    validate(spec)
    served = {
        (route.method.lower(), route.resource.canonical)
        for route in client.app.router.routes()
        # HEAD comes with GET, OPTIONS (browsers' CORS preflights) with a frontend route
        if route.resource is not None and route.method not in ("HEAD", "OPTIONS")
    }
    documented = {(m, path) for path, ops in spec["paths"].items() for m in ops}
    pages = {(m.lower(), re.sub(r"{(\w+):[^}]*}", r"{\1}", p)) for m, p, _ in PAGES}
    assert served - pages == documented  # the web page's routes are not the API
    assert all(
        op["security"] in ([], [{"apiKey": []}])
        for ops in spec["paths"].values()
        for op in ops.values()
    )
    assert spec["servers"] == [
        {"url": "/", "description": "This service (relay or standalone mode)"}
    ]
    schemas = spec["components"]["schemas"]
    for name in (
        "bulkMetricsSchema",
        "projectEnvironmentSchema",
        "errorSchema",
        "clientMetricsSchema",
        "clientApplicationSchema",
        "createApiTokenSchema",
    ):
        assert name in schemas, name
    bulk_op = spec["paths"]["/api/client/metrics/bulk"]["post"]
    assert bulk_op["requestBody"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/bulkMetricsSchema"
    }
    assert {"202", "400", "401", "403", "413", "415"} <= set(bulk_op["responses"])
    add_env = spec["paths"]["/api/admin/projects/{projectId}/environments"]["post"]
    assert {"200", "400", "401", "403", "404", "409"} <= set(add_env["responses"])
    assert sorted(schemas["bulkMetricsSchema"]["required"]) == ["applications", "metrics"]
