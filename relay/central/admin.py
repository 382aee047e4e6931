"""Admin endpoints of the central service (admin key): keys, usage. Projects and
environments have theirs in ``projects_api``, flags in ``relay.central.flags.admin_api``, the
event log in ``events_api``.
Every change is made as the request's ``actor``: the admin key's name, for the event log."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Annotated

from aiohttp import web
from pydantic import BaseModel, Field, StrictInt, TypeAdapter

from relay.api.auth import ADMIN_KEYS, PRINCIPAL
from relay.api.body import read_json
from relay.api.errors import NotFoundError
from relay.api.paging import CursorName, array_items, position, stream_page, whole
from relay.api.responses import model_response
from relay.api.routing import Handler, Route
from relay.central.key_store import KeyRecord
from relay.central.state import KEYS, USAGE
from relay.central.usage import Instance, Position
from relay.core.audit import Actor
from relay.core.domain import from_epoch, hour_start
from relay.wire import admin as wire

DEFAULT_HOURS_BACK = 48
MAX_HOURS_BACK = 24 * 31
PAGE_ROWS = 10_000
CHUNK_ROWS = 200
PAGE_INSTANCES = 10_000
DEFAULT_INSTANCES = 1_000
CHUNK_INSTANCES = 100  # an instance is up to ~80 KB (100 relays and 100 strategies)

_ROWS = TypeAdapter(list[wire.RawMetric])
_Int = Annotated[StrictInt, Field(ge=-(2**63), le=2**63 - 1)]  # what the columns hold
# the period's start, then the last row sent (app, environment, hour) once there is one
_CURSOR = TypeAdapter(tuple[_Int] | tuple[_Int, CursorName, CursorName, _Int])
# the last instance sent: app, environment, instance
_PLACE = TypeAdapter(tuple[CursorName, CursorName, CursorName])


def actor(request: web.Request) -> Actor:
    """Who makes the request's change: its admin key (by name, never its secret)."""
    return Actor.of_key(request[PRINCIPAL])


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


async def raw_feature_metrics(request: web.Request) -> web.StreamResponse:
    """A feature's hourly counts, ``limit`` rows (at most ``PAGE_ROWS``) a page, in the
    order of app, environment and hour. A page that stops short of the end carries ``next``,
    the URL of the next one: its cursor keeps the first page's period, so following ``next``
    reads every row once. Rows are read ``CHUNK_ROWS`` at a time and streamed: neither the
    memory used nor the time the event loop is held grows with the feature's history."""
    query = request.query
    limit = whole(query.get("limit"), "limit", PAGE_ROWS, PAGE_ROWS)
    after: Position | None = None
    if "after" in query:
        cursor = position(query["after"], _CURSOR)
        since = cursor[0]
        if len(cursor) == 4:
            after = (cursor[1], cursor[2], cursor[3])
    else:
        hours = whole(query.get("hoursBack"), "hoursBack", MAX_HOURS_BACK, DEFAULT_HOURS_BACK)
        since, after = hour_start(datetime.now(UTC) - timedelta(hours=hours)), None
    feature, usage = request.match_info["featureName"], request.app[USAGE]
    return await stream_page(
        request,
        limit,
        after,
        lambda at, n: usage.raw_metrics(feature, since, at, n),
        lambda r: (r.appName, r.environment, int(r.timestamp.timestamp())),
        array_items(lambda rows: _ROWS.dump_json(list(rows))[1:-1]),
        (b'{"version":1,"maturity":"stable","data":[', lambda: b"]"),
        lambda at: [since, *at],
        CHUNK_ROWS,
    )


async def applications(request: web.Request) -> web.StreamResponse:
    """Registered instances grouped by application, ``limit`` instances (at most
    ``PAGE_INSTANCES``) a page in the order of application, environment and instance,
    streamed ``CHUNK_INSTANCES`` at a time; an application may go on in the next page."""
    return await _instances(request, None)


async def application(request: web.Request) -> web.StreamResponse:
    """One application's instances, paged as ``applications`` (404 when it has none)."""
    return await _instances(request, request.match_info["appName"])


class _Grouped:
    """Instances in read order as ``{"appName": ..., "instances": [...]}`` objects, one per
    application, across chunks: an application's array stays open until another begins."""

    def __init__(self) -> None:
        self.app: str | None = None

    def encode(self, rows: Sequence[Instance]) -> bytes:
        out = bytearray()
        for row in rows:
            if row.app_name != self.app:
                out += b"]}," if self.app is not None else b""
                out += b'{"appName":' + json.dumps(row.app_name).encode() + b',"instances":['
                self.app = row.app_name
            else:
                out += b","
            out += _instance_json(row)
        return bytes(out)

    def close(self) -> bytes:
        return b"]}" if self.app is not None else b""


async def _instances(request: web.Request, app_name: str | None) -> web.StreamResponse:
    query = request.query
    limit = whole(query.get("limit"), "limit", PAGE_INSTANCES, DEFAULT_INSTANCES)
    after = position(query["after"], _PLACE) if "after" in query else None
    usage = request.app[USAGE]
    if app_name is not None and after is None and not await usage.instances(app_name, None, 1):
        raise NotFoundError(f"No application named {app_name}")
    encode: Callable[[Sequence[Instance]], bytes]
    ends: tuple[bytes, Callable[[], bytes]]
    if app_name is None:
        grouped = _Grouped()
        encode, ends = grouped.encode, (b'{"applications":[', lambda: grouped.close() + b"]")
    else:
        encode = array_items(lambda rows: b",".join(_instance_json(row) for row in rows))
        ends = (b'{"appName":' + json.dumps(app_name).encode() + b',"instances":[', lambda: b"]")
    return await stream_page(
        request,
        limit,
        after,
        lambda at, n: usage.instances(app_name, at, n),
        lambda row: row.place,
        encode,
        ends,
        list,
        CHUNK_INSTANCES,
    )


def _instance_json(row: Instance) -> bytes:
    return row.instance.model_dump_json().encode()


def admin_route(
    method: str,
    path: str,
    handler: Handler,
    summary: str,
    *,
    body: type[BaseModel] | None = None,
    ok: tuple[int, type[BaseModel] | None] = (200, None),
    errors: tuple[int, ...] = (),
) -> Route:
    return Route(
        method,
        path,
        handler,
        summary,
        "admin",
        auth=ADMIN_KEYS,
        body=body,
        responses=dict([ok]),
        errors=(401, 403, *errors),
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
    admin_route(
        "GET",
        "/api/admin/client-metrics/features/{featureName}/raw",
        raw_feature_metrics,
        "Hourly counts of one feature (query hoursBack, default 48; paged: limit, after)",
        ok=(200, wire.FeatureMetricsRaw),
        errors=(400,),
    ),
    admin_route(
        "GET",
        "/api/admin/metrics/applications",
        applications,
        "Registered applications and their instances (paged: limit, after)",
        ok=(200, wire.ApplicationsOut),
        errors=(400,),
    ),
    admin_route(
        "GET",
        "/api/admin/metrics/applications/{appName}",
        application,
        "One registered application and its instances (paged: limit, after)",
        ok=(200, wire.ApplicationOut),
        errors=(400, 404),
    ),
]
