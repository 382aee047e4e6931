"""Typed application state of the relay's own handlers."""

from __future__ import annotations

from typing import Protocol

from aiohttp import web

from relay.core.client_features import Rendered, Scope
from relay.core.keys import Principal
from relay.edge.upstream import UpstreamClient
from relay.store.edge_reports import EdgeReportStore


class FlagSource(Protocol):
    """Where ``/api/client/features`` gets a key's flags: the relay's copies of its
    upstream's (``relay.edge.flags.cache``), or offline mode's file
    (``relay.edge.flags.bootstrap``)."""

    async def answer(self, key: str, principal: Principal, scope: Scope) -> Rendered: ...

    async def feature(
        self, key: str, principal: Principal, scope: Scope, name: str
    ) -> bytes | None: ...


UPSTREAM = web.AppKey("upstream", UpstreamClient)
FLAG_CACHE = web.AppKey("flag_cache", FlagSource)
EDGE_REPORTS = web.AppKey("edge_reports", EdgeReportStore)
