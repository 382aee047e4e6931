"""Paged reads of the admin API: a ``limit`` in the query, and a ``next`` URL whose
``after`` cursor says where the page stopped (base64url of a compact JSON array, opaque to
callers). One place for both, so every paged read refuses bad input alike (400, JSON)."""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from typing import TypeVar

from aiohttp import web
from pydantic import TypeAdapter, ValidationError

from relay.api.errors import BadDataError
from relay.core.domain import whole_number

T = TypeVar("T")


def whole(value: str | None, name: str, most: int, default: int) -> int:
    """A query parameter's whole number from 1 to ``most``; ``default`` when absent."""
    if value is None:
        return default
    number = whole_number(value, most)
    if not number:
        raise BadDataError(f"{name} must be a whole number from 1 to {most}")
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
