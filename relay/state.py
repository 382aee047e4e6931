"""Typed application state: each handler reads only the keys it needs."""

from __future__ import annotations

from aiohttp import web

from relay.auth import KeyResolver
from relay.ingest import Ingest
from relay.keys import KeyService
from relay.settings import Settings
from relay.store.metrics import MetricsStore
from relay.store.projects import ProjectStore
from relay.upstream import UpstreamClient

SETTINGS = web.AppKey("settings", Settings)
KEY_RESOLVER = web.AppKey("key_resolver", KeyResolver)
INGEST = web.AppKey("ingest", Ingest)
KEYS = web.AppKey("keys", KeyService)
PROJECTS = web.AppKey("projects", ProjectStore)
METRICS = web.AppKey("metrics", MetricsStore)
READY = web.AppKey("ready", list[bool])
OPENAPI = web.AppKey("openapi", dict[str, object])
UPSTREAM = web.AppKey("upstream", UpstreamClient)
