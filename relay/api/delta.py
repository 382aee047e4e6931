"""``GET /api/client/delta`` of both modes: Unleash's delta protocol (``relay.core.delta``),
from each mode's ``DeltaSource``; the stream (``relay.api.streaming``) sends the same events.

The scope is the client features answer's (``relay.api.client_features.scope``: the key's
projects and environment, ``project`` and ``namePrefix``), with segments always as ids:
every SDK that speaks the protocol resolves them itself. A client names the revision it
holds by ``If-None-Match`` (delta) or ``Last-Event-ID`` (streaming): ``"12"``, ``12`` and
``W/"12"`` are all read as 12; anything else as no revision (a hydration).
"""

from __future__ import annotations

import dataclasses

from aiohttp import web

from relay.api import client_features
from relay.api.auth import CLIENT_KEYS, PRINCIPAL
from relay.api.routing import Route
from relay.api.state import DELTA_SOURCE, KeyDeltas
from relay.core.catalog import Scope
from relay.core.keys import strip_scheme
from relay.wire.delta import ClientFeaturesDelta


def scope(request: web.Request) -> Scope:
    return dataclasses.replace(client_features.scope(request), inline_segments=False)


def source(request: web.Request) -> KeyDeltas:
    """Where the caller's key gets its deltas (authenticated: the header is there)."""
    key = strip_scheme(request.headers["Authorization"])
    return request.app[DELTA_SOURCE].for_key(key, request[PRINCIPAL])


def revision(header: str | None) -> int | None:
    """The revision a client says it holds, None when it names none we could hold."""
    if header is None:
        return None
    text = header.strip().removeprefix("W/").strip('"')
    # ASCII digits only: str.isdigit takes other scripts' digits, and "\u00b2", int() does not
    digits = text.isascii() and text.isdigit() and len(text) <= 18
    return int(text) if digits else None


def etag(event_id: int) -> str:
    return f'"{event_id}"'


async def delta(request: web.Request) -> web.Response:
    """The events after the client's revision, a hydration, or 304 when nothing it sees
    changed."""
    since = revision(request.headers.get("If-None-Match"))
    found = await source(request).delta(scope(request), since)
    headers = {"ETag": etag(found.last), "Cache-Control": "no-cache"}
    if found.events == 0:
        return web.Response(status=304, headers=headers)
    return web.Response(body=found.body, content_type="application/json", headers=headers)


ROUTES = [
    Route(
        "GET",
        "/api/client/delta",
        delta,
        "Changes of the feature flags since the revision in If-None-Match (ETag: the last"
        " event's id), or a hydration; 304 when nothing the key sees changed",
        "client",
        auth=CLIENT_KEYS,
        responses={200: ClientFeaturesDelta, 304: None},
        errors=(400, 503),
    ),
]
