"""Calls the relay passes to the upstream unchanged (the caller's key, body and answer):
admin add-environment. (SDKs' flags are served from the relay's cache: ``flag_api``.)

Only the configured upstream is ever contacted, at a path built here from a fixed template;
redirects are never followed. Without an ``Authorization`` header the answer is 401 locally,
before any of the body is read; a body is read as every other (``relay.api.body``: size
limit, ``body_timeout``, decoded) and passed on unencoded.
"""

from __future__ import annotations

from urllib.parse import quote

from aiohttp import web

from relay.api.body import read_body
from relay.api.errors import AuthenticationRequired, BadGateway, GatewayTimeout, NotFoundError
from relay.api.routing import Route
from relay.edge.state import UPSTREAM
from relay.edge.upstream import Forwarded, UpstreamUnavailable
from relay.wire.admin import ProjectEnvironment

_REQUEST_HEADERS = ("Authorization", "Content-Type", "Accept", "User-Agent")
_RESPONSE_HEADERS = ("Content-Type", "Cache-Control", "Vary")


def _segment(request: web.Request, name: str) -> str:
    value = request.match_info[name]
    if value in (".", ".."):
        raise NotFoundError("Not found")
    return quote(value, safe="")


async def _forward(request: web.Request, method: str, path: str, operation: str) -> web.Response:
    key = request.headers.get("Authorization", "").strip()
    if not key or not key.isascii():
        raise AuthenticationRequired(
            "This endpoint requires an API token. Please add an authorization header"
            " to your request with a valid token"
        )
    # header values that are not ASCII are dropped: they cannot be sent on unchanged
    headers = {
        h: v for h in _REQUEST_HEADERS if (v := request.headers.get(h)) is not None and v.isascii()
    }
    body = await read_body(request) if request.body_exists else None
    if request.rel_url.raw_query_string:  # as sent: decoding would turn %23 into a fragment
        path = f"{path}?{request.rel_url.raw_query_string}"
    try:
        answer = await request.app[UPSTREAM].forward(method, path, headers, body, operation)
    except UpstreamUnavailable as exc:
        if exc.timed_out:
            raise GatewayTimeout("The upstream did not answer in time") from None
        raise BadGateway("The upstream cannot be reached") from None
    return _response(answer)


def _response(answer: Forwarded) -> web.Response:
    response = web.Response(status=answer.status, body=answer.body or None)
    for name in _RESPONSE_HEADERS:
        if name in answer.headers:
            response.headers[name] = answer.headers[name]
    return response


async def add_environment(request: web.Request) -> web.Response:
    project = _segment(request, "projectId")
    return await _forward(request, "POST", f"/api/admin/projects/{project}/environments", "admin")


ROUTES = [
    Route(
        "POST",
        "/api/admin/projects/{projectId}/environments",
        add_environment,
        "Add an environment to a project (passed to the upstream)",
        "admin",
        body=ProjectEnvironment,
        responses={200: None},
        # what the upstream answers is passed on unchanged; 502 and 504 are the relay's
        errors=(401, 502, 504, 400, 403, 404, 409, 413, 415),
    ),
]
