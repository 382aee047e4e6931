"""Typed application state of the central service's own handlers."""

from __future__ import annotations

from aiohttp import web

from relay.central.environments import EnvironmentStore
from relay.central.events import EventReader
from relay.central.flags.dependencies import DependencyService
from relay.central.flags.flags import FlagService
from relay.central.flags.segments import SegmentService
from relay.central.flags.serving import ClientFeaturesCache
from relay.central.flags.strategies import StrategyService
from relay.central.flags.tags import TagService
from relay.central.flags.transfer import TransferService
from relay.central.flags.variants import VariantService
from relay.central.keys import KeyService
from relay.central.projects import ProjectStore
from relay.central.usage import UsageReader
from relay.store.edge_reports import EdgeReportStore
from relay.store.impact import ImpactStore

PROJECTS = web.AppKey("projects", ProjectStore)
ENVIRONMENTS = web.AppKey("environments", EnvironmentStore)
EVENTS = web.AppKey("events", EventReader)
KEYS = web.AppKey("keys", KeyService)
USAGE = web.AppKey("usage", UsageReader)
FLAGS = web.AppKey("flags", FlagService)
STRATEGIES = web.AppKey("strategies", StrategyService)
SEGMENTS = web.AppKey("segments", SegmentService)
DEPENDENCIES = web.AppKey("dependencies", DependencyService)
VARIANTS = web.AppKey("variants", VariantService)
TAGS = web.AppKey("tags", TagService)
TRANSFER = web.AppKey("transfer", TransferService)
CLIENT_FEATURES = web.AppKey("client_features", ClientFeaturesCache)
EDGES = web.AppKey("edges", EdgeReportStore)
IMPACT = web.AppKey("impact", ImpactStore)
