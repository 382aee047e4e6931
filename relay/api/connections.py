"""What one connection can hold of the server: the memory of an answer a client does not
read, and the time it may leave it unread (open files: ``relay.api.open_files``).

A body handed to the transport whole is copied whole: aiohttp joins it to the headers and
asyncio keeps what the socket did not take in a buffer of its own. A client that asked for
a large answer and never read it pinned a copy: 300 such connections took a standalone from
254 MB to 1.6 GB. Every answer is therefore written from its one bytes object (shared by
every connection that asks for it) ``SLICE`` bytes at a time, each once the transport is
back under its high-water mark (asyncio's 64 KiB): a connection holds at most about two
slices, whatever the answer's size. A client that leaves that room unread for
``write_timeout`` seconds has its connection closed (as nginx's ``send_timeout``: between
two writes, not for the whole answer).
"""

from __future__ import annotations

import asyncio
import socket
import struct
from collections.abc import Awaitable

from aiohttp import web
from aiohttp.abc import AbstractStreamWriter
from aiohttp.helpers import must_be_empty_body
from aiohttp.http_writer import StreamWriter
from aiohttp.payload import Payload
from prometheus_client import Counter

from relay.api.state import SETTINGS

SLICE = 64 * 1024
"""The most of one answer handed to a connection's transport at once."""
_RESET = struct.pack("ii", 1, 0)
"""SO_LINGER on, for 0 s: closing the socket resets the connection, its queue dropped."""

WRITE_TIMEOUTS = Counter(
    "relay_http_write_timeouts_total",
    "Connections closed because the client read nothing of its answer within write_timeout",
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
