"""Typed application state both modes set: each handler reads only the keys it needs.
Each mode's own state sits in its package (``relay.central.state``, ``relay.edge.state``)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Protocol

from aiohttp import web

from relay.api.shared import Shared
from relay.api.throttle import FailureLimit
from relay.core.catalog import Rendered, Scope
from relay.core.delta import Delta
from relay.core.frontend import Frontends
from relay.core.ingest import Ingest
from relay.core.keys import KeyResolver, Principal
from relay.settings import Settings

SETTINGS = web.AppKey("settings", Settings)
SHARED = web.AppKey("shared", Shared)
KEY_RESOLVER = web.AppKey("key_resolver", KeyResolver)
AUTH_FAILURES = web.AppKey("auth_failures", FailureLimit)
INGEST = web.AppKey("ingest", Ingest)
READY = web.AppKey("ready", list[bool])


class OpenApi:
    """The OpenAPI document of the routes, put together when first asked for (``/docs``):
    most services are never asked, and a relay counts its megabytes."""

    def __init__(self, build: Callable[[], dict[str, object]]) -> None:
        self._build = build
        self._document: dict[str, object] | None = None
        self._body: bytes | None = None

    def document(self) -> dict[str, object]:
        if self._document is None:
            self._document = self._build()
        return self._document

    def body(self) -> bytes:
        """The document as JSON, encoded once and shared by every request for it."""
        if self._body is None:
            self._body = json.dumps(self.document()).encode()
        return self._body


OPENAPI = web.AppKey("openapi", OpenApi)


class FrontendSource(Protocol):
    async def document(self, principal: Principal) -> Rendered:
        """The client features answer a frontend key's flags are evaluated from: its
        projects, its environment, segments as ids."""
        ...


FRONTEND_SOURCE = web.AppKey("frontend_source", FrontendSource)


class EvaluationSource(Protocol):
    """The flags OFREP evaluates for a key (``relay.api.ofrep``): a frontend key's are the
    Frontend API's; a client key's, its own scope's, as ``/api/client/features`` has them."""

    async def flags(self, key: str, principal: Principal) -> Rendered:
        """The client features answer of ``key``'s scope: its projects, its environment,
        segments as ids."""
        ...

    async def next_change(self) -> None:
        """Returns after the next change of any flags held (a key's answer may be the same:
        the caller compares)."""
        ...


EVALUATION_SOURCE = web.AppKey("evaluation_source", EvaluationSource)


class KeyDeltas(Protocol):
    """The events of the flags one key sees (``DeltaSource.for_key``)."""

    async def delta(self, scope: Scope, since: int | None) -> Delta:
        """The events that bring a client at revision ``since`` (None: nothing held) up to
        the current revision in ``scope``: a hydration when ``since`` is not held."""
        ...

    async def changed(self, revision: int) -> None:
        """Returns once the flags are past ``revision`` (at a relay: at another one)."""
        ...


class DeltaSource(Protocol):
    """Where ``/api/client/delta`` and ``/api/client/streaming`` get their events: each
    mode's flags (``relay.api.delta``)."""

    def for_key(self, key: str, principal: Principal) -> KeyDeltas:
        """The deltas of ``key``'s flags: the standalone's revisions are the same for
        every key, a relay's are those of the copy the key's scope reads."""
        ...


DELTA_SOURCE = web.AppKey("delta_source", DeltaSource)


class Waiting(Protocol):
    """What keeps a relay's counts from leaving, said by ``/ready`` without making it
    unready (its flags are served all the same): ``relay.edge.metrics.keys``."""

    @property
    def waiting(self) -> frozenset[str]:
        """Environments whose counts wait for a key."""
        ...


COUNTS_WAITING = web.AppKey("counts_waiting", Waiting)
FRONTENDS = web.AppKey("frontends", Frontends)
