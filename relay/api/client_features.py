"""``GET /api/client/features[/{featureName}]`` as both modes answer it: the scope a request
asks for, ETag and 304, and the routes with their documentation. Where the answers come
from is each mode's own: the central service's flags (``relay.central.flags.client_api``),
a relay's copy of its upstream's answers (``relay.edge.flags.api``).

The key decides the environment and the projects; the ``project`` query parameters narrow
the projects further (never widen them), ``namePrefix`` filters by name, and the SDK's
``Unleash-Client-Spec`` decides whether segments come as ids (4.2.0 and later) or inlined
into constraints.
"""

from __future__ import annotations

import functools
from urllib.parse import parse_qsl

from aiohttp import web
from prometheus_client import Counter

from relay.api.auth import CLIENT_KEYS, PRINCIPAL
from relay.api.errors import NotFoundError
from relay.api.routing import Handler, Route
from relay.core.client_features import Catalog, Rendered, Scope, inline_segments, projects_of
from relay.wire.client_features import ClientFeature, ClientFeatures

RENDERS = Counter(
    "relay_client_features_renders_total",
    "Client features rendered: every flag of a scope into a catalog (kind full), or an"
    " answer put together from a catalog's fragments (kind derived)",
    ["kind"],
)
FRAGMENTS = Counter(
    "relay_client_features_fragments_total", "Flag fragments put together into answers"
)


def built(catalog: Catalog) -> Catalog:
    """Counts a catalog built: the costly render, once per scope and change of flags."""
    RENDERS.labels("full").inc()
    return catalog


def derived(rendered: Rendered) -> Rendered:
    """Counts an answer put together: its work is its features' fragments."""
    RENDERS.labels("derived").inc()
    FRAGMENTS.inc(rendered.features)
    return rendered


def scope(request: web.Request) -> Scope:
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


def fresh(if_none_match: str | None, etag: str) -> bool:
    """The client holds this ETag (``If-None-Match`` may list several, or be weak)."""
    if if_none_match is None or if_none_match == etag:
        return if_none_match is not None
    return any(tag.strip().removeprefix("W/") == etag for tag in if_none_match.split(","))


def answer(request: web.Request, rendered: Rendered) -> web.Response:
    """The answer's bytes with its ETag, or 304 when the client holds that ETag."""
    headers = {"ETag": rendered.etag}
    if fresh(request.headers.get("If-None-Match"), rendered.etag):
        return web.Response(status=304, headers=headers)
    return web.Response(body=rendered.body, content_type="application/json", headers=headers)


def one(request: web.Request, found: bytes | None) -> web.Response:
    """One flag's answer (its fragment of the scope's answer), 404 when the key does not
    see it."""
    if found is None:
        raise NotFoundError(f"Could not find feature flag {request.match_info['featureName']}")
    return web.Response(body=found, content_type="application/json")


def routes(features: Handler, feature: Handler, errors: tuple[int, ...], where: str) -> list[Route]:
    """The two routes, answered by ``features`` and ``feature``; ``errors``: the statuses
    besides 400 (a ``Unleash-Client-Spec`` that is no SemVer) and those of the key."""
    return [
        Route(
            "GET",
            "/api/client/features",
            features,
            f"Feature flags for an SDK: the key's projects and environment (ETag, 304){where}",
            "client",
            auth=CLIENT_KEYS,
            responses={200: ClientFeatures, 304: None},
            errors=(400, *errors),
        ),
        Route(
            "GET",
            "/api/client/features/{featureName}",
            feature,
            f"One feature flag as an SDK gets it{where}",
            "client",
            auth=CLIENT_KEYS,
            responses={200: ClientFeature},
            errors=(400, 404, *errors),
        ),
    ]
