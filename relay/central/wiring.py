"""The central service (standalone mode) put together: its database, stores, key service,
flag services and their cache, routes and jobs. ``relay.app`` calls ``build`` and
``initialise`` when the mode is standalone."""

from __future__ import annotations

import asyncio
import contextlib
import functools
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
from relay.central import admin, edges, events_api, impact, projects_api
from relay.central.environments import EnvironmentStore
from relay.central.events import EventLog
from relay.central.flags import admin_api, client_api, model_api, transfer_api
from relay.central.flags.dependencies import DependencyService
from relay.central.flags.dependency_records import DependencyRecords
from relay.central.flags.flag_records import FlagRecords
from relay.central.flags.flags import FlagService
from relay.central.flags.segment_records import SegmentRecords
from relay.central.flags.segments import SegmentService
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
from relay.central.key_store import POLL_INTERVAL as KEY_POLL_INTERVAL
from relay.central.key_store import USE_INTERVAL, KeyStore
from relay.central.keys import KeyService
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
from relay.central.web.routes import add_web
from relay.core.errors import StorageError
from relay.core.frontend import Frontends
from relay.core.ingest import Ingest
from relay.core.keys import KeySpec
from relay.settings import Settings
from relay.store.edge_reports import EdgeReportStore
from relay.store.fold import FOLD_INTERVAL, Folder
from relay.store.impact import ImpactStore
from relay.store.metrics import INSTANCES_KEPT, MetricsStore
from relay.store.postgres import PostgresDatabase
from relay.store.sql import CENTRAL_SCHEMA, Database
from relay.store.sqlite import SqliteDatabase
from relay.wire.common import KeyType

log = logging.getLogger(__name__)

PRUNE_INTERVAL = 3600.0
COMMIT_LINGER = 0.002
"""Seconds a group commit may wait for as many requests as the previous one held: instances
on one PostgreSQL each commit less often for the same load (``GroupCommitter``)."""


def central_database(settings: Settings) -> Database:
    """PostgreSQL when ``database_url`` names it, else a SQLite file."""
    if settings.database_url is not None and settings.uses_postgres:
        return PostgresDatabase(
            settings.database_url,
            CENTRAL_SCHEMA,
            settings.database_pool_size,
            settings.database_timeout,
        )
    return SqliteDatabase(settings.sqlite_path, CENTRAL_SCHEMA, settings.sqlite_synchronous)


def key_service(db: Database, settings: Settings) -> KeyService:
    """The key service of the command line and of start-up (its changes logged)."""
    return KeyService(KeyStore(db, EventLog(db, settings.event_log_kept)))


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
    """``worker`` 0, the leader, is the one that prunes idempotency keys (and warns about
    weak configured keys, once)."""
    app = new_application(settings, shared)
    worker = shared.worker
    db = central_database(settings)
    events = EventLog(db, settings.event_log_kept)
    key_store = KeyStore(db, events, shared)
    served = ClientFeaturesCache(db, shared=shared)
    writer = Writer(db, served.committed, events=events)
    projects = ProjectStore(db, writer, key_store.poll)
    metrics = MetricsStore(
        db,
        settings.commit_max_requests,
        settings.idempotency_ttl,
        arrived=True,
        instances_kept=INSTANCES_KEPT,
        logged=True,
        linger=COMMIT_LINGER,
    )
    folder = Folder(db, INSTANCES_KEPT)
    keys = KeyService(key_store)
    app[KEY_RESOLVER] = key_store
    app[PROJECTS] = projects
    app[ENVIRONMENTS] = EnvironmentStore(db, writer)
    app[EVENTS] = events
    app[USAGE] = UsageReader(db, folder.caught_up)
    app[KEYS] = keys
    app[INGEST] = Ingest(metrics)
    app[FLAGS] = FlagService(writer, FlagRecords())
    app[STRATEGIES] = StrategyService(writer)
    app[SEGMENTS] = SegmentService(writer, SegmentRecords())
    app[DEPENDENCIES] = DependencyService(writer, DependencyRecords())
    app[VARIANTS] = VariantService(writer)
    app[TAGS] = TagService(writer, TagRecords())
    imports = ImportStorage(FlagRecords(), TagRecords(), DependencyRecords())
    app[TRANSFER] = TransferService(writer, TransferRecords(), imports)
    app[CLIENT_FEATURES] = served
    app[FRONTEND_SOURCE] = served
    app[DELTA_SOURCE] = served
    streaming.add_streams(app)
    app[FRONTENDS] = Frontends()
    app[EDGES] = EdgeReportStore(db, edges.BOUNDS)
    app[IMPACT] = ImpactStore(db, folder.caught_up)

    async def prepare() -> None:
        await db.open()
        try:
            await _provision_keys(keys, settings)
            await key_store.load()
        except StorageError:
            await db.close()
            raise
        if worker == 0:  # once, and only for keys found valid
            warn_short_secrets(settings.init_admin_api_tokens, "RELAY_INIT_ADMIN_API_TOKENS")
            warn_short_secrets(settings.init_client_api_tokens, "RELAY_INIT_CLIENT_API_TOKENS")
        app[READY][0] = True

    async def storage(app: web.Application) -> AsyncIterator[None]:
        metrics.start()
        opening: asyncio.Task[None] | None = None
        try:
            try:
                await prepare()
            except StorageError as exc:
                if not settings.uses_postgres:
                    raise  # a SQLite file that cannot be opened is a configuration error
                log.error(
                    "database unavailable at start-up: answering 503 and retrying",
                    extra={"error": str(exc)},
                )
                opening = asyncio.create_task(_until_open(prepare), name="database-open")
            yield
        finally:
            app[READY][0] = False
            if opening is not None:
                opening.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await opening
            with contextlib.suppress(StorageError):
                await key_store.write_uses()
            await metrics.stop()
            await folder.stop()
            await db.close()

    app.cleanup_ctx.append(storage)
    app.cleanup_ctx.append(every(STREAM_POLL_INTERVAL, served.tick, "flag-revision"))
    if isinstance(db, PostgresDatabase):  # other instances' writes, as they commit
        app.cleanup_ctx.append(_listening(db, served.heard))
    app.cleanup_ctx.append(every(KEY_POLL_INTERVAL, key_store.poll, "key-revision"))
    app.cleanup_ctx.append(every(USE_INTERVAL, key_store.write_uses, "key-uses"))
    if worker == 0:  # the ingest log kept short; reads fold first on every worker
        app.cleanup_ctx.append(every(FOLD_INTERVAL, folder.fold, "fold"))
        app.cleanup_ctx.append(every(PRUNE_INTERVAL, metrics.prune_idempotency, "prune"))
        forget_instances = metrics.prune_registrations
        app.cleanup_ctx.append(every(PRUNE_INTERVAL, forget_instances, "prune-registrations"))
        forget = functools.partial(edges.forget_old, app[EDGES])
        app.cleanup_ctx.append(every(PRUNE_INTERVAL, forget, "prune-edges"))
        bound = functools.partial(impact.forget_old, app[IMPACT])
        app.cleanup_ctx.append(every(PRUNE_INTERVAL, bound, "prune-impact"))
    sessions = add_web(app, db, settings)
    app.cleanup_ctx.append(every(PRUNE_INTERVAL, sessions.prune, "prune-sessions"))
    routes = [*client.ROUTES, *frontend_metrics.ROUTES, *client_api.ROUTES, *delta.ROUTES]
    routes += [*streaming.ROUTES, *admin.ROUTES, *projects_api.ROUTES, *events_api.ROUTES]
    routes += [*admin_api.ROUTES, *model_api.ROUTES, *edges.ROUTES, *impact.ROUTES]
    routes += transfer_api.ROUTES
    routes += frontend.routes(not settings.disable_all_endpoint, (503,))
    ofrep.add_ofrep(app, served)
    app.cleanup_ctx.append(ofrep.counting)  # after storage: it ends before storage closes
    routes += ofrep.ROUTES
    serve_routes(app, [*routes, *validate.ROUTES])
    return app


def _listening(
    db: PostgresDatabase, heard: Callable[[str], None]
) -> Callable[[web.Application], AsyncIterator[None]]:
    async def listen(app: web.Application) -> AsyncIterator[None]:
        task = asyncio.create_task(db.listen(REVISION_CHANNEL, heard), name="flag-notify")
        yield
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    return listen


async def _until_open(prepare: Callable[[], Awaitable[None]]) -> None:
    """A shared database may be down when a replica starts: the replica stays up, not ready,
    answering 503, and becomes ready as soon as the database answers."""
    delay = 1.0
    while True:
        await asyncio.sleep(delay)
        try:
            await prepare()
        except StorageError as exc:
            delay = min(delay * 2, 30.0)
            log.warning("database still unavailable", extra={"error": str(exc), "retry_in": delay})
        else:
            log.info("database available: ready")
            return


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
