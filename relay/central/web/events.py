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
SHOWN_CHARS = 200
"""Of one changed value, shown inline (the whole is under "before and after in full")."""
MAX_CHANGES = 30

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
    if found and skip + len(found) < total:  # a page may hold fewer (``MAX_PAGE_CHARS``)
        shown = skip + len(found)
        following = "/events?" + urlencode(chosen | {"offset": shown, "limit": limit})
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


def _changes(before: Any, after: Any, at: str = "") -> list[tuple[str, str, str]]:
    """The values that differ, at their paths (``environments[development].enabled``):
    objects are compared field by field, lists of named objects (environments,
    strategies by id) item by item; a thing made or deleted is compared field by field
    with nothing, an item of it added or removed shown whole.
    At most ``MAX_CHANGES`` are listed (the whole is under "before and after in full")."""
    found: list[tuple[str, str, str]] = []
    _compare(before, after, at, found)
    return found[:MAX_CHANGES]


def _compare(before: Any, after: Any, at: str, found: list[tuple[str, str, str]]) -> None:
    if before == after or len(found) > MAX_CHANGES:
        return
    made_or_gone = before is None or after is None
    if (
        isinstance(before, dict | None)
        and isinstance(after, dict | None)
        and not (made_or_gone and at)
    ):
        old, new = before or {}, after or {}
        for key in sorted(set(old) | set(new)):
            _compare(old.get(key), new.get(key), f"{at}.{key}" if at else str(key), found)
        return
    old_items, new_items = _named(before), _named(after)
    if old_items is not None and new_items is not None:
        for key in dict.fromkeys([*old_items, *new_items]):
            _compare(old_items.get(key), new_items.get(key), f"{at}[{key}]", found)
        return
    found.append((at, _inline(before), _inline(after)))


def _named(value: Any) -> dict[str, Any] | None:
    """A list of objects by their ``id`` (else ``name``), when each has one, once."""
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        return None
    keys = [str(v.get("id") or v.get("name") or "") for v in value]
    if not all(keys) or len(set(keys)) != len(keys):
        return None
    return dict(zip(keys, value, strict=True))


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
