"""``GET /api/client/delta`` and ``GET /api/client/streaming`` of both modes: Unleash's delta
protocol (``relay.core.delta``), from each mode's ``DeltaSource``.

The stream (server-sent events) opens with ``unleash-connected``: a hydration, or the events
after ``Last-Event-ID`` when the client reconnects; then ``unleash-updated`` with the events
of each change the key sees, ``id:`` on each (the last event's id). A comment every
``stream_keepalive`` seconds keeps an idle stream alive (the Python SDK reconnects after
30 s of silence). Every write is bounded by ``write_timeout``: a client that stops reading
is cut off, not buffered for. Streams end when the server shuts down (SDKs reconnect, to
another instance if this one is gone).

The scope is the client features answer's (``relay.api.client_features.scope``: the key's
projects and environment, ``project`` and ``namePrefix``), with segments always as ids:
every SDK that speaks the protocol resolves them itself. A client names the revision it
holds by ``If-None-Match`` (delta) or ``Last-Event-ID`` (streaming): ``"12"``, ``12`` and
``W/"12"`` are all read as 12; anything else as no revision (a hydration).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable

from aiohttp import web
from prometheus_client import Gauge

from relay.api import client_features
from relay.api.auth import CLIENT_KEYS
from relay.api.connections import write_part
from relay.api.routing import Route
from relay.api.state import DELTA_SOURCE, SETTINGS
from relay.core.catalog import Scope
from relay.core.delta import Delta
from relay.wire.delta import ClientFeaturesDelta


def scope(request: web.Request) -> Scope:
    return dataclasses.replace(client_features.scope(request), inline_segments=False)


def revision(header: str | None) -> int | None:
    """The revision a client says it holds, None when it names none we could hold."""
    if header is None:
        return None
    text = header.strip().removeprefix("W/").strip('"')
    return int(text) if text.isdigit() and len(text) <= 18 else None


def etag(event_id: int) -> str:
    return f'"{event_id}"'


async def delta(request: web.Request) -> web.Response:
    """The events after the client's revision, a hydration, or 304 when nothing it sees
    changed."""
    since = revision(request.headers.get("If-None-Match"))
    found = await request.app[DELTA_SOURCE].delta(scope(request), since)
    headers = {"ETag": etag(found.last), "Cache-Control": "no-cache"}
    if found.events == 0:
        return web.Response(status=304, headers=headers)
    return web.Response(body=found.body, content_type="application/json", headers=headers)


STREAMS = Gauge(
    "relay_streams", "Open /api/client/streaming connections", multiprocess_mode="livesum"
)
CLOSING = web.AppKey("streams_closing", asyncio.Event)
"""Set when the server shuts down: every stream ends."""


async def streaming(request: web.Request) -> web.StreamResponse:
    source, settings = request.app[DELTA_SOURCE], request.app[SETTINGS]
    closing = request.app[CLOSING]
    key = scope(request)
    found = await source.delta(key, revision(request.headers.get("Last-Event-ID")))
    response = web.StreamResponse(
        headers={
            "Content-Type": "text/event-stream",
            "Cache-Control": "no-cache",
            "X-Accel-Buffering": "no",  # a proxy in front must not hold events back
        }
    )
    await response.prepare(request)
    STREAMS.inc()
    try:
        await write_part(request, response, _message("unleash-connected", found))
        at = found.revision
        while True:
            changed = await _changed(source.changed(at), closing, settings.stream_keepalive)
            if closing.is_set():
                break
            if not changed:
                await write_part(request, response, b": keep-alive\n\n")
                continue
            found = await source.delta(key, at)
            at = found.revision
            if found.events:
                await write_part(request, response, _message("unleash-updated", found))
    except ConnectionResetError:
        pass  # the client went away, or read nothing within write_timeout
    finally:
        STREAMS.dec()
    return response


async def _changed(change: Awaitable[None], closing: asyncio.Event, wait: float) -> bool:
    """True once ``change`` is done; False after ``wait`` seconds, or once the server is
    closing."""
    changed = asyncio.ensure_future(change)
    closed = asyncio.ensure_future(closing.wait())
    try:
        await asyncio.wait((changed, closed), timeout=wait, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (changed, closed):
            task.cancel()
    return changed.done() and not changed.cancelled()


def _message(event: str, found: Delta) -> bytes:
    return b"event: %s\nid: %d\ndata: %s\n\n" % (event.encode(), found.last, found.body)


async def close_streams(app: web.Application) -> None:
    """``on_shutdown``: streams end before the server waits for requests to finish."""
    app[CLOSING].set()


def add_streams(app: web.Application) -> None:
    app[CLOSING] = asyncio.Event()
    app.on_shutdown.append(close_streams)


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
    Route(
        "GET",
        "/api/client/streaming",
        streaming,
        "Server-sent events: unleash-connected (a hydration, or what was missed since"
        " Last-Event-ID), then unleash-updated with the events of each change",
        "client",
        auth=CLIENT_KEYS,
        responses={200: None},
        errors=(400, 503),
    ),
]
