"""Routes as data: the app registers them and the OpenAPI document describes them, from
the same table, so the documentation cannot drift from what is served.

A route's expect handler sends nothing: ``100 Continue`` comes from ``relay.api.body``, once
the key (routes with ``auth``), the announced size and the encoding have been checked and
the body is about to be read."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field

from aiohttp import web
from pydantic import BaseModel

from relay.api.auth import PRINCIPAL, authenticate
from relay.wire.common import KeyType

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass(frozen=True)
class Route:
    method: str
    path: str
    handler: Handler
    summary: str
    tag: str
    auth: KeyType | None = None
    body: type[BaseModel] | None = None
    responses: Mapping[int, type[BaseModel] | None] = field(default_factory=dict)
    """Success statuses and their body models; error statuses are added from ``auth``/``body``."""
    errors: Sequence[int] = ()
    operation: str | None = None
    """The OpenAPI ``operationId``; the handler's name when not given. Unique per document."""


# aiohttp's default for ``{name}`` is ``[^{}/]+``: a feature or app named ``a{b}`` (valid, 1..255
# characters of anything) could be written but never read back (404).
_ANY_SEGMENT = re.compile(r"{(\w+)}")


def add_routes(app: web.Application, routes: Sequence[Route]) -> None:
    for route in routes:
        handler = route.handler if route.auth is None else _authenticated(route.handler, route.auth)
        path = _ANY_SEGMENT.sub(r"{\1:[^/]+}", route.path)
        app.router.add_route(route.method, path, handler, expect_handler=_later)


def _authenticated(inner: Handler, required: KeyType) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        request[PRINCIPAL] = await authenticate(request, required)
        return await inner(request)

    return handler


async def _later(request: web.Request) -> None:
    """``Expect: 100-continue`` is answered by ``relay.api.body`` (or by the final answer)."""
