"""Routes as data: the app registers them and the OpenAPI document describes them, from
the same table, so the documentation cannot drift from what is served.

Every route is registered through ``add_routes`` (a GET route answers HEAD too), which
checks, before its handler runs, the key (routes with ``auth``) and then the path
parameters, by the rules of names in bodies (``relay.wire.common.Name``: 1..255
characters, no NUL, which PostgreSQL text cannot hold). Its expect handler sends nothing:
``100 Continue`` comes from ``relay.api.body`` once those checks passed and the body is
about to be read.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field

from aiohttp import web
from aiohttp.web_urldispatcher import AbstractResource
from pydantic import BaseModel

from relay.api.auth import PRINCIPAL, KeySource, authenticate, authorization
from relay.api.errors import BadDataError
from relay.wire.common import MAX_NAME, ErrorDetail, KeyType

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

_PARAMETER = re.compile(r"{(\w+)}")


@dataclass(frozen=True)
class Route:
    method: str
    path: str
    handler: Handler
    summary: str
    tag: str
    auth: frozenset[KeyType] | None = None
    """The key types the route accepts (``relay.api.auth``); None: no key needed."""
    body: type[BaseModel] | None = None
    responses: Mapping[int, type[BaseModel] | None] = field(default_factory=dict)
    """Success statuses and their body models; error statuses are added from ``auth``/``body``."""
    errors: Sequence[int] = ()
    operation: str | None = None
    """The OpenAPI ``operationId``; the handler's name when not given. Unique per document."""
    key_from: KeySource = authorization
    """Where the key is (routes with ``auth``): ``Authorization`` but for OFREP's paths."""
    error_body: type[BaseModel] | None = None
    """The body model of its errors, when it is more than Unleash's (``ErrorBody``)."""
    proxy: bool = False
    """One of the Unleash Proxy's paths (``relay.edge.proxy``): its handler checks the
    Proxy's keys itself, and browsers get the Proxy's CORS answers (``relay.api.cors``)."""

    @property
    def browser(self) -> bool:
        """Called from web pages (a frontend key, or a Proxy's key): answered with the
        frontend's CORS policy or the Proxy's (``relay.api.cors``), its preflight without a
        key."""
        return self.proxy or (self.auth is not None and KeyType.FRONTEND in self.auth)

    @property
    def parameters(self) -> list[str]:
        """Names of the path parameters, ``{projectId}`` in the path."""
        return _PARAMETER.findall(self.path)


BROWSER_RESOURCES = web.AppKey("browser_resources", set[AbstractResource])
"""The paths of ``Route.browser`` routes, as the router resolves them."""
PROXY_RESOURCES = web.AppKey("proxy_resources", set[AbstractResource])
"""Those of them that are the Unleash Proxy's (``Route.proxy``)."""


def add_routes(app: web.Application, routes: Sequence[Route]) -> None:
    for route in routes:
        browser = app.setdefault(PROXY_RESOURCES if route.proxy else BROWSER_RESOURCES, set())
        # aiohttp's default for ``{name}`` is ``[^{}/]+``: a feature or app named ``a{b}``
        # (valid, 1..255 characters of anything) could be written but never read back (404).
        path = _PARAMETER.sub(r"{\1:[^/]+}", route.path)
        if route.method == "GET":  # and HEAD, as every HTTP server must (RFC 9110, 9.1)
            added = app.router.add_get(path, _checked(route), expect_handler=_later)
        else:
            added = app.router.add_route(route.method, path, _checked(route), expect_handler=_later)
        if route.browser and added.resource not in browser:
            # a browser asks first (a preflight, answered by relay.api.cors): the path
            # must resolve for OPTIONS too, or the router answers 405 before anyone sees it
            browser.add(app.router.add_route("OPTIONS", path, _options).resource)
            browser.add(added.resource)


def _checked(route: Route) -> Handler:
    inner, required, parameters = route.handler, route.auth, route.parameters
    if required is None and not parameters:
        return inner
    presented = route.key_from

    async def handler(request: web.Request) -> web.StreamResponse:
        if required:
            request[PRINCIPAL] = await authenticate(request, required, presented)
        for name in parameters:
            _check_parameter(name, request.match_info[name])
        return await inner(request)

    return handler


def _check_parameter(name: str, value: str) -> None:
    if 1 <= len(value) <= MAX_NAME and "\x00" not in value:
        return
    path = f"/path/{name}"
    message = f"The `{path}` property must be 1 to {MAX_NAME} characters without NUL"
    raise BadDataError(
        f"Request validation failed: {message}", [ErrorDetail(path=path, message=message)]
    )


async def _options(request: web.Request) -> web.Response:
    """An OPTIONS that is no allowed preflight: nothing to say but no content."""
    return web.Response(status=204)


async def _later(request: web.Request) -> None:
    """``Expect: 100-continue`` is answered by ``relay.api.body`` (or by the final answer)."""
