"""Connected relays: their reports (``POST /api/client/metrics/edge``, with the relay's
upstream key, as Unleash Edge posts them) and the list of them
(``GET /api/admin/metrics/edges``, the path and shape of Unleash Enterprise).

Each relay's latest report is kept, under its ``identifier`` within the scope of the key
that posted it (``ReportScope``), with the relay it came through; a relay with no report
for ``STALE_AFTER`` report intervals is marked stale, and forgotten after ``KEEP``. The web
page shows the same list (``relay.central.web``)."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Annotated

from aiohttp import web
from pydantic import Field, TypeAdapter

from relay.api.auth import PRINCIPAL
from relay.api.body import read_kept
from relay.api.client import client_route
from relay.api.jobs import every
from relay.api.paging import NO_NUL, CursorName, next_url, position, whole
from relay.central.admin import admin_route
from relay.central.counts import PRUNE_INTERVAL
from relay.central.state import EDGES
from relay.core.edges import STALE_AFTER, ReportScope, flatten
from relay.core.ingest_batch import from_epoch
from relay.store.edge_reports import EdgeReportStore, ReportBounds
from relay.wire.edges import (
    MAX_REPORT_BYTES,
    MAX_REPORTED,
    REPORT_PATH,
    ConnectedEdge,
    ConnectedEdges,
    EdgeInstanceData,
)

REPORT_INTERVAL = 60.0
"""Seconds between two reports of a relay (Unleash Edge's, and ours by default)."""
KEEP = 7 * 24 * 3600.0
"""Seconds a relay that stopped reporting stays listed (stale)."""
BOUNDS = ReportBounds(
    per_scope=MAX_REPORTED, total=10_000, direct_for=STALE_AFTER * REPORT_INTERVAL
)
"""A whole tree per key scope; ten such in all (each relay's record: a few kB at most)."""
PAGE_RELAYS = 1_000
_PROJECTS = Annotated[str, Field(max_length=64 * 1024, pattern=NO_NUL)]
_AFTER = TypeAdapter(tuple[CursorName, _PROJECTS, CursorName])
"""A page's cursor: the environment, projects (as stored) and identifier of its last relay."""


async def report_edge(request: web.Request) -> web.Response:
    body = await read_kept(request, EdgeInstanceData, MAX_REPORT_BYTES)
    scope = ReportScope.of(request[PRINCIPAL])
    await request.app[EDGES].save(scope, flatten(body), time.time())
    return web.Response(status=202)


async def connected(
    store: EdgeReportStore,
    now: float | None = None,
    after: tuple[str, str, str] | None = None,
    limit: int = PAGE_RELAYS,
) -> list[ConnectedEdge]:
    """Up to ``limit`` relays known from their reports, by scope and identifier past
    ``after`` (``place``), each with the scope of the key that reported it (records that
    do not read are left out by the store)."""
    now = time.time() if now is None else now
    stale_before = now - STALE_AFTER * REPORT_INTERVAL
    return [
        ConnectedEdge(
            **dict(r.report),
            instanceId=r.identifier,
            reportedAt=from_epoch(r.reported_at),
            connectedVia=r.via,
            stale=r.reported_at < stale_before,
            environment=r.scope.environment,
            projects=list(r.scope.projects),
        )
        for r in await store.page(now - KEEP, after, limit)
    ]


def place(edge: ConnectedEdge) -> list[str]:
    """The cursor of the page after ``edge`` (``EdgeReportStore.page``)."""
    return [edge.environment, json.dumps(edge.projects), edge.instanceId]


def after(query: Mapping[str, str]) -> tuple[str, str, str] | None:
    """The cursor a ``next`` URL carries, or None for the first page (400 if malformed)."""
    return position(query["after"], _AFTER) if "after" in query else None


def pruning(store: EdgeReportStore) -> Callable[[web.Application], AsyncIterator[None]]:
    """Reports of relays not heard from for ``KEEP`` seconds forgotten every ``PRUNE_INTERVAL``."""

    async def forget_old() -> None:
        await store.prune(time.time() - KEEP)

    return every(PRUNE_INTERVAL, forget_old, "prune-edges")


async def edges(request: web.Request) -> web.Response:
    """``limit`` relays (at most ``PAGE_RELAYS``) a page, by scope and identifier; the body
    is Unleash's list, so the next page's URL is in a ``Link`` header (``rel="next"``)."""
    limit = whole(request.query.get("limit"), "limit", PAGE_RELAYS, PAGE_RELAYS)
    found = await connected(request.app[EDGES], after=after(request.query), limit=limit + 1)
    page = ConnectedEdges(found[:limit])
    response = web.Response(body=page.model_dump_json(), content_type="application/json")
    if len(found) > limit:
        following = next_url(request, limit, place(found[limit - 1]))
        response.headers["Link"] = f'<{following}>; rel="next"'
    return response


ROUTES = [
    client_route(
        REPORT_PATH,
        report_edge,
        "A relay's report about itself and the relays it serves (Unleash Edge's)",
        EdgeInstanceData,
    ),
    admin_route(
        "GET",
        "/api/admin/metrics/edges",
        edges,
        "Connected relays: the latest report of each (paged: limit, after; next in Link)",
        ok=(200, ConnectedEdges),
        errors=(400,),
    ),
]
