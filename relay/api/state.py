"""Typed application state both modes set: each handler reads only the keys it needs.
Each mode's own state sits in its package (``relay.central.state``, ``relay.edge.state``)."""

from __future__ import annotations

from typing import Protocol

from aiohttp import web

from relay.api.throttle import FailureLimit
from relay.core.catalog import Rendered
from relay.core.frontend import Frontends
from relay.core.ingest import Ingest
from relay.core.keys import KeyResolver, Principal
from relay.settings import Settings

SETTINGS = web.AppKey("settings", Settings)
KEY_RESOLVER = web.AppKey("key_resolver", KeyResolver)
AUTH_FAILURES = web.AppKey("auth_failures", FailureLimit)
INGEST = web.AppKey("ingest", Ingest)
READY = web.AppKey("ready", list[bool])
OPENAPI = web.AppKey("openapi", dict[str, object])
OPENAPI_BODY = web.AppKey("openapi_body", bytes)
"""The document as JSON, encoded once and shared by every request for it."""


class FrontendSource(Protocol):
    async def document(self, principal: Principal) -> Rendered:
        """The client features answer a frontend key's flags are evaluated from: its
        projects, its environment, segments as ids."""
        ...


FRONTEND_SOURCE = web.AppKey("frontend_source", FrontendSource)
FRONTENDS = web.AppKey("frontends", Frontends)
