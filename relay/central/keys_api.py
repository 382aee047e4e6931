"""Admin endpoints of API keys: issued (the secret shown only then), listed, revoked."""

from __future__ import annotations

from aiohttp import web

from relay.api.body import read_json
from relay.api.responses import model_response
from relay.central.admin import actor, admin_route
from relay.central.key_store import KeyRecord
from relay.central.state import KEYS
from relay.core.ingest_batch import from_epoch
from relay.wire import admin as wire


async def create_api_key(request: web.Request) -> web.Response:
    body = await read_json(request, wire.CreateApiKey)
    secret, record = await request.app[KEYS].issue(actor(request), body)
    return model_response(key_out(record, secret), status=201)


async def list_api_keys(request: web.Request) -> web.Response:
    keys = await request.app[KEYS].listed()
    return model_response(wire.ApiKeysOut(tokens=[key_out(k) for k in keys]))


async def revoke_api_key(request: web.Request) -> web.Response:
    """By id or by name (Unleash takes the secret itself in the path: a key in a URL ends
    up in proxies' logs, so it is not accepted here)."""
    await request.app[KEYS].revoke(actor(request), request.match_info["nameOrId"])
    return web.Response(status=200)


def key_out(record: KeyRecord, secret: str | None = None) -> wire.ApiKeyOut:
    p = record.principal
    return wire.ApiKeyOut(
        id=record.id,
        secret=secret or p.display,
        tokenName=p.token_name,
        type=p.type,
        environment=p.environment,
        projects=list(p.projects),
        project=p.projects[0] if len(p.projects) == 1 else "[]",
        createdAt=from_epoch(record.created_at),
        seenAt=None if record.last_used_at is None else from_epoch(record.last_used_at),
    )


ROUTES = [
    admin_route(
        "POST",
        "/api/admin/api-tokens",
        create_api_key,
        "Create an API key; its secret is returned only here",
        body=wire.CreateApiKey,
        ok=(201, wire.ApiKeyOut),
        errors=(400, 413, 415),
    ),
    admin_route(
        "GET",
        "/api/admin/api-tokens",
        list_api_keys,
        "Every API key, never its secret",
        ok=(200, wire.ApiKeysOut),
    ),
    admin_route(
        "DELETE",
        "/api/admin/api-tokens/{nameOrId}",
        revoke_api_key,
        "Revoke an API key by its id, or by its name when one key has it",
        errors=(404, 409),
    ),
]
