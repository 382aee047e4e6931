"""``GET /api/client/features[/{featureName}]``: the flags an SDK's key sees, in Unleash's
format, answered from the cache (``serving``) with an ETag and 304 on ``If-None-Match``.

The key decides the environment and the projects; the ``project`` query parameters narrow
the projects further (never widen them), ``namePrefix`` filters by name, and the SDK's
``Unleash-Client-Spec`` decides whether segments come as ids (4.2.0 and later) or inlined
into constraints.
"""

from __future__ import annotations

import functools
import json
from urllib.parse import parse_qsl

from aiohttp import web

from relay.api.auth import PRINCIPAL
from relay.api.errors import NotFoundError
from relay.api.routing import Route
from relay.central.state import CLIENT_FEATURES
from relay.core.client_features import Scope, inline_segments, projects_of
from relay.wire.client_features import ClientFeature, ClientFeatures
from relay.wire.common import KeyType


def _scope(request: web.Request) -> Scope:
    principal = request[PRINCIPAL]
    spec = request.headers.get("Unleash-Client-Spec")
    return _scope_of(
        principal.environment, principal.projects, request.rel_url.raw_query_string, spec
    )


@functools.lru_cache(maxsize=1024)
def _scope_of(environment: str, granted: tuple[str, ...], query: str, spec: str | None) -> Scope:
    """Memoised: SDKs poll with the same key, query and headers every time."""
    pairs = parse_qsl(query, keep_blank_values=True)
    prefix = next((value for key, value in pairs if key == "namePrefix"), None)
    return Scope(
        environment=environment,
        projects=projects_of(granted, [value for key, value in pairs if key == "project"]),
        name_prefix=prefix or None,
        inline_segments=inline_segments(spec),
    )


def _fresh(if_none_match: str | None, etag: str) -> bool:
    """The client holds this ETag (``If-None-Match`` may list several, or be weak)."""
    if if_none_match is None or if_none_match == etag:
        return if_none_match is not None
    return any(tag.strip().removeprefix("W/") == etag for tag in if_none_match.split(","))


async def features(request: web.Request) -> web.Response:
    rendered = await request.app[CLIENT_FEATURES].answer(_scope(request))
    headers = {"ETag": rendered.etag}
    if _fresh(request.headers.get("If-None-Match"), rendered.etag):
        return web.Response(status=304, headers=headers)
    return web.Response(body=rendered.body, content_type="application/json", headers=headers)


async def feature(request: web.Request) -> web.Response:
    name = request.match_info["featureName"]
    found = await request.app[CLIENT_FEATURES].feature(_scope(request), name)
    if found is None:
        raise NotFoundError(f"Could not find feature flag {name}")
    return web.Response(text=json.dumps(found), content_type="application/json")


ROUTES = [
    Route(
        "GET",
        "/api/client/features",
        features,
        "Feature flags for an SDK: the key's projects and environment (ETag, 304)",
        "client",
        auth=KeyType.CLIENT,
        responses={200: ClientFeatures, 304: None},
        errors=(400, 503),
    ),
    Route(
        "GET",
        "/api/client/features/{featureName}",
        feature,
        "One feature flag as an SDK gets it",
        "client",
        auth=KeyType.CLIENT,
        responses={200: ClientFeature},
        errors=(400, 404, 503),
    ),
]
