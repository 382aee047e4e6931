"""Admin endpoints of the central service (admin key): projects, environments, keys, usage.
Flags have theirs in ``relay.central.flags.admin_api``."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Annotated

from aiohttp import web
from pydantic import BaseModel, Field, StrictInt, TypeAdapter

from relay.api.body import read_json
from relay.api.errors import NotFoundError
from relay.api.paging import next_url, position, whole
from relay.api.responses import model_response, streamed
from relay.api.routing import Handler, Route
from relay.central.key_store import KeyRecord
from relay.central.state import KEYS, PROJECTS, USAGE
from relay.central.usage import Position
from relay.core.domain import from_epoch, hour_start
from relay.wire import admin as wire
from relay.wire.common import MAX_NAME, KeyType
from relay.wire.strategies import Strategy

DEFAULT_HOURS_BACK = 48
MAX_HOURS_BACK = 24 * 31
PAGE_ROWS = 10_000
CHUNK_ROWS = 200

_ROWS = TypeAdapter(list[wire.RawMetric])
_Int = Annotated[StrictInt, Field(ge=-(2**63), le=2**63 - 1)]  # what the columns hold
_Name = Annotated[str, Field(min_length=1, max_length=MAX_NAME, pattern=r"^[^\x00]*$")]
# the period's start, then the last row sent (app, environment, hour) once there is one
_CURSOR = TypeAdapter(tuple[_Int] | tuple[_Int, _Name, _Name, _Int])


async def add_environment(request: web.Request) -> web.Response:
    body = await read_json(request, wire.ProjectEnvironment)
    await request.app[PROJECTS].add_environment(request.match_info["projectId"], body)
    return web.Response(status=200)


async def remove_environment(request: web.Request) -> web.Response:
    info = request.match_info
    await request.app[PROJECTS].remove_environment(info["projectId"], info["environment"])
    return web.Response(status=200)


async def set_default_strategy(request: web.Request) -> web.Response:
    body = await read_json(request, Strategy)
    info = request.match_info
    saved = await request.app[PROJECTS].set_default_strategy(
        info["projectId"], info["environment"], body
    )
    return web.Response(text=saved, content_type="application/json")


async def get_project(request: web.Request) -> web.Response:
    return model_response(await request.app[PROJECTS].get(request.match_info["projectId"]))


async def create_project(request: web.Request) -> web.Response:
    body = await read_json(request, wire.CreateProject)
    return model_response(await request.app[PROJECTS].create(body), status=201)


async def create_environment(request: web.Request) -> web.Response:
    body = await read_json(request, wire.CreateEnvironment)
    return model_response(await request.app[PROJECTS].create_environment(body), status=201)


async def create_api_key(request: web.Request) -> web.Response:
    body = await read_json(request, wire.CreateApiKey)
    secret, record = await request.app[KEYS].issue(body)
    return model_response(key_out(record, secret), status=201)


async def list_api_keys(request: web.Request) -> web.Response:
    keys = await request.app[KEYS].listed()
    return model_response(wire.ApiKeysOut(tokens=[key_out(k) for k in keys]))


async def revoke_api_key(request: web.Request) -> web.Response:
    """By id or by name (Unleash takes the secret itself in the path: a key in a URL ends
    up in proxies' logs, so it is not accepted here)."""
    await request.app[KEYS].revoke(request.match_info["nameOrId"])
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

    async def parts() -> AsyncIterator[bytes]:
        head, position, left, sent = b'{"version":1,"maturity":"stable","data":[', after, limit, 0
        while True:
            wanted = min(CHUNK_ROWS, left + 1)  # one past the page tells if another follows
            rows = await usage.raw_metrics(feature, since, position, wanted)
            more = len(rows) > left
            rows = rows[:left]
            if rows:
                head += (b"," if sent else b"") + _ROWS.dump_json(rows)[1:-1]
                last = rows[-1]
                position = (last.appName, last.environment, int(last.timestamp.timestamp()))
                left, sent = left - len(rows), sent + len(rows)
            if more or len(rows) < wanted:
                url = next_url(request, limit, [since, *(position or ())]) if more else None
                yield head + b'],"next":' + json.dumps(url).encode() + b"}"
                return
            yield head
            head = b""

    return await streamed(request, parts())


async def applications(request: web.Request) -> web.Response:
    found = await request.app[USAGE].applications()
    return model_response(wire.ApplicationsOut(applications=found))


async def application(request: web.Request) -> web.Response:
    name = request.match_info["appName"]
    found = await request.app[USAGE].applications(name)
    if not found:
        raise NotFoundError(f"No application named {name}")
    return model_response(found[0])


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
        auth=KeyType.ADMIN,
        body=body,
        responses=dict([ok]),
        errors=(401, 403, *errors),
    )


_PROJECT = "/api/admin/projects/{projectId}"

ROUTES = [
    admin_route(
        "POST",
        f"{_PROJECT}/environments",
        add_environment,
        "Add an environment to a project",
        body=wire.ProjectEnvironment,
        errors=(400, 404, 409, 413, 415),
    ),
    admin_route(
        "DELETE",
        f"{_PROJECT}/environments/{{environment}}",
        remove_environment,
        "Remove an environment from a project",
        errors=(404,),
    ),
    admin_route(
        "POST",
        f"{_PROJECT}/environments/{{environment}}/default-strategy",
        set_default_strategy,
        "Set the strategy a flag gets when turned on there with none",
        body=Strategy,
        ok=(200, Strategy),
        errors=(400, 404, 413, 415),
    ),
    admin_route(
        "GET",
        _PROJECT,
        get_project,
        "A project and its environments",
        ok=(200, wire.ProjectOut),
        errors=(404,),
    ),
    admin_route(
        "POST",
        "/api/admin/projects",
        create_project,
        "Create a project",
        body=wire.CreateProject,
        ok=(201, wire.ProjectOut),
        errors=(400, 409, 413, 415),
    ),
    admin_route(
        "POST",
        "/api/admin/environments",
        create_environment,
        "Create an environment",
        body=wire.CreateEnvironment,
        ok=(201, wire.EnvironmentOut),
        errors=(400, 409, 413, 415),
    ),
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
        "Registered applications and their instances",
        ok=(200, wire.ApplicationsOut),
    ),
    admin_route(
        "GET",
        "/api/admin/metrics/applications/{appName}",
        application,
        "One registered application",
        ok=(200, wire.ApplicationOut),
        errors=(404,),
    ),
]
