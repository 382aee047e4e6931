"""Connected relays: their reports (``POST /api/client/metrics/edge``, with the relay's
upstream key, as Unleash Edge posts them) and the list of them
(``GET /api/admin/metrics/edges``, the path and shape of Unleash Enterprise).

Each relay's latest report is kept, under its ``identifier``, with the relay it came
through; a relay with no report for ``STALE_AFTER`` report intervals is marked stale, and
forgotten after ``KEEP``. The web page shows the same list (``relay.central.web``)."""

from __future__ import annotations

import time
from typing import Annotated

from aiohttp import web
from pydantic import Field, TypeAdapter

from relay.api.body import read_json
from relay.api.client import client_route
from relay.api.paging import next_url, position, whole
from relay.central.admin import admin_route
from relay.central.state import EDGES
from relay.core.domain import from_epoch
from relay.core.edges import STALE_AFTER, flatten
from relay.store.edge_reports import EdgeReportStore, StoredReport
from relay.wire.common import MAX_NAME
from relay.wire.edges import REPORT_PATH, ConnectedEdge, ConnectedEdges, EdgeInstanceData

REPORT_INTERVAL = 60.0
"""Seconds between two reports of a relay (Unleash Edge's, and ours by default)."""
KEEP = 7 * 24 * 3600.0
"""Seconds a relay that stopped reporting stays listed (stale)."""
PAGE_RELAYS = 1_000
_AFTER = TypeAdapter(tuple[Annotated[str, Field(min_length=1, max_length=MAX_NAME)]])


async def report_edge(request: web.Request) -> web.Response:
    body = await read_json(request, EdgeInstanceData)
    now = time.time()
    await request.app[EDGES].save(
        [
            StoredReport(e.identifier, e.app_name, e.via, now, e.report.model_dump_json())
            for e in flatten(body)
        ]
    )
    return web.Response(status=202)


async def connected(
    store: EdgeReportStore,
    now: float | None = None,
    after: str | None = None,
    limit: int = PAGE_RELAYS,
) -> list[ConnectedEdge]:
    """Up to ``limit`` relays known from their reports, by identifier after ``after``."""
    now = time.time() if now is None else now
    stale_before = now - STALE_AFTER * REPORT_INTERVAL
    return [
        ConnectedEdge.model_validate(
            {
                **EdgeInstanceData.model_validate_json(r.report).model_dump(),
                "instanceId": r.identifier,
                "reportedAt": from_epoch(r.reported_at),
                "connectedVia": r.via,
                "stale": r.reported_at < stale_before,
            }
        )
        for r in await store.page(now - KEEP, after, limit)
    ]


async def forget_old(store: EdgeReportStore) -> None:
    await store.prune(time.time() - KEEP)


async def edges(request: web.Request) -> web.Response:
    """``limit`` relays (at most ``PAGE_RELAYS``) a page, by identifier; the body is
    Unleash's list, so the next page's URL is in a ``Link`` header (``rel="next"``)."""
    query = request.query
    limit = whole(query.get("limit"), "limit", PAGE_RELAYS, PAGE_RELAYS)
    after = position(query["after"], _AFTER)[0] if "after" in query else None
    found = await connected(request.app[EDGES], after=after, limit=limit + 1)
    page = ConnectedEdges(found[:limit])
    response = web.Response(body=page.model_dump_json(), content_type="application/json")
    if len(found) > limit:
        response.headers["Link"] = (
            f'<{next_url(request, limit, [found[limit - 1].instanceId])}>; rel="next"'
        )
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
