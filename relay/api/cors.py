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

The Unleash Proxy's paths (``relay.edge.proxy``) answer as the Proxy's ``cors`` package did,
from its variables (``proxy_cors_*``, origins from ``frontend_cors_origins``): every
``OPTIONS`` is a preflight, answered whatever its origin (without
``Access-Control-Allow-Origin`` for one not allowed), and ``*`` is said on answers to
requests without ``Origin`` too.

A preflight (``OPTIONS`` with ``Access-Control-Request-Method``) from an allowed origin is
answered 204 here, before any key is asked for; the other answers (errors too) get their
headers as they are sent (``on_response_prepare``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from aiohttp import web
from aiohttp.typedefs import Middleware

from relay.api.routing import BROWSER_RESOURCES, PROXY_RESOURCES, Handler
from relay.settings import Settings


@dataclass(frozen=True)
class CorsPolicy:
    origins: frozenset[str]
    methods: str
    headers: str | None  # None: those the preflight asks for
    max_age: int
    expose: str | None = None
    credentials: bool = False
    preflight_status: int = 204
    every_preflight: bool = False  # the Proxy's: any OPTIONS, any origin, * without Origin

    def allowed(self, origin: str) -> str | None:
        """The ``Access-Control-Allow-Origin`` for ``origin``; None: not allowed."""
        if "*" in self.origins:
            return "*"
        return origin if origin in self.origins else None


def frontend_policy(origins: Iterable[str]) -> CorsPolicy:
    return CorsPolicy(frozenset(origins), "GET, HEAD, POST, OPTIONS", None, 86400, "ETag")


def proxy_policy(settings: Settings) -> CorsPolicy:
    """The Unleash Proxy's paths: its ``CORS_*`` variables, as ``relay proxy`` reads them."""
    return CorsPolicy(
        frozenset(settings.frontend_cors_origins),
        settings.proxy_cors_methods,
        settings.proxy_cors_allowed_headers,
        settings.proxy_cors_max_age,
        settings.proxy_cors_exposed_headers or None,
        settings.proxy_cors_credentials,
        settings.proxy_cors_preflight_status,
        every_preflight=True,
    )


def api_policy(origins: Iterable[str]) -> CorsPolicy:
    return CorsPolicy(
        frozenset(origins),
        "GET, POST, DELETE, OPTIONS",
        "Authorization, Content-Type, If-None-Match, Unleash-Client-Spec, Idempotency-Key",
        600,
    )


POLICIES = web.AppKey("cors_policies", tuple[CorsPolicy, CorsPolicy, CorsPolicy])
"""(frontend paths, the Unleash Proxy's paths, every other path)."""


def _policy(request: web.Request) -> tuple[CorsPolicy, bool]:
    """The request's policy, and whether it is a browser's (frontend or Proxy paths)."""
    frontend, proxy, api = request.app[POLICIES]
    resource = request.match_info.route.resource
    if resource in request.app.get(PROXY_RESOURCES, ()):
        return proxy, True
    browser = resource in request.app.get(BROWSER_RESOURCES, ())
    return (frontend, True) if browser else (api, False)


def cors_middleware() -> Middleware:
    @web.middleware
    async def preflight(request: web.Request, handler: Handler) -> web.StreamResponse:
        origin = request.headers.get("Origin")
        if request.method != "OPTIONS":
            return await handler(request)
        policy, _ = _policy(request)
        if not policy.every_preflight and (
            origin is None
            or "Access-Control-Request-Method" not in request.headers
            or policy.allowed(origin) is None
        ):
            return await handler(request)
        response = web.Response(status=policy.preflight_status)
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
    if policy.every_preflight and origin is None and "*" in policy.origins:
        origin = "*"  # the Proxy's cors package said * to every request
    allowed = None if origin is None else policy.allowed(origin)
    if allowed is None and not policy.every_preflight:
        return
    if policy.credentials:
        response.headers["Access-Control-Allow-Credentials"] = "true"
    if policy.expose is not None:
        response.headers["Access-Control-Expose-Headers"] = policy.expose
    if allowed is not None:
        response.headers["Access-Control-Allow-Origin"] = allowed
