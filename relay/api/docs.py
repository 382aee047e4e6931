"""``GET /docs/openapi.json``: the document built once by ``build_app``."""

from __future__ import annotations

from aiohttp import web

from relay.api.routing import Route
from relay.api.state import OPENAPI


async def openapi(request: web.Request) -> web.Response:
    return web.json_response(request.app[OPENAPI])


ROUTES = [
    Route(
        "GET", "/docs/openapi.json", openapi, "This OpenAPI document", "docs", responses={200: None}
    )
]
