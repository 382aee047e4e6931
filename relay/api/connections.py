"""What one connection can hold of the server: the memory of an answer a client does not
read, the time it may leave it unread, and what happens when there are more connections
than open files.

A body handed to the transport whole is copied whole: aiohttp joins it to the headers and
asyncio keeps what the socket did not take in a buffer of its own. A client that asked for
a large answer and never read it pinned a copy: 300 such connections took a standalone from
254 MB to 1.6 GB. Every answer is therefore written from its one bytes object (shared by
every connection that asks for it) ``SLICE`` bytes at a time, each once the transport is
back under its high-water mark (asyncio's 64 KiB): a connection holds at most about two
slices, whatever the answer's size. A client that leaves that room unread for
``write_timeout`` seconds has its connection closed (as nginx's ``send_timeout``: between
two writes, not for the whole answer).

Every connection holds a file descriptor, and the usual soft limit (1,024) refuses
connections long before memory or the hard limit would: it is raised to the hard limit.
When the process runs out of them all the same, asyncio reports every failed ``accept``
with a traceback, many times a second for as long as it lasts (14,787 times in 20 s, 7.6 MB
of log). They are counted, and logged once per ``ACCEPT_LOG_INTERVAL`` with their number.
"""

from __future__ import annotations

import asyncio
import logging
import resource
import socket
import struct
import time
from collections.abc import Awaitable
from typing import Any

from aiohttp import web
from aiohttp.abc import AbstractStreamWriter
from aiohttp.helpers import must_be_empty_body
from aiohttp.http_writer import StreamWriter
from aiohttp.payload import Payload
from prometheus_client import Counter

from relay.api.state import SETTINGS

log = logging.getLogger(__name__)

SLICE = 64 * 1024
"""The most of one answer handed to a connection's transport at once."""
ACCEPT_LOG_INTERVAL = 10.0
_RESET = struct.pack("ii", 1, 0)
"""SO_LINGER on, for 0 s: closing the socket resets the connection, its queue dropped."""
_ACCEPT_FAILED = "socket.accept() out of system resource"

WRITE_TIMEOUTS = Counter(
    "relay_http_write_timeouts_total",
    "Connections closed because the client read nothing of its answer within write_timeout",
)
ACCEPT_ERRORS = Counter(
    "relay_accept_errors_total",
    "Connections the server could not accept for lack of a resource (open files, memory)",
)


class _SharedBody(Payload):
    """An answer's bytes, written to one connection in slices without being copied."""

    _value: bytes

    def __init__(self, body: bytes, request: web.Request) -> None:
        super().__init__(body)
        self._size = len(body)
        self._transport = request.transport
        self._timeout = request.app[SETTINGS].write_timeout

    def decode(self, encoding: str = "utf-8", errors: str = "strict") -> str:
        return self._value.decode(encoding, errors)

    async def write(self, writer: AbstractStreamWriter) -> None:
        await self.write_with_length(writer, None)

    async def write_with_length(
        self, writer: AbstractStreamWriter, content_length: int | None
    ) -> None:
        body = memoryview(self._value)[:content_length]
        for start in range(0, len(body), SLICE):
            await _slice(writer, body[start : start + SLICE], self._timeout, self._transport)


async def write_in_slices(request: web.Request, response: web.StreamResponse) -> None:
    """``on_response_prepare``: every whole answer with a body is written in slices, so
    that the write timeout applies to all of them, small answers pipelined too."""
    if not isinstance(response, web.Response) or response.compression:
        return
    body = response.body
    if isinstance(body, (bytes, bytearray)) and body:
        response.body = _SharedBody(bytes(body), request)


async def send(request: web.Request, response: web.StreamResponse) -> None:
    """The answer prepared and ended. A body in slices has its waits timed slice by slice
    (``_slice``); an answer without one (HEAD, 304, 204) or a stream's end has its headers
    handed to the transport here, and the wait for them to drain timed as a slice's:
    aiohttp's end of an answer waits for that drain without a limit, so a client that
    pipelined HEADs and read nothing held its connection, and its handler, for good."""
    writer = await response.prepare(request)
    if isinstance(writer, StreamWriter) and not _in_slices(request, response):
        writer.send_headers()  # nothing if they are sent already (a stream)
        if writer.protocol.writing_paused:
            seconds = request.app[SETTINGS].write_timeout
            await _within(seconds, request.transport, writer.drain())
    await response.write_eof()


def _in_slices(request: web.Request, response: web.StreamResponse) -> bool:
    """Whether ``response``'s body is written by ``_SharedBody`` (whose last slice leaves
    nothing for the end of the answer to wait for)."""
    return (
        isinstance(response, web.Response)
        and isinstance(response.body, _SharedBody)
        and not must_be_empty_body(request.method, response.status)
    )


async def write_part(request: web.Request, response: web.StreamResponse, *parts: bytes) -> None:
    """Parts of a streamed answer, in order, each written ``SLICE`` bytes at a time from
    the bytes given (a stream's event body is one object shared by every stream it goes
    to: never copied whole per connection), each slice within the write timeout."""
    seconds = request.app[SETTINGS].write_timeout
    for part in parts:
        if len(part) <= SLICE:
            await _within(seconds, request.transport, response.write(part))
            continue
        view = memoryview(part)
        for start in range(0, len(view), SLICE):
            await _within(seconds, request.transport, response.write(view[start : start + SLICE]))


async def _slice(
    writer: AbstractStreamWriter,
    chunk: memoryview,
    seconds: float,
    transport: asyncio.Transport | None,
) -> None:
    """One slice handed to the transport, then, only if that put the transport over its
    high-water mark, the wait for it to drain, within ``seconds``. Almost every answer
    fits the socket's buffer: timing each slice (a timer armed and cancelled per write)
    was a measurable share of a small answer's CPU (bench/README.md, Flags per request)."""
    if not isinstance(writer, StreamWriter):  # another writer: its own write waits
        await _within(seconds, transport, writer.write(chunk))
        return
    await writer.write(chunk, drain=False)
    if writer.protocol.writing_paused:
        await _within(seconds, transport, writer.drain())


async def _within(
    seconds: float, transport: asyncio.Transport | None, write: Awaitable[None]
) -> None:
    """Wait for ``write`` (the transport to have room again) at most ``seconds``,
    then drop the connection and what it still holds: with a plain close, asyncio would
    wait for the client to read its buffer, and the kernel would keep sending its own (as
    nginx's ``reset_timedout_connection``, the connection is reset instead)."""
    try:
        async with asyncio.timeout(seconds):
            await write
    except TimeoutError:
        WRITE_TIMEOUTS.inc()
        if transport is not None:
            sock = transport.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _RESET)
            transport.abort()
        raise ConnectionResetError("the client read nothing within write_timeout") from None


class _AcceptErrors:
    """The event loop's exception handler: failed accepts counted and logged once per
    interval, with how many there were since the last line (the connections wait in the
    listen queue meanwhile); anything else as asyncio would."""

    def __init__(self) -> None:
        self._next = 0.0
        self._count = 0

    def __call__(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if context.get("message") != _ACCEPT_FAILED:
            loop.default_exception_handler(context)
            return
        ACCEPT_ERRORS.inc()
        self._count += 1
        now = time.monotonic()
        if now < self._next:
            return
        extra = {"error": str(context.get("exception")), "count": self._count}
        log.error("connections not accepted: %s", _ACCEPT_FAILED, extra=extra)
        self._next, self._count = now + ACCEPT_LOG_INTERVAL, 0


async def open_files(app: web.Application) -> None:
    """``on_startup``, after the mode's resources opened (an error there is one line): the
    open-file limit raised, failed accepts counted on the loop that serves ``app``."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            log.info("open files", extra={"limit": hard, "was": soft})
        except (ValueError, OSError):  # an unlimited hard limit: more than the kernel allows
            log.info("open files", extra={"limit": soft, "hard": "unlimited"})
    asyncio.get_running_loop().set_exception_handler(_AcceptErrors())
