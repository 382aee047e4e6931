"""Impact metrics kept by the central service: ``GET /api/admin/metrics/impact`` (admin key),
their running state per series, paged; and their bounds, kept by the leader's prune job.

Unleash shows impact metrics through its Prometheus; here they are read as JSON, filtered
by ``appName`` and ``environment``. What is kept is bounded: a series not updated for
``MAX_AGE`` is forgotten, and each application keeps its ``MAX_SERIES`` most recently updated
series per environment."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable
from typing import Annotated

from aiohttp import web
from pydantic import Field, StrictStr, TypeAdapter

from relay.api.jobs import every
from relay.api.paging import next_url, position, whole
from relay.api.responses import model_response
from relay.central.admin import admin_route
from relay.central.counts import PRUNE_INTERVAL
from relay.central.state import IMPACT
from relay.core.impact import ImpactState
from relay.core.ingest_batch import from_epoch
from relay.store.impact import ImpactStore
from relay.store.sql import Row
from relay.wire.impact import ImpactMetricsOut, ImpactSeriesOut

MAX_AGE = 30 * 24 * 3600.0
MAX_SERIES = 1_000
PAGE_SERIES = 1_000

_NAME = Annotated[StrictStr, Field(max_length=4 * 255)]
_CURSOR = TypeAdapter(tuple[_NAME, _NAME, _NAME, _NAME])


async def impact_metrics(request: web.Request) -> web.Response:
    """The series of ``appName`` and ``environment`` (each optional), ``limit`` (at most
    ``PAGE_SERIES``) a page, ``next`` the URL of the following page."""
    query = request.query
    limit = whole(query.get("limit"), "limit", PAGE_SERIES, PAGE_SERIES)
    after = position(query["after"], _CURSOR) if "after" in query else None
    rows = await request.app[IMPACT].page(
        query.get("appName"), query.get("environment"), after, limit
    )
    series = [_series(row) for row in rows]
    more = None
    if len(rows) == limit:
        last = rows[-1]
        at = [last["app_name"], last["environment"], last["name"], last["series"]]
        more = next_url(request, limit, at)
    return model_response(ImpactMetricsOut(series=series, next=more))


def _series(row: Row) -> ImpactSeriesOut:
    kind = row["kind"]
    state = ImpactState.loads(row["help"], row["state"])
    sample = state.sample(kind, json.loads(row["labels"]))
    return ImpactSeriesOut.model_validate(
        {
            **sample,
            "appName": row["app_name"],
            "environment": row["environment"],
            "name": row["name"],
            "type": kind,
            "help": row["help"],
            "updatedAt": from_epoch(row["updated_at"]),
        }
    )


def pruning(store: ImpactStore) -> Callable[[web.Application], AsyncIterator[None]]:
    """Series older than ``MAX_AGE``, and those past ``MAX_SERIES``, forgotten every
    ``PRUNE_INTERVAL``."""

    async def forget_old() -> None:
        await store.prune(time.time() - MAX_AGE, MAX_SERIES)

    return every(PRUNE_INTERVAL, forget_old, "prune-impact")


ROUTES = [
    admin_route(
        "GET",
        "/api/admin/metrics/impact",
        impact_metrics,
        "Impact metrics: each series' running state (query appName, environment;"
        " paged: limit, after)",
        ok=(200, ImpactMetricsOut),
        errors=(400,),
    ),
]
