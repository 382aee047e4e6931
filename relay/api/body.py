"""Reading a request: its JSON body parsed once, from bytes, straight into a wire model,
and its ``Idempotency-Key``; 400, 408, 413 or 415 with a JSON body otherwise."""

from __future__ import annotations

import asyncio
from typing import TypeVar

from aiohttp import web
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

Model = TypeVar("Model", bound=BaseModel)

MAX_IDEMPOTENCY_KEY = 255


def _is_json(content_type: str) -> bool:
    return content_type == "application/json" or (
        content_type.startswith("application/") and content_type.endswith("+json")
    )


async def read_json(request: web.Request, model: type[Model]) -> Model:
    if not _is_json(request.content_type):
        raise UnsupportedMediaType(
            f"Expected a JSON body (Content-Type: application/json), got {request.content_type}"
        )
    settings = request.app[SETTINGS]
    try:
        async with asyncio.timeout(settings.body_timeout):
            raw = await request.read()
    except TimeoutError:
        raise RequestTimeout(
            f"The request body did not arrive within {settings.body_timeout:g} seconds"
        ) from None
    except web.HTTPRequestEntityTooLarge:
        limit = settings.max_body_bytes
        raise ContentTooLarge(f"Request body is larger than the limit of {limit} bytes") from None
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
