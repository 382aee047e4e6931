"""Every response leaves through here: errors become Unleash-shaped JSON, and each request is
counted and timed by route template (never by raw path, which would explode cardinality)."""

from __future__ import annotations

import contextlib
import functools
import logging
import socket
import struct
import time
from typing import Any

from aiohttp import web
from prometheus_client import Counter, Histogram

from relay.api import errors
from relay.api.connections import send
from relay.api.routing import Handler
from relay.api.state import SETTINGS
from relay.core.errors import DomainError, StorageError

log = logging.getLogger(__name__)
ACCESS = logging.getLogger("relay.access")
_PROBES = frozenset(
    f"{prefix}/{probe}"
    for prefix in ("", "/internal-backstage")
    for probe in ("health", "ready", "metrics")
)

REQUESTS = Counter(
    "relay_http_requests_total", "HTTP requests by route and status", ["method", "route", "status"]
)
LATENCY = Histogram(
    "relay_http_request_duration_seconds",
    "HTTP request latency by route",
    ["method", "route"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)

_HTTP_ERRORS: dict[int, type[errors.ApiError]] = {
    404: errors.NotFoundError,
    405: errors.MethodNotAllowed,
    413: errors.ContentTooLarge,
    415: errors.UnsupportedMediaType,
}


class OncePerSecond:
    """While storage is down every request fails the same way, and any caller, with a key or
    not, can make requests: one line a second says so, with how many it stands for."""

    def __init__(self) -> None:
        self._next = 0.0
        self._skipped = 0

    def due(self) -> int | None:
        """None: not now; else how many were skipped since the last line."""
        now = time.monotonic()
        if now < self._next:
            self._skipped += 1
            return None
        skipped, self._skipped, self._next = self._skipped, 0, now + 1.0
        return skipped


STORAGE_TROUBLE = web.AppKey("storage_trouble", OncePerSecond)


_EVERY_ANSWER = {"X-Content-Type-Options": "nosniff"}
"""A browser never takes an answer for another type than it says (JSON bodies echo names
that callers chose) and runs it as HTML or script."""


async def common_headers(request: web.Request, response: web.StreamResponse) -> None:
    """``on_response_prepare``: the headers every answer carries, errors and pages too."""
    for name, value in _EVERY_ANSWER.items():
        response.headers.setdefault(name, value)


def error_response(error: errors.ApiError) -> web.Response:
    return web.json_response(
        error.body().model_dump(mode="json", exclude_none=True),
        status=error.status,
        headers=error.headers(),
    )


def waited(request: web.Request) -> float:
    """Seconds since the kernel received the request's latest bytes, on Linux (0 elsewhere).

    The clock of a request cannot start when its handler does: a request that arrives while
    the event loop is held (by a long computation, or behind many others) sits in the socket
    until the loop reads it, and its wait would be no part of its duration (a poll held
    32 s was logged as 0.2 ms). TCP_INFO's ``tcpi_last_data_recv`` tells how long ago the
    socket last received data, in milliseconds: for a request read whole, when its last
    bytes arrived; data arriving later only makes it smaller, so the duration logged is
    never more than the real one."""
    transport = request.transport
    sock = None if transport is None else transport.get_extra_info("socket")
    if sock is None or _TCP_INFO is None or sock.family not in (socket.AF_INET, socket.AF_INET6):
        return 0.0
    try:
        info = sock.getsockopt(socket.IPPROTO_TCP, _TCP_INFO, _TCP_INFO_BYTES)
    except OSError:
        return 0.0
    if len(info) < _TCP_INFO_BYTES:
        return 0.0
    milliseconds: int = struct.unpack_from("=I", info, _LAST_DATA_RECV)[0]
    return milliseconds / 1000


_TCP_INFO: int | None = getattr(socket, "TCP_INFO", None)
_LAST_DATA_RECV = 52  # offset of tcpi_last_data_recv in Linux's struct tcp_info
_TCP_INFO_BYTES = _LAST_DATA_RECV + 4


@web.middleware
async def observe(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Times a request from when its bytes were received (``waited``) to the end of its
    answer, which is sent here; counts it; turns any error into a JSON body."""
    started = time.perf_counter() - waited(request)
    status = 500
    response: web.StreamResponse | None = None
    try:
        response = await _answer(request, handler)
        status = response.status
        if status >= 400 and request.body_exists and not request.content.is_eof():
            response.force_close()  # a body refused unread: this connection cannot go on
        # sent here rather than after the middleware (aiohttp then finds it sent), so that
        # the latency and the access log count the bytes written; a client gone by then is
        # no error of ours, as aiohttp itself treats it
        with contextlib.suppress(ConnectionError):
            await send(request, response)
        return response
    finally:
        resource = request.match_info.route.resource
        route = resource.canonical if resource is not None else "unmatched"
        count, latency = _series(request.method, route, status)
        count.inc()
        elapsed = time.perf_counter() - started
        latency.observe(elapsed)
        if request.app[SETTINGS].access_log:
            _access(request.method, route, status, elapsed, response)


def _access(
    method: str, route: str, status: int, elapsed: float, response: web.StreamResponse | None
) -> None:
    """The access log: the route template, never the path or the query (which may carry
    names and cursors) nor any header (which may carry keys); ``bytes`` as written, headers
    included. Probes, which orchestrators call every few seconds, are at DEBUG."""
    level = logging.DEBUG if route in _PROBES else logging.INFO
    if not ACCESS.isEnabledFor(level):
        return
    sent = response.body_length if response is not None else 0
    extra = {
        "method": method,
        "route": route,
        "status": status,
        "duration_ms": round(elapsed * 1000, 3),
        "bytes": sent,
    }
    ACCESS.log(level, "request", extra=extra)


@functools.cache
def _series(method: str, route: str, status: int) -> tuple[Any, Any]:
    """The labelled series of a request, looked up once (``labels`` costs ~4 us a request;
    the label values are bounded as the series themselves are)."""
    return REQUESTS.labels(method, route, str(status)), LATENCY.labels(method, route)


async def _answer(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except errors.ApiError as exc:
        return error_response(exc)
    except DomainError as exc:
        return error_response(errors.from_domain(exc))
    except StorageError as exc:
        repeated = request.app[STORAGE_TROUBLE].due()
        if repeated is not None:
            extra = {"error": str(exc), "path": request.path, "repeated": repeated}
            log.error("storage unavailable", extra=extra)
        return error_response(errors.ServiceUnavailable("Storage is unavailable, retry later"))
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        kind = _HTTP_ERRORS.get(exc.status, errors.BadDataError)
        return error_response(kind(exc.reason))
    except Exception:
        log.exception("unhandled error", extra={"path": request.path})
        return error_response(errors.InternalError("Internal error"))
