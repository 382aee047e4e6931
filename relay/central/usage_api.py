"""Admin endpoints of usage: a feature's hourly counts and the registered applications,
each paged and streamed (``relay.api.paging``), read through ``UsageReader``."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Annotated

from aiohttp import web
from pydantic import Field, StrictInt, TypeAdapter

from relay.api.errors import NotFoundError
from relay.api.paging import CursorName, array_items, position, stream_page, whole
from relay.central.admin import admin_route
from relay.central.state import USAGE
from relay.central.usage import Instance, Position
from relay.core.ingest_batch import hour_start
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


ROUTES = [
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
