"""Typed application state of the central service's own handlers."""

from __future__ import annotations

from aiohttp import web

from relay.central.keys import KeyService
from relay.central.projects import ProjectStore
from relay.central.usage import UsageReader

PROJECTS = web.AppKey("projects", ProjectStore)
KEYS = web.AppKey("keys", KeyService)
USAGE = web.AppKey("usage", UsageReader)
