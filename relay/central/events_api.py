"""``GET /api/admin/events`` and ``/api/admin/events/{featureName}`` (admin key): the event
log in Unleash's shape, newest first, a page at a time.

Unleash answers its last 100 events (50 of a flag) and pages only its search; here both
take ``limit`` (at most ``MAX_PAGE``) and ``offset``, and ``/api/admin/events`` filters by
``feature`` and ``project`` too. ``totalEvents`` counts every event the filter selects.
"""

from __future__ import annotations

from aiohttp import web

from relay.api.paging import name_filter, offset, whole
from relay.api.responses import model_response
from relay.central.admin import admin_route
from relay.central.events import MAX_PAGE, EventFilter
from relay.central.state import EVENTS
from relay.wire.events import EventsOut, FeatureEventsOut

DEFAULT_EVENTS = 100
DEFAULT_FEATURE_EVENTS = 50
MAX_OFFSET = 10_000_000
"""More than the log can keep (``event_log_kept``): a larger offset is a mistake (400)."""


def _page(request: web.Request, default: int) -> tuple[int, int]:
    query = request.query
    limit = whole(query.get("limit"), "limit", MAX_PAGE, default)
    return offset(query.get("offset"), MAX_OFFSET), limit


async def events(request: web.Request) -> web.Response:
    query = request.query
    feature, project = name_filter(query, "feature"), name_filter(query, "project")
    where = EventFilter(feature=feature, project=project)
    found, total = await request.app[EVENTS].page(where, *_page(request, DEFAULT_EVENTS))
    return model_response(EventsOut(events=found, totalEvents=total))


async def feature_events(request: web.Request) -> web.Response:
    name = request.match_info["featureName"]
    page = _page(request, DEFAULT_FEATURE_EVENTS)
    found, total = await request.app[EVENTS].page(EventFilter(feature=name), *page)
    return model_response(FeatureEventsOut(toggleName=name, events=found, totalEvents=total))


ROUTES = [
    admin_route(
        "GET",
        "/api/admin/events",
        events,
        "Admin changes, newest first (limit, offset; filters: feature, project)",
        ok=(200, EventsOut),
        errors=(400,),
    ),
    admin_route(
        "GET",
        "/api/admin/events/{featureName}",
        feature_events,
        "One flag's admin changes, newest first (limit, offset)",
        ok=(200, FeatureEventsOut),
        errors=(400,),
    ),
]
