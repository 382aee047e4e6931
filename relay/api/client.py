"""SDK- and relay-facing endpoints under ``/api/client``: parse, authorise, one call, 202."""

from __future__ import annotations

from aiohttp import web

from relay import models
from relay.api.routing import PRINCIPAL, Route, idempotency_key, read_json
from relay.models import TokenType
from relay.state import INGEST

ACCEPTED_ERRORS = (400, 401, 403, 413, 415, 503)


async def bulk_metrics(request: web.Request) -> web.Response:
    body = await read_json(request, models.BulkMetrics)
    key = idempotency_key(request)
    await request.app[INGEST].bulk(body, request[PRINCIPAL].environment, key)
    return web.Response(status=202)


async def client_metrics(request: web.Request) -> web.Response:
    body = await read_json(request, models.ClientMetrics)
    key = idempotency_key(request)
    await request.app[INGEST].client_metrics(body, request[PRINCIPAL].environment, key)
    return web.Response(status=202)


async def register(request: web.Request) -> web.Response:
    body = await read_json(request, models.ClientRegistration)
    key = idempotency_key(request)
    await request.app[INGEST].register(body, request[PRINCIPAL].environment, key)
    return web.Response(status=202)


ROUTES = [
    Route(
        "POST",
        "/api/client/metrics/bulk",
        bulk_metrics,
        "Send metrics and registrations in bulk (relays)",
        "client",
        auth=TokenType.CLIENT,
        body=models.BulkMetrics,
        responses={202: None},
        errors=ACCEPTED_ERRORS,
    ),
    Route(
        "POST",
        "/api/client/metrics",
        client_metrics,
        "Send one SDK instance's metrics bucket",
        "client",
        auth=TokenType.CLIENT,
        body=models.ClientMetrics,
        responses={202: None},
        errors=ACCEPTED_ERRORS,
    ),
    Route(
        "POST",
        "/api/client/register",
        register,
        "Register an SDK instance",
        "client",
        auth=TokenType.CLIENT,
        body=models.ClientRegistration,
        responses={202: None},
        errors=ACCEPTED_ERRORS,
    ),
]
