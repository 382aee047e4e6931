"""Typed application state of the relay's own handlers."""

from __future__ import annotations

from aiohttp import web

from relay.edge.flags.cache import FlagCache
from relay.edge.upstream import UpstreamClient
from relay.store.edge_reports import EdgeReportStore

UPSTREAM = web.AppKey("upstream", UpstreamClient)
FLAG_CACHE = web.AppKey("flag_cache", FlagCache)
EDGE_REPORTS = web.AppKey("edge_reports", EdgeReportStore)
