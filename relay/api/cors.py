"""CORS: two policies, chosen by the route a request reaches (``Route.browser``).

The frontend paths are called from web pages with a frontend key, which is public (shipped
in browser code): like Unleash, they answer any origin by default (``frontend_cors_origins``
``*``), expose ``ETag`` (the browser SDK sends it back in ``If-None-Match``), allow the
headers the preflight asks for (the browser SDK's ``authorization``, ``content-type``,
``unleash-sdk``, ``unleash-appname``, ``unleash-connection-id``, ``if-none-match`` and its
``customHeaders``), and tell browsers to keep a preflight's answer a day. Credentials are
never allowed: the API takes keys, not cookies.

Every other path has ``cors_origins``, off by default: that API is for SDKs and relays, not
browsers, and an open CORS policy would let any web page a developer visits use keys it
can guess. Neither setting reaches the other's paths.

A preflight (``OPTIONS`` with ``Access-Control-Request-Method``) from an allowed origin is
answered 204 here, before any key is asked for; the other answers (errors too) get their
headers as they are sent (``on_response_prepare``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from aiohttp import web
from aiohttp.typedefs import Middleware

from relay.api.routing import BROWSER_RESOURCES, Handler


@dataclass(frozen=True)
class CorsPolicy:
    origins: frozenset[str]
    methods: str
    headers: str | None  # None: those the preflight asks for
    max_age: int
    expose: str | None = None

    def allowed(self, origin: str) -> str | None:
        """The ``Access-Control-Allow-Origin`` for ``origin``; None: not allowed."""
        if "*" in self.origins:
            return "*"
        return origin if origin in self.origins else None


def frontend_policy(origins: Iterable[str]) -> CorsPolicy:
    return CorsPolicy(frozenset(origins), "GET, HEAD, POST, OPTIONS", None, 86400, "ETag")


def api_policy(origins: Iterable[str]) -> CorsPolicy:
    return CorsPolicy(
        frozenset(origins),
        "GET, POST, DELETE, OPTIONS",
        "Authorization, Content-Type, If-None-Match, Unleash-Client-Spec, Idempotency-Key",
        600,
    )


POLICIES = web.AppKey("cors_policies", tuple[CorsPolicy, CorsPolicy])
"""(frontend paths, every other path)."""


def _policy(request: web.Request) -> tuple[CorsPolicy, bool]:
    """The request's policy, and whether it is the frontend's."""
    frontend, api = request.app[POLICIES]
    browser = request.match_info.route.resource in request.app.get(BROWSER_RESOURCES, ())
    return (frontend, True) if browser else (api, False)


def cors_middleware() -> Middleware:
    @web.middleware
    async def preflight(request: web.Request, handler: Handler) -> web.StreamResponse:
        origin = request.headers.get("Origin")
        if (
            origin is None
            or request.method != "OPTIONS"
            or "Access-Control-Request-Method" not in request.headers
        ):
            return await handler(request)
        policy, _ = _policy(request)
        if policy.allowed(origin) is None:
            return await handler(request)
        response = web.Response(status=204)
        response.headers["Access-Control-Allow-Methods"] = policy.methods
        asked = request.headers.get("Access-Control-Request-Headers")
        if policy.headers is not None or asked:
            response.headers["Access-Control-Allow-Headers"] = policy.headers or asked or ""
        response.headers["Access-Control-Max-Age"] = str(policy.max_age)
        return response

    return preflight


async def cors_headers(request: web.Request, response: web.StreamResponse) -> None:
    """``on_response_prepare``: the headers of the request's policy, on every answer."""
    policy, browser = _policy(request)
    origin = request.headers.get("Origin")
    if not policy.origins or (origin is None and not browser):
        return
    # the answer depends on Origin (echoed, or none): caches must keep it apart
    vary = response.headers.get("Vary")
    response.headers["Vary"] = f"{vary}, Origin" if vary else "Origin"
    allowed = None if origin is None else policy.allowed(origin)
    if allowed is None:
        return
    response.headers["Access-Control-Allow-Origin"] = allowed
    if policy.expose is not None:
        response.headers["Access-Control-Expose-Headers"] = policy.expose
