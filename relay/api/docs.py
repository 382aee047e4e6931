"""``GET /docs``: the API for people, drawn by Redoc from ``GET /docs/openapi.json`` (the
document built once by ``serve_routes``).

Redoc's standalone bundle (MIT, Rebilly) is vendored from npm (``redoc`` 2.5.1) under
``static/`` with its licence files, and served from here: the page needs no CDN and works
offline. Redoc renders with script and injects its own styles, so this page's
Content-Security-Policy allows this site's scripts, inline styles and blob workers (its
search), and nothing from elsewhere. The one address elsewhere the bundle loads, the logo
of its "API docs by Redocly" link, is replaced as the file is read (the vendored file stays
as published): an image that does not load, which Redoc then leaves out.

Each file is read once and its bytes served to every request (1,000 connections that never
read the 911 kB bundle pinned 870 MB when each read its own copy)."""

from __future__ import annotations

import functools
from importlib import resources

from aiohttp import web

from relay.api.routing import Route
from relay.api.state import OPENAPI

_PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>relay API</title>
</head>
<body>
<noscript>This page draws the OpenAPI document with script:
<a href="/docs/openapi.json">/docs/openapi.json</a> is the document itself.</noscript>
<redoc spec-url="/docs/openapi.json"></redoc>
<script src="/docs/redoc.standalone.js"></script>
</body>
</html>
"""
_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline';"
    " img-src 'self' data:; font-src 'self' data:; connect-src 'self';"
    " worker-src 'self' blob:; frame-ancestors 'none'; base-uri 'none'"
)
_ELSEWHERE = {b"https://cdn.redoc.ly/redoc/logo-mini.svg": b"data:,"}
"""What the bundle would load from another origin, and what it loads instead."""
FILES = {
    "redoc.standalone.js": "application/javascript",
    "redoc.standalone.js.LICENSE.txt": "text/plain",
    "redoc-LICENSE.txt": "text/plain",
}


async def openapi(request: web.Request) -> web.Response:
    return web.Response(body=request.app[OPENAPI].body(), content_type="application/json")


async def page(request: web.Request) -> web.Response:
    headers = {"Content-Security-Policy": _CSP}
    return web.Response(text=_PAGE, content_type="text/html", charset="utf-8", headers=headers)


async def asset(request: web.Request) -> web.Response:
    name = request.path.removeprefix("/docs/")
    headers = {"Cache-Control": "public, max-age=86400"}
    return web.Response(body=_file(name), content_type=FILES[name], headers=headers)


@functools.cache
def _file(name: str) -> bytes:
    body = resources.files("relay.api").joinpath("vendor", name).read_bytes()
    for elsewhere, instead in _ELSEWHERE.items():
        body = body.replace(elsewhere, instead)
    return body


ROUTES = [
    Route(
        "GET", "/docs/openapi.json", openapi, "This OpenAPI document", "docs", responses={200: None}
    ),
    Route("GET", "/docs", page, "This API, for people (Redoc)", "docs", responses={200: None}),
    *(
        Route(
            "GET",
            f"/docs/{name}",
            asset,
            f"The API page's {name}",
            "docs",
            responses={200: None},
            operation=f"docsAsset{i}",
        )
        for i, name in enumerate(FILES)
    ),
]
