"""Health, readiness and Prometheus metrics, at the root and under ``/internal-backstage``
(where Unleash Edge serves them), without authentication."""

from __future__ import annotations

import os

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector

from relay.api.routing import Route
from relay.api.state import COUNTS_WAITING, READY
from relay.settings import Settings
from relay.wire.common import Status


async def health(request: web.Request) -> web.Response:
    """The process answers: nothing else is checked, so a slow disk never restarts a pod."""
    return web.json_response({"status": "OK"})


async def ready(request: web.Request) -> web.Response:
    """Ready once storage is open; never depends on any upstream. A relay's counts that
    wait for a key are said in the body (as the leader's flusher found them, whichever
    worker answers), still 200: its SDKs are served all the same. Under
    ``/internal-backstage`` not ready is in Edge's shape."""
    if not request.app[READY][0]:
        if request.path.startswith("/internal-backstage/"):
            edge = {"error": "Edge is not ready to serve requests", "status": "NOTREADY"}
            return web.json_response(edge, status=503)
        return web.json_response({"status": "NOT_READY"}, status=503)
    body: dict[str, object] = {"status": "READY"}
    counts = request.app.get(COUNTS_WAITING)
    if counts is not None and counts.waiting:
        body["countsWaitingForKey"] = sorted(counts.waiting)
    return web.json_response(body)


async def metrics(request: web.Request) -> web.Response:
    """With several workers (``relay.process.server``) any of them answers the scrape, with the sum
    of all of them, read from prometheus_client's multiprocess files."""
    registry = REGISTRY
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
    response = web.Response(body=generate_latest(registry))
    response.headers["Content-Type"] = CONTENT_TYPE_LATEST
    return response


def routes(settings: Settings) -> list[Route]:
    """Health and readiness, and the Prometheus metrics unless ``disable_metrics_endpoint``
    (Edge's ``DISABLE_METRICS_ENDPOINT``)."""
    metrics_route = Route(
        "GET",
        "/internal-backstage/metrics",
        metrics,
        "Prometheus metrics (text format)",
        "backstage",
        responses={200: None},
    )
    return [*PROBES, *([] if settings.disable_metrics_endpoint else [metrics_route])]


PROBES = [
    route
    for prefix, name in (("", ""), ("/internal-backstage", "Backstage"))
    for route in (
        Route(
            "GET",
            f"{prefix}/health",
            health,
            "Liveness",
            "backstage",
            responses={200: Status},
            operation=f"health{name}",
        ),
        Route(
            "GET",
            f"{prefix}/ready",
            ready,
            "Readiness",
            "backstage",
            responses={200: Status},
            errors=(503,),
            operation=f"ready{name}",
        ),
    )
]
