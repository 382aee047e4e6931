"""``GET /api/client/features`` so SDKs pointed at the central service start cleanly.

This service does not own feature toggles (the spec does not cover them), so the answer is
an empty toggle set in Unleash's format, with an ETag so SDKs poll with 304s.
"""

from __future__ import annotations

import hashlib
import json

from aiohttp import web

from relay.api.routing import Route
from relay.wire.common import KeyType

_BODY = json.dumps({"version": 2, "features": [], "segments": []}).encode()
_ETAG = '"' + hashlib.sha256(_BODY).hexdigest()[:27] + '"'


async def features(request: web.Request) -> web.Response:
    if request.headers.get("If-None-Match") == _ETAG:
        return web.Response(status=304, headers={"ETag": _ETAG})
    return web.Response(body=_BODY, content_type="application/json", headers={"ETag": _ETAG})


ROUTES = [
    Route(
        "GET",
        "/api/client/features",
        features,
        "Feature toggles (none are owned here)",
        "client",
        auth=KeyType.CLIENT,
        responses={200: None, 304: None},
    ),
]
