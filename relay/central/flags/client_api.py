"""``GET /api/client/features[/{featureName}]``: the flags an SDK's key sees, answered from
the cache (``serving``); scopes, ETag and 304 as in ``relay.api.client_features``."""

from __future__ import annotations

from aiohttp import web

from relay.api import client_features
from relay.central.state import CLIENT_FEATURES


async def features(request: web.Request) -> web.Response:
    rendered = await request.app[CLIENT_FEATURES].answer(client_features.scope(request))
    return client_features.answer(request, rendered)


async def feature(request: web.Request) -> web.Response:
    name = request.match_info["featureName"]
    found = await request.app[CLIENT_FEATURES].feature(client_features.scope(request), name)
    return client_features.one(request, found)


ROUTES = client_features.routes(features, feature, (503,), "")
