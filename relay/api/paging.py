"""Paged reads of the admin API: a ``limit`` in the query, and a ``next`` URL whose
``after`` cursor says where the page stopped (base64url of a compact JSON array, opaque to
callers). One place for both, so every paged read refuses bad input alike (400, JSON);
and one way to send a page, read and streamed a chunk at a time (``stream_page``)."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping, Sequence
from typing import Annotated, TypeVar

from aiohttp import web
from pydantic import Field, TypeAdapter, ValidationError

from relay.api.errors import BadDataError
from relay.api.responses import streamed
from relay.core.ingest_batch import whole_number
from relay.wire.common import MAX_NAME, ErrorDetail

T = TypeVar("T")
P = TypeVar("P")

NO_NUL = r"^[^\x00]*$"
"""What the text of a cursor matches: a cursor's values reach the database, and PostgreSQL
text cannot hold NUL (its error would be a 503, not the 400 of a bad cursor)."""
CursorName = Annotated[str, Field(min_length=1, max_length=MAX_NAME, pattern=NO_NUL)]
"""A name in a cursor, by the rules of names in bodies."""


def whole(value: str | None, name: str, most: int, default: int) -> int:
    """A query parameter's whole number from 1 to ``most``; ``default`` when absent."""
    if value is None:
        return default
    number = whole_number(value, most)
    if not number:
        raise BadDataError(f"{name} must be a whole number from 1 to {most}")
    return number


def name_filter(query: Mapping[str, str], name: str) -> str | None:
    """A query's filter by a name (``feature``, ``project``): as names are, 1 to
    ``MAX_NAME`` characters without NUL (PostgreSQL text cannot hold one: a 503 otherwise)."""
    value = query.get(name)
    if value is None or (1 <= len(value) <= MAX_NAME and "\x00" not in value):
        return value
    path = f"/query/{name}"
    message = f"The `{path}` property must be 1 to {MAX_NAME} characters without NUL"
    raise BadDataError(
        f"Request validation failed: {message}", [ErrorDetail(path=path, message=message)]
    )


def offset(value: str | None, most: int) -> int:
    """A query's ``offset`` (events, the archive): from 0 to ``most``; 0 when absent."""
    if value is None:
        return 0
    number = whole_number(value, most)
    if number is None:
        raise BadDataError(f"offset must be a whole number from 0 to {most}")
    return number


def next_url(request: web.Request, limit: int, position: Sequence[object]) -> str:
    """This request's URL (its filters kept) for the page after ``position``."""
    raw = json.dumps(list(position), separators=(",", ":")).encode()
    after = base64.urlsafe_b64encode(raw).decode().rstrip("=")
    return str(request.rel_url.update_query(limit=str(limit), after=after))


def position(after: str, shape: TypeAdapter[T]) -> T:
    """The position a ``next_url`` wrote, checked against ``shape``."""
    try:
        raw = base64.urlsafe_b64decode(after + "=" * (-len(after) % 4))
        return shape.validate_python(json.loads(raw))
    except (ValueError, TypeError, RecursionError, ValidationError):
        raise BadDataError("after must be the cursor of a page's next URL") from None


async def stream_page(
    request: web.Request,
    limit: int,
    after: P | None,
    read: Callable[[P | None, int], Awaitable[Sequence[T]]],
    position: Callable[[T], P],
    encode: Callable[[Sequence[T]], bytes],
    ends: tuple[bytes, Callable[[], bytes]],
    cursor: Callable[[P], Sequence[object]],
    chunk: int,
) -> web.StreamResponse:
    """Up to ``limit`` rows after ``after``, read ``chunk`` at a time (``read(after, n)``,
    along an index) and each chunk sent as ``encode`` continues the document from
    ``ends[0]``; ``ends[1]()`` closes what the rows opened, then comes ``"next"``: the URL
    of the next page, with ``cursor(position(last row))``, or null on the last page. Memory
    and the time the event loop is held per step are a chunk's, whatever ``limit`` is."""

    async def parts() -> AsyncGenerator[bytes, None]:
        out, at, left = ends[0], after, limit
        while True:
            wanted = min(chunk, left + 1)  # one past the page tells if another follows
            rows = await read(at, wanted)
            more = len(rows) > left
            rows = rows[:left]
            if rows:
                out += encode(rows)
                at, left = position(rows[-1]), left - len(rows)
            if more or len(rows) < wanted:
                url = next_url(request, limit, cursor(at)) if more and at is not None else None
                yield out + ends[1]() + b',"next":' + json.dumps(url).encode() + b"}"
                return
            yield out
            out = b""

    return await streamed(request, parts())


def array_items(dump: Callable[[Sequence[T]], bytes]) -> Callable[[Sequence[T]], bytes]:
    """An ``encode`` for ``stream_page`` of rows as the items of one JSON array, chunk after
    chunk: ``dump`` writes a chunk's items (comma-separated, no brackets)."""
    sent = False

    def encode(rows: Sequence[T]) -> bytes:
        nonlocal sent
        comma, sent = b"," if sent else b"", True
        return comma + dump(rows)

    return encode
