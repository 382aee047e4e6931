"""The central service (standalone mode) put together: its database, stores, key service,
flag services and their cache, routes and jobs. ``relay.app`` calls ``build`` and
``initialise`` when the mode is standalone."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from collections.abc import AsyncIterator, Awaitable, Callable

from aiohttp import web

from relay.api import client, delta, frontend, frontend_metrics, ofrep, streaming, validate
from relay.api.application import new_application, serve_routes
from relay.api.auth import warn_short_secrets
from relay.api.jobs import every
from relay.api.shared import Shared
from relay.api.state import DELTA_SOURCE, FRONTEND_SOURCE, FRONTENDS, INGEST, KEY_RESOLVER, READY
from relay.central import counts, edges, events_api, impact, keys_api, projects_api, usage_api
from relay.central.database import central_database, opened
from relay.central.environment_records import SqlEnvironmentRecords
from relay.central.environments import EnvironmentStore
from relay.central.event_records import EventLog
from relay.central.events import EventReader
from relay.central.flags import admin_api, client_api, model_api, transfer_api
from relay.central.flags.dependencies import DependencyService
from relay.central.flags.dependency_records import DependencyRecords
from relay.central.flags.flag_records import FlagRecords
from relay.central.flags.flags import FlagService
from relay.central.flags.frontend_source import ServedFlags
from relay.central.flags.segment_records import SegmentRecords
from relay.central.flags.segments import SegmentService
from relay.central.flags.served_deltas import ServedDeltas
from relay.central.flags.serving import (
    REVISION_CHANNEL,
    STREAM_POLL_INTERVAL,
    ClientFeaturesCache,
)
from relay.central.flags.strategies import StrategyService
from relay.central.flags.tag_records import TagRecords
from relay.central.flags.tags import TagService
from relay.central.flags.transfer import ImportStorage, TransferService
from relay.central.flags.transfer_records import TransferRecords
from relay.central.flags.variants import VariantService
from relay.central.flags.writes import Writer
from relay.central.key_records import SqlKeyRecords
from relay.central.key_store import KeyStore, kept_current
from relay.central.keys import KeyService
from relay.central.project_records import SqlProjectRecords
from relay.central.projects import ProjectStore
from relay.central.state import (
    CLIENT_FEATURES,
    DEPENDENCIES,
    EDGES,
    ENVIRONMENTS,
    EVENTS,
    FLAGS,
    IMPACT,
    KEYS,
    PROJECTS,
    SEGMENTS,
    STRATEGIES,
    TAGS,
    TRANSFER,
    USAGE,
    VARIANTS,
)
from relay.central.usage import UsageReader
from relay.central.usage_records import SqlUsageRecords
from relay.central.web import sessions as web_sessions
from relay.central.web.routes import add_web
from relay.core.errors import StorageError
from relay.core.frontend import Frontends
from relay.core.ingest import Ingest
from relay.core.keys import KeySpec
from relay.settings import Settings
from relay.store.edge_reports import EdgeReportStore
from relay.store.fold import Folder
from relay.store.impact import ImpactStore
from relay.store.metrics import INSTANCES_KEPT
from relay.store.postgres import PostgresDatabase
from relay.store.sql import Database
from relay.wire.common import KeyType

log = logging.getLogger(__name__)

Context = Callable[[web.Application], AsyncIterator[None]]


def key_service(db: Database, settings: Settings) -> KeyService:
    """The key service of the command line and of start-up (its changes logged)."""
    return KeyService(KeyStore(SqlKeyRecords(db, EventLog(db, settings.event_log_kept))))


async def initialise(settings: Settings) -> None:
    """Migrations and configured and first-start keys, done once before several workers
    start (each repeats the checks and finds nothing to do)."""
    db = central_database(settings)
    try:
        await db.open()
    except StorageError as exc:
        if not settings.uses_postgres:
            raise
        log.error("database unavailable at start-up", extra={"error": str(exc)})
        return  # the workers answer 503 and retry, as one process would
    try:
        await _provision_keys(key_service(db, settings), settings)
    finally:
        await db.close()


def build(settings: Settings, shared: Shared) -> web.Application:
    """The stores and services first, then the state handlers read, then the resources in
    the order they start (each ends in the reverse order: the database last), then the
    routes. ``worker`` 0, the leader, alone folds on a timer and prunes (and warns about
    weak configured keys, once)."""
    app = new_application(settings, shared)
    leader = shared.worker == 0
    db = central_database(settings)
    events = EventLog(db, settings.event_log_kept)
    key_store = KeyStore(SqlKeyRecords(db, events), shared)
    keys = KeyService(key_store)
    served = ClientFeaturesCache(db, shared=shared)
    writer = Writer(db, served.committed, events=events)
    metrics = counts.metrics_store(db, settings)
    folder = Folder(db, INSTANCES_KEPT)

    app[KEY_RESOLVER] = key_store
    app[KEYS] = keys
    app[PROJECTS] = ProjectStore(SqlProjectRecords(db, writer), key_store.poll)
    app[ENVIRONMENTS] = EnvironmentStore(SqlEnvironmentRecords(db, writer))
    app[EVENTS] = EventReader(events)
    app[USAGE] = UsageReader(SqlUsageRecords(db), folder.caught_up)
    app[INGEST] = Ingest(metrics)
    app[FLAGS] = FlagService(writer, FlagRecords())
    app[STRATEGIES] = StrategyService(writer)
    app[SEGMENTS] = SegmentService(writer, SegmentRecords())
    app[DEPENDENCIES] = DependencyService(writer, DependencyRecords())
    app[VARIANTS] = VariantService(writer)
    app[TAGS] = TagService(writer, TagRecords())
    imports = ImportStorage(FlagRecords(), TagRecords(), DependencyRecords())
    app[TRANSFER] = TransferService(writer, TransferRecords(), imports)
    flags = ServedFlags(served)
    app[CLIENT_FEATURES] = served
    app[FRONTEND_SOURCE] = flags
    app[DELTA_SOURCE] = ServedDeltas(served)
    streaming.add_streams(app)
    app[FRONTENDS] = Frontends()
    app[EDGES] = EdgeReportStore(db, edges.BOUNDS)
    app[IMPACT] = ImpactStore(db, folder.caught_up)
    ofrep.add_ofrep(app, flags)
    sessions = add_web(app, db, settings)

    app.cleanup_ctx.append(
        opened(db, settings, app[READY], _keys_ready(keys, key_store, settings, leader))
    )
    app.cleanup_ctx.append(counts.folding(folder, leader))
    app.cleanup_ctx.append(counts.committing(metrics))  # its last commits before the fold ends
    app.cleanup_ctx.append(kept_current(key_store))
    app.cleanup_ctx.append(_flag_revisions(db, served))
    app.cleanup_ctx.append(web_sessions.expiring(sessions))
    if leader:
        app.cleanup_ctx.extend(counts.pruning(metrics))
        app.cleanup_ctx.append(edges.pruning(app[EDGES]))
        app.cleanup_ctx.append(impact.pruning(app[IMPACT]))
    app.cleanup_ctx.append(ofrep.counting)  # ends before the database closes

    routes = [*client.ROUTES, *frontend_metrics.ROUTES, *client_api.ROUTES, *delta.ROUTES]
    routes += [*streaming.ROUTES, *keys_api.ROUTES, *usage_api.ROUTES, *projects_api.ROUTES]
    routes += [*events_api.ROUTES, *admin_api.ROUTES, *model_api.ROUTES, *edges.ROUTES]
    routes += [*impact.ROUTES, *transfer_api.ROUTES]
    routes += frontend.routes(not settings.disable_all_endpoint, (503,))
    routes += ofrep.ROUTES
    serve_routes(app, [*routes, *validate.ROUTES])
    return app


def _keys_ready(
    keys: KeyService, key_store: KeyStore, settings: Settings, leader: bool
) -> Callable[[], Awaitable[None]]:
    """What must hold before the first request, once the database is open: configured and
    first-start keys stored, every key loaded into the key store's memory."""

    async def prepare() -> None:
        await _provision_keys(keys, settings)
        await key_store.load()
        if leader:  # once, and only for keys found valid
            warn_short_secrets(settings.init_admin_api_tokens, "RELAY_INIT_ADMIN_API_TOKENS")
            warn_short_secrets(settings.init_client_api_tokens, "RELAY_INIT_CLIENT_API_TOKENS")

    return prepare


def _flag_revisions(db: Database, served: ClientFeaturesCache) -> Context:
    """The served flags follow the flag revision: polled every ``STREAM_POLL_INTERVAL``,
    and on PostgreSQL also heard as other instances commit (``REVISION_CHANNEL``)."""
    ticking = every(STREAM_POLL_INTERVAL, served.tick, "flag-revision")

    async def ctx(app: web.Application) -> AsyncIterator[None]:
        async with contextlib.asynccontextmanager(ticking)(app):
            if not isinstance(db, PostgresDatabase):
                yield
                return
            task = asyncio.create_task(
                db.listen(REVISION_CHANNEL, served.heard), name="flag-notify"
            )
            yield
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    return ctx


async def _provision_keys(keys: KeyService, settings: Settings) -> None:
    """Configured keys that are absent, and on an empty store the first-start keys (shown)."""
    await keys.ensure(
        {
            KeyType.ADMIN: settings.init_admin_api_tokens,
            KeyType.CLIENT: settings.init_client_api_tokens,
            KeyType.FRONTEND: settings.init_frontend_api_tokens,
        }
    )
    _announce(await keys.bootstrap(), _url(settings))


def _url(settings: Settings) -> str:
    """Where the service answers, as a person on the machine types it."""
    host = settings.host
    if host in ("0.0.0.0", "::", ""):
        host = "localhost"
    elif ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{settings.listen_port}/"


def _announce(created: list[KeySpec], url: str) -> None:
    """Print first-start keys once, on stdout and never in the log: only hashes are kept."""
    if not created:
        return
    lines = ["", "No API key existed, so these were created. They are shown only now:"]
    lines += [f"  {spec.principal.type.value:<6} {spec.secret}" for spec in created]
    lines += [
        f"The web page: {url} (sign in with the admin key); SDKs: {url}api",
        "Create more keys with `relay keys create` or POST /api/admin/api-tokens.",
        "",
    ]
    print("\n".join(lines), file=sys.stdout, flush=True)
