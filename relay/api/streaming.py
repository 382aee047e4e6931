"""``GET /api/client/streaming`` of both modes: the delta protocol's events as server-sent
events, from each mode's ``DeltaSource`` (``relay.api.delta`` for the scope and revisions).

The stream opens with ``unleash-connected``: a hydration, or the events after
``Last-Event-ID`` when the client reconnects; then ``unleash-updated`` with the events of
each change the key sees, ``id:`` on each (the last event's id). A comment
``stream_keepalive`` seconds after the stream's last write keeps an idle stream alive (the
Python SDK reconnects after 30 s of silence), however often changes the key does not see
wake it meanwhile. Every write is bounded by ``write_timeout``: a client that stops reading
is cut off, not buffered for. Streams end when the server shuts down, before it waits for
requests to finish (SDKs reconnect, to another instance if this one is gone), when
their key is revoked (at the next change or keep-alive), and at a bound when their client
has closed the connection (``Streams``).

Limits: the service holds at most ``stream_max`` streams, one key at most
``stream_max_per_key``, however many workers share them (counted in the memory they share,
``relay.api.shared``). A client past them is not refused with a status the Python SDK
would retry forever without flags (it never polls): it gets its hydration, then the
``fetch-mode: polling`` hint, and the stream ends. The Node SDK switches to polling; the
Python SDK keeps its flags and reconnects with backoff (up to 30 s), getting a stream when
there is room.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence

from aiohttp import web
from prometheus_client import Counter, Gauge

from relay.api.auth import CLIENT_KEYS
from relay.api.connections import SLICE, write_part
from relay.api.delta import revision, scope, source
from relay.api.routing import Route
from relay.api.shared import Shared
from relay.api.state import KEY_RESOLVER, SETTINGS, SHARED
from relay.core.delta import Delta
from relay.core.errors import DomainError
from relay.core.keys import hash_key, strip_scheme

OPEN = Gauge(
    "relay_streams",
    "Open streams: /api/client/streaming, and OFREP's /ofrep/v1/events",
    multiprocess_mode="livesum",
)
OPENED = Counter(
    "relay_streams_opened_total",
    "Streams opened, by how they started: a hydration, or (after Last-Event-ID) the events missed",
    ["start"],
)
TURNED_AWAY = Counter(
    "relay_streams_turned_away_total",
    "Streams past stream_max or stream_max_per_key: hydrated, told to poll, ended",
    ["bound"],
)
SWEPT = Counter(
    "relay_streams_swept_total",
    "Streams ended at a bound because their client had closed the connection",
)
SWEEP_EVERY = 1.0
EVENT_STREAM = {
    "Content-Type": "text/event-stream",
    "Cache-Control": "no-cache",
    "X-Accel-Buffering": "no",  # a proxy in front must not hold events back
}


class Streams:
    """This worker's open streams, per key (by its hash), each with the event that ends it;
    counted against the bounds in the memory the workers share.

    The service does not cancel a handler whose client has gone (aiohttp's
    ``handler_cancellation`` is off, as by default: every other handler runs to its end),
    so a stream waiting for a change only finds out at its next write, a keep-alive later. At
    a bound, streams whose connection is closed are ended and dropped from the count
    first (a sweep at most every ``SWEEP_EVERY`` seconds: a worker that is really full
    does not look at all its streams for every SDK turned away), so SDKs reconnecting at
    once are not turned away by their own dead streams."""

    def __init__(self, shared: Shared) -> None:
        self.closing = False
        self._shared = shared
        self._open: dict[str, dict[asyncio.Event, web.Request]] = {}
        self._swept = -SWEEP_EVERY

    @property
    def total(self) -> int:
        """Streams open in the service, every worker's."""
        return self._shared.streams()

    def open(
        self, key: str, request: web.Request, most: int, most_per_key: int
    ) -> asyncio.Event | str:
        """The stream counted, and the event set when it is to end (gone, or shutting
        down); else the bound it would pass (``service``, ``key``), once this worker's
        streams whose client left are dropped."""
        bound = self._shared.open_stream(key, most, most_per_key)
        if bound is not None and self._sweep():
            bound = self._shared.open_stream(key, most, most_per_key)
        if bound is not None:
            return bound
        end = asyncio.Event()
        if self.closing:
            end.set()
        self._open.setdefault(key, {})[end] = request
        OPEN.inc()
        return end

    def closed(self, key: str, end: asyncio.Event) -> None:
        """Drops the stream from the count, once (its handler ends after a sweep did)."""
        streams = self._open.get(key, {})
        if streams.pop(end, None) is None:
            return
        if not streams:
            del self._open[key]
        self._shared.close_stream(key)
        OPEN.dec()

    def close_all(self) -> None:
        """Shutting down: every stream ends, and one opened now ends at once."""
        self.closing = True
        for streams in self._open.values():
            for end in streams:
                end.set()

    def _sweep(self) -> bool:
        """Whether streams were dropped."""
        now = time.monotonic()
        if now < self._swept + SWEEP_EVERY:
            return False
        self._swept, swept = now, False
        for key, streams in list(self._open.items()):
            for end, request in list(streams.items()):
                transport = request.transport
                if transport is None or transport.is_closing():
                    end.set()
                    self.closed(key, end)
                    SWEPT.inc()
                    swept = True
        return swept


STREAMS = web.AppKey("streams", Streams)


async def streaming(request: web.Request) -> web.StreamResponse:
    deltas, settings = source(request), request.app[SETTINGS]
    streams = request.app[STREAMS]
    secret = strip_scheme(request.headers["Authorization"])
    key, client = scope(request), hash_key(secret)
    found = await deltas.delta(key, revision(request.headers.get("Last-Event-ID")))
    response = web.StreamResponse(headers=EVENT_STREAM)
    end = streams.open(client, request, settings.stream_max, settings.stream_max_per_key)
    try:
        await response.prepare(request)
        if request.method == "HEAD":
            return response
        if isinstance(end, str):
            TURNED_AWAY.labels(end).inc()
            hint = b"event: fetch-mode\ndata: polling\n\n"
            await write_part(request, response, *_message("unleash-connected", found, hint))
            return response
        OPENED.labels("hydration" if found.hydration else "replay").inc()
        await write_part(request, response, *_message("unleash-connected", found))

        async def updated() -> tuple[bytes, ...]:
            nonlocal found
            found = await deltas.delta(key, found.revision)
            return _message("unleash-updated", found) if found.events else ()

        await follow(
            request, response, end, secret, lambda: deltas.changed(found.revision), updated
        )
    except ConnectionResetError:
        pass  # the client went away, or read nothing within write_timeout
    except DomainError:
        pass  # a relay's upstream refused the key meanwhile: the reconnect is told why
    finally:
        if isinstance(end, asyncio.Event):
            streams.closed(client, end)
    return response


async def follow(
    request: web.Request,
    response: web.StreamResponse,
    end: asyncio.Event,
    secret: str,
    change: Callable[[], Awaitable[None]],
    changed: Callable[[], Awaitable[Sequence[bytes]]],
) -> None:
    """An open stream's life (this one's and OFREP's): after each ``change``, what
    ``changed`` says is new for this client (nothing: no write); a keep-alive once
    ``stream_keepalive`` seconds passed without a write (a change it does not see leaves
    it due); until the stream is to end (shutting down, its client gone) or the key
    ``secret`` is revoked."""
    settings, resolver = request.app[SETTINGS], request.app[KEY_RESOLVER]
    clock = asyncio.get_running_loop().time
    due = clock() + settings.stream_keepalive
    while True:
        moved = await _change_within(change(), end, max(0.0, due - clock()))
        await resolver.current()
        if end.is_set() or resolver.known(secret) is None:
            return
        parts = await changed() if moved else (b": keep-alive\n\n",)
        if parts:
            await write_part(request, response, *parts)
            due = clock() + settings.stream_keepalive


async def _change_within(change: Awaitable[None], end: asyncio.Event, wait: float) -> bool:
    """True once ``change`` is done; False after ``wait`` seconds, or once the stream is
    to end."""
    changed = asyncio.ensure_future(change)
    closed = asyncio.ensure_future(end.wait())
    try:
        await asyncio.wait((changed, closed), timeout=wait, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (changed, closed):
            task.cancel()
    return changed.done() and not changed.cancelled()


def _message(event: str, found: Delta, after: bytes = b"") -> tuple[bytes, ...]:
    """The event's parts, then ``after``: a large body is written from the delta's one copy
    (``write_part``), not joined into a copy for each stream."""
    head = b"event: %s\nid: %d\ndata: " % (event.encode(), found.last)
    if len(found.body) <= SLICE:
        return (head + found.body + b"\n\n" + after,)
    return head, found.body, b"\n\n" + after


async def _close_streams(app: web.Application) -> None:
    """``on_shutdown``: streams end before the server waits for requests to finish."""
    app[STREAMS].close_all()


def add_streams(app: web.Application) -> None:
    app[STREAMS] = Streams(app[SHARED])
    app.on_shutdown.append(_close_streams)


ROUTES = [
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
