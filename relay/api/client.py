"""SDK- and relay-facing endpoints under ``/api/client``: parse, authorise, one call, 202."""

from __future__ import annotations

import hashlib

from aiohttp import web
from pydantic import BaseModel

from relay.api.auth import CLIENT_KEYS, PRINCIPAL, authorization, origin_of
from relay.api.body import BODY, idempotency_key, read_json
from relay.api.routing import Handler, Route
from relay.api.state import INGEST
from relay.core.ingest_batch import IdempotencyKey, Origin
from relay.core.keys import hash_key
from relay.wire.client import BulkMetrics, ClientMetrics, ClientRegistration
from relay.wire.common import KeyType


async def bulk_metrics(request: web.Request) -> web.Response:
    body = await read_json(request, BulkMetrics)
    await request.app[INGEST].bulk(body, *_written_as(request))
    return web.Response(status=202)


async def client_metrics(request: web.Request) -> web.Response:
    body = await read_json(request, ClientMetrics)
    await request.app[INGEST].client_metrics(body, *_written_as(request))
    return web.Response(status=202)


def _written_as(request: web.Request) -> tuple[str, IdempotencyKey | None, Origin]:
    """What a body's counts are written with, read after the body (its errors first): the
    key's environment (never the body's), the request's idempotency key, its origin."""
    principal = request[PRINCIPAL]
    key = _idempotency(request)
    return principal.environment, key, origin_of(authorization(request), principal)


BROWSER = "browser"
"""The one instance a frontend key's registrations are kept as, per application and
environment (what the browser SDK sends): browsers come and go by the thousand, and a
public key's registrations must not push out the backend instances an application's bound
keeps (``INSTANCES_KEPT``)."""


async def register(request: web.Request) -> web.Response:
    body = await read_json(request, ClientRegistration)
    key = _idempotency(request)
    principal = request[PRINCIPAL]
    if principal.type is KeyType.FRONTEND:
        body = body.model_copy(update={"instanceId": BROWSER})
    await request.app[INGEST].register(body, principal.environment, key)
    return web.Response(status=202)


def _idempotency(request: web.Request) -> IdempotencyKey | None:
    """The request's ``Idempotency-Key``, scoped to the API key that sent it, with the
    fingerprint of its path and body (as read, and decoded, by ``read_json``)."""
    key = idempotency_key(request)
    if key is None:
        return None
    caller = hash_key(authorization(request))
    fingerprint = hashlib.sha256(request.path.encode() + b"\n" + request[BODY])
    return IdempotencyKey(caller, key, fingerprint.hexdigest())


def client_route(
    path: str,
    handler: Handler,
    summary: str,
    body: type[BaseModel],
    keys: frozenset[KeyType] = CLIENT_KEYS,
    tag: str = "client",
    operation: str | None = None,
) -> Route:
    """A POST of SDKs or relays with a client key (or of browsers with a frontend key),
    answered 202 once done."""
    return Route(
        "POST",
        path,
        handler,
        summary,
        tag,
        auth=keys,
        body=body,
        responses={202: None},
        errors=(400, 401, 403, 413, 415, 422, 503),
        operation=operation,
    )


ROUTES = [
    client_route(
        "/api/client/metrics/bulk",
        bulk_metrics,
        "Send metrics and registrations in bulk (relays)",
        BulkMetrics,
    ),
    client_route(
        "/api/client/metrics",
        client_metrics,
        "Send one SDK instance's metrics bucket",
        ClientMetrics,
    ),
    client_route("/api/client/register", register, "Register an SDK instance", ClientRegistration),
]
