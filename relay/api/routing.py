"""Routes as data: the app registers them and the OpenAPI document describes them, from
the same table, so the documentation cannot drift from what is served."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from aiohttp import web
from pydantic import BaseModel, ValidationError

from relay.auth import Principal, strip_scheme
from relay.errors import (
    AuthenticationRequired,
    BadDataError,
    ContentTooLarge,
    NoAccessError,
    RequestTimeout,
    UnsupportedMediaType,
    from_validation,
)
from relay.models import ErrorDetail, TokenType
from relay.state import KEY_RESOLVER, SETTINGS

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Model = TypeVar("Model", bound=BaseModel)

PRINCIPAL = web.RequestKey("principal", Principal)


@dataclass(frozen=True)
class Route:
    method: str
    path: str
    handler: Handler
    summary: str
    tag: str
    auth: TokenType | None = None
    body: type[BaseModel] | None = None
    responses: Mapping[int, type[BaseModel] | None] = field(default_factory=dict)
    """Success statuses and their body models; error statuses are added from ``auth``/``body``."""
    errors: Sequence[int] = ()


# aiohttp's default for ``{name}`` is ``[^{}/]+``: a feature or app named ``a{b}`` (valid, 1..255
# characters of anything) could be written but never read back (404).
_ANY_SEGMENT = re.compile(r"{(\w+)}")


def add_routes(app: web.Application, routes: Sequence[Route]) -> None:
    for route in routes:
        handler = route.handler if route.auth is None else _authenticated(route.handler, route.auth)
        app.router.add_route(route.method, _ANY_SEGMENT.sub(r"{\1:[^/]+}", route.path), handler)


def _authenticated(inner: Handler, required: TokenType) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        request[PRINCIPAL] = await authenticate(request, required)
        return await inner(request)

    return handler


async def authenticate(request: web.Request, required: TokenType) -> Principal:
    header = request.headers.get("Authorization", "")
    key = strip_scheme(header)
    if not key:
        raise AuthenticationRequired(
            "This endpoint requires an API token. Please add an authorization header"
            " to your request with a valid token"
        )
    principal = await request.app[KEY_RESOLVER].resolve(key)
    if principal is None:
        raise AuthenticationRequired("The provided API token is invalid or has expired")
    if principal.type is not required:
        if required is TokenType.CLIENT:
            raise NoAccessError("invalid token: expected a different token type for this endpoint")
        raise NoAccessError("You need an admin API token to perform this action")
    return principal


def _is_json(content_type: str) -> bool:
    return content_type == "application/json" or (
        content_type.startswith("application/") and content_type.endswith("+json")
    )


async def read_json(request: web.Request, model: type[Model]) -> Model:
    """Parse the body once, from bytes, straight into ``model``: 415, 413 or 400 otherwise."""
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


MAX_IDEMPOTENCY_KEY = 255


def idempotency_key(request: web.Request) -> str | None:
    value = request.headers.get("Idempotency-Key", "").strip()
    if len(value) > MAX_IDEMPOTENCY_KEY or not all(" " < c < "\x7f" for c in value):
        message = f"Idempotency-Key must be 1 to {MAX_IDEMPOTENCY_KEY} visible ASCII characters"
        raise BadDataError(message, [ErrorDetail(path="/header/Idempotency-Key", message=message)])
    return value or None
