"""The Frontend API of both modes (browser and mobile SDKs): ``GET``/``POST /api/frontend``
(the enabled flags, evaluated for the caller's context), ``/api/frontend/all`` (every flag,
unless ``disable_all_endpoint``), ``/api/frontend/features/{featureName}``, and the legacy
``/api/proxy`` paths. A frontend key's flags come from its mode's ``FrontendSource``: the
central service's flags, or a relay's copy of its upstream's (so answers go on through an
outage); evaluating and rendering them is ``relay.core.frontend``'s.

Answers carry an ETag (304 to ``If-None-Match``) and ``Cache-Control: no-cache``, as
Unleash's do.
"""

from __future__ import annotations

from datetime import UTC, datetime

from aiohttp import web

from relay.api.auth import FRONTEND_KEYS, PRINCIPAL
from relay.api.body import read_json
from relay.api.client_address import caller_address
from relay.api.client_features import fresh
from relay.api.errors import NotFoundError
from relay.api.routing import Handler, Route
from relay.api.state import FRONTEND_SOURCE, FRONTENDS
from relay.core.evaluate import Context
from relay.core.frontend_context import context_of, from_model, from_query
from relay.wire.frontend import FrontendRequest, Toggle, Toggles


async def _context(request: web.Request) -> Context:
    if request.method == "POST":
        fields, properties = from_model((await read_json(request, FrontendRequest)).context)
    else:
        fields, properties = from_query(request.rel_url.raw_query_string)
    return context_of(fields, properties, caller_address(request), datetime.now(UTC))


def _toggles(everything: bool) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        context = await _context(request)
        rendered = await request.app[FRONTEND_SOURCE].document(request[PRINCIPAL])
        answer = request.app[FRONTENDS].answer(rendered, context, everything)
        headers = {"ETag": answer.etag, "Cache-Control": "no-cache"}
        if fresh(request.headers.get("If-None-Match"), answer.etag):
            return web.Response(status=304, headers=headers)
        return web.Response(body=answer.body, content_type="application/json", headers=headers)

    return handler


async def feature(request: web.Request) -> web.Response:
    context = await _context(request)
    rendered = await request.app[FRONTEND_SOURCE].document(request[PRINCIPAL])
    name = request.match_info["featureName"]
    found = request.app[FRONTENDS].scoped(rendered).one(context, name)
    if found is None:
        raise NotFoundError(f"Could not find feature flag {name}")
    headers = {"Cache-Control": "no-cache"}
    return web.Response(body=found, content_type="application/json", headers=headers)


def routes(all_endpoint: bool, errors: tuple[int, ...]) -> list[Route]:
    """The routes, under ``/api/frontend`` and ``/api/proxy`` (``/all`` with
    ``all_endpoint``); ``errors``: the mode's statuses besides those of key and body."""
    enabled, everything = _toggles(False), _toggles(True)
    table: list[tuple[str, Handler, str, type[Toggles] | type[Toggle]]] = [
        ("", enabled, "The enabled flags of the key, evaluated for a context", Toggles),
        ("/features/{featureName}", feature, "One flag evaluated for a context", Toggle),
    ]
    if all_endpoint:
        table.append(("/all", everything, "Every flag of the key, evaluated", Toggles))
    found: list[Route] = []
    for base in ("/api/frontend", "/api/proxy"):
        legacy = " (the old Unleash Proxy's path)" if base == "/api/proxy" else ""
        for tail, handler, summary, model in table:
            if base == "/api/proxy" and tail.startswith("/features"):
                continue  # the proxy had none
            for method in ("GET", "POST"):
                operation = f"{method.lower()}{base.replace('/api/', '_')}{tail}"
                found.append(
                    Route(
                        method,
                        base + tail,
                        handler,
                        summary + (" in the query" if method == "GET" else " in the body") + legacy,
                        "frontend",
                        auth=FRONTEND_KEYS,
                        body=FrontendRequest if method == "POST" else None,
                        responses={200: model, 304: None} if model is Toggles else {200: model},
                        errors=(404, *errors) if model is Toggle else errors,
                        operation=_operation(operation),
                    )
                )
    return found


def _operation(raw: str) -> str:
    """An ``operationId`` from a method and path: ``get_frontend/all`` -> ``getFrontendAll``."""
    words = [w for w in raw.replace("/", "_").replace("{", "").replace("}", "").split("_") if w]
    return words[0] + "".join(w[:1].upper() + w[1:] for w in words[1:])
