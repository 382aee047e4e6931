"""The Unleash Proxy's paths at a relay (``relay proxy``, or ``proxy_client_keys``), under
``{proxy_base_path}/proxy``, answering as the Proxy (npm ``@unleash/proxy`` 1.4.19) did:

- ``GET``/``POST ''`` the enabled toggles for a context (a ``POST`` naming ``toggles``:
  those, enabled or not); ``/all`` every toggle, or 501 without ``ENABLE_ALL_ENDPOINT``
  (``disable_all_endpoint``); ``POST /client/metrics`` (and ``/all/client/metrics``),
  ``/client/register``: 200; ``GET /health``: ``ok``; ``/internal-backstage/prometheus``
  (relay's metrics); ``GET /client/features`` for ``proxy_server_keys``.
- **Keys.** Any string of ``proxy_client_keys`` (server keys too for metrics and
  registrations), in the header ``proxy_key_header``, compared whole (no ``Bearer``).
  They see the flags of the first ``client_tokens`` key (``relay proxy``:
  ``UNLEASH_API_TOKEN``), narrowed to ``proxy_project`` and ``proxy_name_prefix``. A wrong
  key is 401 saying which setting holds the right ones, and spends the caller's budget of
  failures (``relay.api.throttle``): 429 once spent, as for every key.
- **Readiness.** ``/health`` is 503 with the Proxy's words until this worker holds that
  key's flags (``READY``). The toggles are not held back by it: a worker that has no copy
  yet fetches one (or reads the one another worker stored), and answers 503 only when the
  upstream cannot give one, as the Proxy did before its first fetch.
- **Answers** carry ``Cache-Control: public, max-age=2`` and a weak ETag (304 to a ``GET``
  sending it back), as the Proxy's; errors are JSON bodies, as every error of relay's.
- **Counts** from browsers go through relay's durable buffer, under the SDK's own
  ``appName`` (the Proxy counted them again under its own, and lost them on a crash).

The context and the toggles' rules are ``relay.core.proxy``'s; the flags, their
evaluation and their JSON the Frontend API's (``FRONTEND_SOURCE``, ``FRONTENDS``).
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Sequence
from datetime import UTC, datetime

from aiohttp import web

from relay.api import backstage, client_features
from relay.api.auth import origin_of
from relay.api.body import read_json
from relay.api.client_address import caller_address
from relay.api.errors import (
    AuthenticationRequired,
    NotImplementedHere,
    ServiceUnavailable,
    TooManyRequests,
)
from relay.api.routing import Handler, Route
from relay.api.state import AUTH_FAILURES, FRONTEND_SOURCE, FRONTENDS, INGEST, READY
from relay.api.throttle import FAILURES, REFUSAL_DELAY, client_address
from relay.core.client_features import Rendered, Scope, inline_segments, projects_of
from relay.core.evaluate import Context
from relay.core.frontend_context import Fields
from relay.core.keys import Principal, hash_key, parse_key
from relay.core.proxy import (
    ALL_DISABLED,
    NOT_READY,
    body_context,
    defined_toggles,
    narrowed,
    proxy_context,
    query_context,
)
from relay.edge.state import FLAG_CACHE
from relay.settings import Settings
from relay.settings.usage import named
from relay.wire.client import ClientMetrics, ClientRegistration
from relay.wire.common import KeyType
from relay.wire.frontend import Toggles
from relay.wire.proxy import LookupToggles

CACHE_CONTROL = "public, max-age=2"


class Proxy:
    """What the Proxy's paths know: its keys, what they see, how contexts are completed."""

    def __init__(self, settings: Settings) -> None:
        api = parse_key(settings.client_tokens[0], KeyType.CLIENT)
        self.api_key, self.api = api.secret, api.principal
        environment = api.principal.environment
        project = settings.proxy_project
        projects = (project,) if project else api.principal.projects
        self._client = Principal(KeyType.FRONTEND, environment, projects, "a proxy client key")
        self._server = Principal(KeyType.CLIENT, environment, projects, "a proxy server key")
        self._clients = frozenset(hash_key(key) for key in settings.proxy_client_keys)
        self._servers = frozenset(hash_key(key) for key in settings.proxy_server_keys)
        self.header = settings.proxy_key_header
        self._names = settings.setting_names
        self.app_name = settings.app_name
        self.environment = settings.proxy_environment
        self.project = project
        self.prefix = settings.proxy_name_prefix
        self.all_endpoint = not settings.disable_all_endpoint
        self._narrowed: tuple[str, Rendered] | None = None  # the last answer, by its ETag

    async def principal(
        self, request: web.Request, client: bool = True, server: bool = False
    ) -> Principal:
        """The principal of the key in ``header``, if it is one of the keys the path takes,
        else 401 (429 once the caller's address has presented too many wrong ones)."""
        given = request.headers.get(self.header, "")
        digest = hash_key(given)
        if client and digest in self._clients:
            return self._client
        if server and digest in self._servers:
            return self._server
        settings = [
            named(setting, self._names)
            for setting, takes in (("proxy_client_keys", client), ("proxy_server_keys", server))
            if takes
        ]
        wanted = f"one of {' or '.join(settings)}, in header {self.header}"
        if not given:
            raise AuthenticationRequired(f"This endpoint requires a key: {wanted}")
        budget, address = request.app[AUTH_FAILURES], client_address(caller_address(request))
        try:
            charged = budget.spend(address, [given])
        except TooManyRequests:
            await asyncio.sleep(REFUSAL_DELAY)  # as relay.api.auth: a guesser waits
            raise
        budget.settle(address, [given], charged, invalid=1)
        FAILURES.inc()
        raise AuthenticationRequired(f"The key is not {wanted}")

    async def document(self, request: web.Request, principal: Principal) -> Rendered:
        """The flags a key sees, narrowed to ``proxy_name_prefix``: once per change."""
        rendered = await request.app[FRONTEND_SOURCE].document(principal)
        if self.prefix is None:
            return rendered
        kept = self._narrowed
        if kept is None or kept[0] != rendered.etag:
            kept = self._narrowed = (rendered.etag, narrowed(rendered, self.prefix))
        return kept[1]

    def context(
        self, request: web.Request, read: tuple[Fields, Fields, str | None], listed: bool
    ) -> Context:
        """``listed``: for the toggles a ``POST`` names, which the Proxy gave no random
        session."""
        return proxy_context(
            read,
            caller_address(request),
            datetime.now(UTC),
            self.app_name,
            self.environment,
            random_session=not listed,
        )


PROXY = web.AppKey("proxy", Proxy)


async def _lookup(request: web.Request) -> tuple[tuple[Fields, Fields, str | None], list[str]]:
    """The context, and the toggles a ``POST`` names."""
    if request.method == "POST":
        body = await read_json(request, LookupToggles, untyped=True)
        return body_context(body.context), body.toggles
    return query_context(request.rel_url.raw_query_string), []


def _toggles(everything: bool) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        proxy = request.app[PROXY]
        principal = await proxy.principal(request)
        read, names = await _lookup(request)
        if everything and not proxy.all_endpoint:
            raise NotImplementedHere(ALL_DISABLED)
        rendered = await proxy.document(request, principal)
        frontends = request.app[FRONTENDS]
        context = proxy.context(request, read, listed=bool(names))
        if names:
            body = defined_toggles(frontends.scoped(rendered), context, names)
            etag = f'"{hashlib.sha256(body).hexdigest()[:32]}"'
        else:
            answer = frontends.answer(rendered, context, everything)
            body, etag = answer.body, answer.etag
        headers = {"ETag": f"W/{etag}", "Cache-Control": CACHE_CONTROL}
        if request.method != "POST" and client_features.fresh(
            request.headers.get("If-None-Match"), etag
        ):
            return web.Response(status=304, headers=headers)
        return web.Response(body=body, content_type="application/json", headers=headers)

    return handler


async def metrics(request: web.Request) -> web.Response:
    """A browser SDK's counts: stored durably, then carried upstream (200, as the Proxy)."""
    principal = await request.app[PROXY].principal(request, server=True)
    body = await read_json(request, ClientMetrics, untyped=True)
    origin = origin_of(request.headers.get(request.app[PROXY].header, ""), principal)
    await request.app[INGEST].client_metrics(body, principal.environment, None, origin)
    return web.Response(status=200)


async def register(request: web.Request) -> web.Response:
    """Kept and sent upstream with the counts (the Proxy answered 200 and sent nothing)."""
    principal = await request.app[PROXY].principal(request, server=True)
    body = await read_json(request, ClientRegistration, untyped=True)
    await request.app[INGEST].register(body, principal.environment, None)
    return web.Response(status=200)


async def health(request: web.Request) -> web.Response:
    if not request.app[READY][0]:
        raise ServiceUnavailable(NOT_READY)
    return web.Response(text="ok")


async def features(request: web.Request) -> web.Response:
    """The client features answer of the keys' flags, for server SDKs and other proxies
    (the Proxy's, with segments: an SDK reading it needs them)."""
    proxy = request.app[PROXY]
    await proxy.principal(request, client=False, server=True)
    scope = Scope(
        proxy.api.environment,
        projects_of(proxy.api.projects, [proxy.project] if proxy.project else []),
        proxy.prefix,
        inline_segments(request.headers.get("Unleash-Client-Spec")),
    )
    rendered = await request.app[FLAG_CACHE].answer(proxy.api_key, proxy.api, scope)
    response = client_features.answer(request, rendered)
    response.headers["Cache-Control"] = CACHE_CONTROL
    return response


_KEYED = (400, 401, 413, 415, 429)
Body = type[LookupToggles] | type[ClientMetrics] | type[ClientRegistration] | None


def routes(settings: Settings) -> list[Route]:
    """The Proxy's paths under ``{proxy_base_path}/proxy`` (the root with a trailing
    slash too, as Express took it)."""
    base = f"{settings.proxy_base_path}/proxy"
    enabled, everything = _toggles(False), _toggles(True)
    toggles: dict[int, type[Toggles] | None] = {200: Toggles, 304: None}
    done: dict[int, type[Toggles] | None] = {200: None}
    lookup, ready, off = LookupToggles, (503,), (501, 503)
    table: list[
        tuple[str, str, Handler, str, Body, dict[int, type[Toggles] | None], tuple[int, ...]]
    ] = [
        ("GET", "", enabled, "Enabled toggles for the context in the query", None, toggles, ready),
        ("POST", "", enabled, "Enabled toggles, or those named", lookup, toggles, ready),
        ("GET", "/", enabled, "As GET ''", None, toggles, ready),
        ("POST", "/", enabled, "As POST ''", lookup, toggles, ready),
        ("GET", "/all", everything, "Every toggle for the query's context", None, toggles, off),
        ("POST", "/all", everything, "Every toggle, or those named", lookup, toggles, off),
        ("POST", "/client/metrics", metrics, "A browser SDK's counts", ClientMetrics, done, ()),
        ("POST", "/all/client/metrics", metrics, "As /client/metrics", ClientMetrics, done, ()),
        (
            "POST",
            "/client/register",
            register,
            "An SDK's registration",
            ClientRegistration,
            done,
            (),
        ),
        ("GET", "/health", health, "ok once the flags are held", None, done, ready),
        (
            "GET",
            "/client/features",
            features,
            "The flags, for proxy_server_keys",
            None,
            {200: None, 304: None},
            ready,
        ),
    ]
    found = [
        Route(
            method,
            base + tail,
            handler,
            f"{summary} (the Unleash Proxy's path; key in {settings.proxy_key_header})",
            "proxy",
            body=body,
            responses=responses,
            errors=(*_KEYED, *errors) if handler is not health else errors,
            operation=_operation(method, tail),
            proxy=True,
        )
        for method, tail, handler, summary, body, responses, errors in table
    ]
    found.append(
        Route(
            "GET",
            f"{base}/internal-backstage/prometheus",
            backstage.metrics,
            "Prometheus metrics (relay's), where the Unleash Proxy served its own",
            "proxy",
            responses={200: None},
            operation="proxyPrometheus",
            proxy=True,
        )
    )
    return found


def _operation(method: str, tail: str) -> str:
    words = [w for w in tail.split("/") if w] or ["toggles"]
    slash = "Slash" if tail == "/" else ""
    return "proxy" + method.title() + "".join(w.title() for w in words) + slash


def alongside(routes: Sequence[Route], proxy: Sequence[Route]) -> list[Route]:
    """``routes`` with the Proxy's: a path both serve is the Proxy's (``PROXY_BASE_PATH=/api``
    puts ``/api/proxy`` where relay's frontend paths have it)."""
    taken = {route.path for route in proxy}
    return [*proxy, *(route for route in routes if route.path not in taken)]
