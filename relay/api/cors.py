"""CORS, off unless origins are configured: the API is for SDKs and relays, not browsers, and
an open CORS policy would let any web page a developer visits use keys it can guess."""

from __future__ import annotations

from collections.abc import Iterable

from aiohttp import web
from aiohttp.typedefs import Middleware

from relay.api.routing import Handler

_ALLOWED_HEADERS = (
    "Authorization, Content-Type, If-None-Match, Unleash-Client-Spec, Idempotency-Key"
)


def cors_middleware(origins: Iterable[str]) -> Middleware:
    allowed = frozenset(origins)

    @web.middleware
    async def cors(request: web.Request, handler: Handler) -> web.StreamResponse:
        origin = request.headers.get("Origin")
        if origin is None or origin not in allowed:
            return await handler(request)
        if request.method == "OPTIONS" and "Access-Control-Request-Method" in request.headers:
            response: web.StreamResponse = web.Response(status=204)
            response.headers["Access-Control-Allow-Methods"] = "GET, POST, DELETE, OPTIONS"
            response.headers["Access-Control-Allow-Headers"] = _ALLOWED_HEADERS
            response.headers["Access-Control-Max-Age"] = "600"
        else:
            response = await handler(request)
        response.headers["Access-Control-Allow-Origin"] = origin
        response.headers["Vary"] = "Origin"
        return response

    return cors
