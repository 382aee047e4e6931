"""Impact metrics kept by the central service: ``GET /api/admin/metrics/impact`` (admin key),
their running state per series, paged; and their bounds, kept by the leader's prune job.

Unleash shows impact metrics through its Prometheus; here they are read as JSON, filtered
by ``appName`` and ``environment``. What is kept is bounded: a series not updated for
``MAX_AGE`` is forgotten, and each application keeps its ``MAX_SERIES`` most recently updated
series per environment."""

from __future__ import annotations

import base64
import json
import time
from typing import Annotated

from aiohttp import web
from pydantic import Field, StrictStr, TypeAdapter, ValidationError

from relay.api.errors import BadDataError
from relay.api.responses import model_response
from relay.central.admin import admin_route
from relay.central.state import IMPACT
from relay.core.domain import from_epoch
from relay.core.impact import ImpactState
from relay.store.impact import ImpactStore, Position
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
    limit = _limit(query.get("limit"))
    after = _position(query["after"]) if "after" in query else None
    rows = await request.app[IMPACT].page(
        query.get("appName"), query.get("environment"), after, limit
    )
    series = [_series(row) for row in rows]
    more = None
    if len(rows) == limit:
        last = rows[-1]
        cursor = json.dumps([last["app_name"], last["environment"], last["name"], last["series"]])
        token = base64.urlsafe_b64encode(cursor.encode()).decode().rstrip("=")
        more = str(request.rel_url.update_query(limit=str(limit), after=token))
    return model_response(ImpactMetricsOut(series=series, next=more))


def _limit(raw: str | None) -> int:
    if raw is None:
        return PAGE_SERIES
    if not raw.isdigit() or not 1 <= int(raw) <= PAGE_SERIES:
        raise BadDataError(f"limit must be a whole number from 1 to {PAGE_SERIES}")
    return int(raw)


def _position(after: str) -> Position:
    try:
        raw = base64.urlsafe_b64decode(after + "=" * (-len(after) % 4))
        return _CURSOR.validate_python(json.loads(raw))
    except (ValueError, TypeError, RecursionError, ValidationError):
        raise BadDataError("after must be the cursor of a page's next URL") from None


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


async def forget_old(store: ImpactStore) -> None:
    await store.prune(time.time() - MAX_AGE, MAX_SERIES)


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
