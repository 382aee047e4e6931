"""Reading a request: its body read once, within the limits (size, time, encoding), parsed
from bytes straight into a wire model, and its ``Idempotency-Key``; 400, 408, 413 or 415
with a JSON body otherwise.

Nothing of a body is read, and no ``100 Continue`` is sent, before what can be checked
without it has been: the key (``relay.api.routing`` authenticates before the handler runs),
the announced ``Content-Length`` and the ``Content-Encoding``. The server does not decode
bodies itself (``relay.api.application``): an encoding is undone here, after the whole
compressed body arrived, so a bad one is a 400 that leaves the connection usable.
"""

from __future__ import annotations

import asyncio
import logging
import zlib
from typing import TypeVar

from aiohttp import HttpVersion11, web
from pydantic import BaseModel, ValidationError

from relay.api.errors import (
    BadDataError,
    ContentTooLarge,
    RequestTimeout,
    UnsupportedMediaType,
    from_validation,
)
from relay.api.state import SETTINGS
from relay.wire.common import ErrorDetail

log = logging.getLogger(__name__)

Model = TypeVar("Model", bound=BaseModel)

MAX_IDEMPOTENCY_KEY = 255
BODY = web.RequestKey("body", bytes)
"""The body as ``read_body`` read and decoded it: the stream it came from is consumed."""

# What Unleash (express body-parser) accepts. No Unleash SDK or Unleash Edge compresses what
# it posts; gzip and deflate are decoded for other clients, anything else is a 415.
_ENCODINGS = {"identity": None, "gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}
# A UTF-8 byte-order mark before JSON (some Windows tools write one) is read past, as
# Unleash's body parser does; RFC 8259 lets a parser ignore it.
_BOM = b"\xef\xbb\xbf"


def _is_json(content_type: str) -> bool:
    return content_type == "application/json" or (
        content_type.startswith("application/") and content_type.endswith("+json")
    )


async def read_json(request: web.Request, model: type[Model], untyped: bool = False) -> Model:
    """``untyped``: a body without ``Content-Type`` is read as JSON (the Unleash Proxy's
    paths, whose ``requireContentType`` did so); otherwise it is 415."""
    if not (untyped and "Content-Type" not in request.headers) and not _is_json(
        request.content_type
    ):
        raise UnsupportedMediaType(
            f"Expected a JSON body (Content-Type: application/json), got {request.content_type}"
        )
    raw = await read_body(request)
    if raw.startswith(_BOM):
        raw = raw[len(_BOM) :]
    try:
        parsed = model.model_validate_json(raw)
    except ValidationError as exc:
        raise from_validation(exc) from None
    if b"\\u0000" in raw:  # JSON carries NUL only escaped: the precise walk is rarely needed
        path = _nul_path(parsed.model_dump(), "/body")
        if path is not None:
            message = f"The `{path}` property must not contain NUL characters"
            raise BadDataError(
                f"Request validation failed: {message}", [ErrorDetail(path=path, message=message)]
            )
    return parsed


async def read_kept(request: web.Request, model: type[Model], limit: int) -> Model:
    """``read_json`` for a body kept as a record: 413 unless what is kept of it (its JSON
    without the fields the model ignores) fits ``limit`` bytes, so a stranger's record is
    bounded by what the service keeps, whatever else the body carried."""
    parsed = await read_json(request, model)
    if len(parsed.model_dump_json().encode()) > limit:
        raise ContentTooLarge(f"The body as kept is larger than the limit of {limit} bytes")
    return parsed


async def read_body(request: web.Request) -> bytes:
    """The whole body, decoded: at most ``max_body_bytes`` before and after decoding (413, at
    once when ``Content-Length`` says so), within ``body_timeout`` (408)."""
    settings = request.app[SETTINGS]
    limit = settings.max_body_bytes
    wbits = _encoding(request.headers.get("Content-Encoding", "identity"))
    if request.content_length is not None and request.content_length > limit:
        raise _too_large(limit)
    await _continue(request)
    chunks: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout(settings.body_timeout):
            async for chunk in request.content.iter_any():
                size += len(chunk)
                if size > limit:
                    raise _too_large(limit)
                chunks.append(chunk)
    except TimeoutError:
        raise RequestTimeout(
            f"The request body did not arrive within {settings.body_timeout:g} seconds"
        ) from None
    except ConnectionError:
        log.debug("client closed the connection mid-body", extra={"path": request.path})
        raise BadDataError("The connection was closed before the whole body arrived") from None
    except web.RequestPayloadError as exc:  # e.g. a malformed chunked encoding
        raise _undecodable(f"its framing is malformed ({exc})") from None
    raw = b"".join(chunks)
    request[BODY] = raw if wbits is None else _decode(raw, wbits, limit)
    return request[BODY]


def _encoding(header: str) -> int | None:
    """zlib's ``wbits`` for the body's encoding; None for none."""
    name = header.strip().lower() or "identity"
    if name not in _ENCODINGS:
        message = f"Content-Encoding {header[:40]!r} is not supported: use gzip, deflate or none"
        raise UnsupportedMediaType(
            message, [ErrorDetail(path="/header/Content-Encoding", message=message)]
        )
    return _ENCODINGS[name]


def _decode(raw: bytes, wbits: int, limit: int) -> bytes:
    """Undo gzip or deflate, producing at most one byte past ``limit`` however small the input
    (a compressed body can expand a thousand times)."""
    decoder = zlib.decompressobj(wbits)
    try:
        decoded = decoder.decompress(raw, limit + 1)
    except zlib.error as exc:
        raise _undecodable(f"it is not valid compressed data ({exc})") from None
    if len(decoded) > limit:
        raise _too_large(limit, "decoded ")
    if not decoder.eof:
        raise _undecodable("the compressed data ends early")
    if decoder.unused_data:
        raise _undecodable("data follows the end of the compressed data")
    return decoded


def _undecodable(why: str) -> BadDataError:
    message = f"The request body cannot be decoded: {why}"
    return BadDataError(message, [ErrorDetail(path="/body", message=message)])


def _too_large(limit: int, what: str = "") -> ContentTooLarge:
    return ContentTooLarge(f"Request body {what}is larger than the limit of {limit} bytes")


async def _continue(request: web.Request) -> None:
    """``100 Continue`` for a client that waits for it, now that the body will be read (the
    routes' own expect handler sends nothing: ``relay.api.routing``)."""
    expect = request.headers.get("Expect", "").lower()
    if request.version >= HttpVersion11 and expect == "100-continue":
        await request.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        request.writer.output_size = 0  # as aiohttp's own handler: the answer has not begun


def _nul_path(value: object, path: str) -> str | None:
    """JSON pointer of the first string (or key) holding NUL, which no store can keep."""
    if isinstance(value, str):
        return path if "\x00" in value else None
    if isinstance(value, dict):
        for key, item in value.items():
            found = _nul_path(key, f"{path}/{key}") or _nul_path(item, f"{path}/{key}")
            if found is not None:
                return found
    if isinstance(value, list | tuple):
        for index, item in enumerate(value):
            found = _nul_path(item, f"{path}/{index}")
            if found is not None:
                return found
    return None


def idempotency_key(request: web.Request) -> str | None:
    value = request.headers.get("Idempotency-Key", "").strip()
    if len(value) > MAX_IDEMPOTENCY_KEY or not all(" " < c < "\x7f" for c in value):
        message = f"Idempotency-Key must be 1 to {MAX_IDEMPOTENCY_KEY} visible ASCII characters"
        raise BadDataError(message, [ErrorDetail(path="/header/Idempotency-Key", message=message)])
    return value or None
