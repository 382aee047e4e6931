"""``GET /api/client/features[/{featureName}]`` in relay mode: answered from the relay's
copy of its upstream's answers (``relay.edge.flags.cache``), never passed through. Scopes,
ETag and 304 as in the central service (``relay.api.client_features``)."""

from __future__ import annotations

from aiohttp import web

from relay.api import client_features
from relay.api.auth import PRINCIPAL
from relay.core.keys import strip_scheme
from relay.edge.state import FLAG_CACHE


async def features(request: web.Request) -> web.Response:
    scope = client_features.scope(request)  # a bad Unleash-Client-Spec is 400 before any fetch
    key = strip_scheme(request.headers["Authorization"])
    rendered = await request.app[FLAG_CACHE].answer(key, request[PRINCIPAL], scope)
    return client_features.answer(request, rendered)


async def feature(request: web.Request) -> web.Response:
    scope = client_features.scope(request)
    key = strip_scheme(request.headers["Authorization"])
    name = request.match_info["featureName"]
    found = await request.app[FLAG_CACHE].feature(key, request[PRINCIPAL], scope, name)
    return client_features.one(request, found)


ROUTES = client_features.routes(
    features, feature, (403, 503), " (from the relay's copy of its upstream's flags)"
)
