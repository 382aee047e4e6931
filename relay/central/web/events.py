"""The event log page: every admin change (``EventLog``, what ``GET /api/admin/events``
reads), newest first, ``EVENTS_PAGE`` a page, filtered by flag and project; each event in
words (who, what, when, both relative and absolute) with the fields it changed, before and
after, and the whole of both on request (``<details>``, no script)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

from aiohttp import web

from relay.api.paging import offset, whole
from relay.central.events import MAX_PAGE, EventFilter
from relay.central.state import EVENTS, PROJECTS
from relay.central.web.site import page, render
from relay.wire.common import MAX_NAME
from relay.wire.events import EventOut

EVENTS_PAGE = 50
MAX_OFFSET = 2**31 - 1
SHOWN_CHARS = 300
"""Of one changed field's value, shown inline (the whole is under "everything")."""

_WHAT = {
    "feature-created": "created {feature}",
    "feature-metadata-updated": "changed the settings of {feature}",
    "feature-archived": "archived {feature}",
    "feature-revived": "revived {feature}",
    "feature-deleted": "deleted {feature} for good",
    "feature-environment-enabled": "turned on {feature} in {environment}",
    "feature-environment-disabled": "turned off {feature} in {environment}",
    "feature-strategy-add": "added a strategy to {feature} in {environment}",
    "feature-strategy-update": "changed a strategy of {feature} in {environment}",
    "feature-strategy-remove": "removed a strategy of {feature} in {environment}",
    "strategy-order-changed": "reordered the strategies of {feature} in {environment}",
    "feature-dependency-added": "made {feature} depend on another flag",
    "feature-dependency-removed": "removed the dependency of {feature}",
    "feature-environment-variants-updated": "set the variants of {feature} in {environment}",
    "feature-tagged": "tagged {feature}",
    "feature-untagged": "untagged {feature}",
    "project-created": "created the project {project}",
    "project-updated": "changed the project {project}",
    "project-deleted": "deleted the project {project}",
    "project-environment-added": "enabled {environment} in the project {project}",
    "project-environment-removed": "disabled {environment} in the project {project}",
    "default-strategy-updated": "set the default strategy of {environment} in {project}",
    "environment-created": "created the environment {environment}",
    "environment-updated": "changed the environment {environment}",
    "environment-deleted": "deleted the environment {environment}",
}


@dataclass
class Shown:
    """One event as the page shows it."""

    event: EventOut
    what: str
    ago: str
    changes: list[tuple[str, str, str]]
    """(field, before, after) of each top-level field that differs."""
    before: str
    after: str


@page
async def events(request: web.Request) -> web.Response:
    query = request.query
    feature = query.get("feature", "").strip()[:MAX_NAME] or None
    project = query.get("project", "").strip()[:MAX_NAME] or None
    limit = whole(query.get("limit"), "limit", MAX_PAGE, EVENTS_PAGE)
    skip = offset(query.get("offset"), MAX_OFFSET)
    found, total = await request.app[EVENTS].page(EventFilter(feature, project), skip, limit)
    now = datetime.now(UTC)
    chosen = {k: v for k, v in (("feature", feature), ("project", project)) if v}
    following = None
    if skip + limit < total:
        following = "/events?" + urlencode(chosen | {"offset": skip + limit, "limit": limit})
    return render(
        request,
        "events.html",
        events=[_shown(e, now) for e in found],
        total=total,
        skip=skip,
        feature=feature or "",
        project=project or "",
        projects=await request.app[PROJECTS].all(),
        next=following,
    )


def _shown(event: EventOut, now: datetime) -> Shown:
    names = {
        "feature": event.featureName or "a flag",
        "environment": event.environment or "an environment",
        "project": event.project or _name(event.data) or _name(event.preData) or "a project",
    }
    what = _WHAT.get(event.type)
    said = what.format(**names) if what else f"{event.type.replace('-', ' ')} {_subject(event)}"
    return Shown(
        event,
        said.strip(),
        ago(event.createdAt, now),
        _changes(event.preData, event.data),
        _json(event.preData),
        _json(event.data),
    )


def _name(data: Any) -> str | None:
    found = data.get("name") if isinstance(data, dict) else None
    return str(found) if found is not None else None


def _subject(event: EventOut) -> str:
    return event.featureName or _name(event.data) or _name(event.preData) or ""


def _changes(before: Any, after: Any) -> list[tuple[str, str, str]]:
    """The fields that differ, when each side is an object or nothing (a thing made or
    deleted); else the whole of each."""
    if isinstance(before, dict) and after is None:
        after = {}
    if isinstance(after, dict) and before is None:
        before = {}
    if not isinstance(before, dict) or not isinstance(after, dict):
        if before == after:
            return []
        return [("", _inline(before), _inline(after))]
    keys = sorted(set(before) | set(after))
    return [
        (k, _inline(before.get(k)), _inline(after.get(k)))
        for k in keys
        if before.get(k) != after.get(k)
    ]


def _inline(value: Any) -> str:
    if value is None:
        return "none"
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= SHOWN_CHARS else f"{text[:SHOWN_CHARS]}…"


def _json(value: Any) -> str:
    return "" if value is None else json.dumps(value, ensure_ascii=False, indent=2)


def ago(moment: datetime, now: datetime) -> str:
    """``just now``, ``5 minutes ago``, ``3 hours ago``, ``2 days ago``."""
    seconds = int((now - moment).total_seconds())
    if seconds < 60:
        return "just now"
    for size, unit in ((86_400, "day"), (3_600, "hour"), (60, "minute")):
        if seconds >= size:
            count = seconds // size
            return f"{count} {unit}{'' if count == 1 else 's'} ago"
    return "just now"  # pragma: no cover - the loop always answers from 60 s on
