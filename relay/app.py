"""The composition root: ``build_app(settings)`` is the only place that knows the mode.

Each resource or background task is one ``cleanup_ctx`` generator: opened before ``yield``,
closed after, so shutdown runs in reverse order of start-up.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from importlib.metadata import version
from pathlib import Path

from aiohttp import web
from aiohttp.typedefs import Middleware

from relay.api import admin, backstage, client, docs, edge, features, passthrough
from relay.api.cors import cors_middleware
from relay.api.middleware import observe
from relay.api.routing import Route, add_routes
from relay.auth import KeySpec, parse_key
from relay.buffer_monitor import BufferMonitor
from relay.domain import Hop
from relay.flusher import Flusher
from relay.ingest import Ingest
from relay.keys import KeyService
from relay.models import TokenType
from relay.openapi import document
from relay.sdk_keys import RelayKeyResolver
from relay.settings import Mode, Settings
from relay.shards import ShardedBuffer, ShardMerger, shard_path
from relay.state import (
    INGEST,
    KEY_RESOLVER,
    KEYS,
    METRICS,
    OPENAPI,
    PROJECTS,
    READY,
    SETTINGS,
    UPSTREAM,
)
from relay.store.errors import StorageError
from relay.store.metrics import MetricsStore
from relay.store.outbox import SqliteOutbox
from relay.store.postgres import PostgresDatabase
from relay.store.projects import ProjectStore
from relay.store.sql import BUFFER_SCHEMA, CENTRAL_SCHEMA, Database
from relay.store.sqlite import SqliteDatabase
from relay.store.tokens import TokenStore
from relay.upstream import UpstreamClient

log = logging.getLogger(__name__)

PRUNE_INTERVAL = 3600.0
MONITOR_INTERVAL = 2.0


def build_app(settings: Settings, worker: int = 0) -> web.Application:
    """``worker``: this process's index when there are several (relay/server.py). Worker 0,
    the leader, runs the jobs there must be one of (flusher, buffer monitor, pruning); in
    relay mode each worker buffers in its own file (relay/shards.py)."""
    middlewares: list[Middleware] = [observe]
    if settings.cors_origins:
        middlewares.append(cors_middleware(settings.cors_origins))
    app = web.Application(client_max_size=settings.max_body_bytes, middlewares=middlewares)
    app[SETTINGS] = settings
    app[READY] = [False]
    wire = _relay if settings.mode is Mode.RELAY else _standalone
    routes = [*wire(app, settings, worker), *backstage.ROUTES, *docs.ROUTES]
    add_routes(app, routes)
    app[OPENAPI] = document(routes, version("relay"))
    return app


def central_database(settings: Settings) -> Database:
    """The standalone store: PostgreSQL when ``database_url`` names it, else a SQLite file."""
    if settings.uses_postgres:
        assert settings.database_url is not None
        return PostgresDatabase(
            settings.database_url,
            CENTRAL_SCHEMA,
            settings.database_pool_size,
            settings.database_timeout,
        )
    return SqliteDatabase(settings.sqlite_path, CENTRAL_SCHEMA, settings.sqlite_synchronous)


async def initialise(settings: Settings) -> None:
    """Start-up work done once before several workers start, so they never race on it:
    migrations, configured and first-start keys, the relay's instance id file. Each worker
    repeats the checks and finds nothing to do."""
    if settings.mode is Mode.RELAY:
        for worker in range(settings.workers):
            path = shard_path(settings.buffer_path, worker)
            buffer = SqliteDatabase(path, BUFFER_SCHEMA, settings.sqlite_synchronous)
            await buffer.open()
            await buffer.close()
        if settings.instance_id is None:
            _instance_id(settings.data_dir)
        return
    db = central_database(settings)
    try:
        await db.open()
    except StorageError as exc:
        if not settings.uses_postgres:
            raise
        log.error("database unavailable at start-up", extra={"error": str(exc)})
        return  # the workers answer 503 and retry, as one process would
    try:
        await _provision_keys(KeyService(TokenStore(db), ProjectStore(db)), settings)
    finally:
        await db.close()


async def _provision_keys(keys: KeyService, settings: Settings) -> None:
    """Configured keys that are absent, and on an empty store the first-start keys (shown)."""
    await keys.ensure(settings.init_admin_api_tokens, settings.init_client_api_tokens)
    _announce(await keys.bootstrap())


def _standalone(app: web.Application, settings: Settings, worker: int) -> list[Route]:
    leader = worker == 0
    db = central_database(settings)
    key_store = TokenStore(db)
    projects = ProjectStore(db)
    metrics = MetricsStore(db, settings.commit_max_requests, settings.idempotency_ttl)
    keys = KeyService(key_store, projects)
    app[KEY_RESOLVER] = key_store
    app[PROJECTS] = projects
    app[METRICS] = metrics
    app[KEYS] = keys
    app[INGEST] = Ingest(metrics)

    async def prepare() -> None:
        await db.open()
        try:
            await _provision_keys(keys, settings)
        except StorageError:
            await db.close()
            raise
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
            await metrics.stop()
            await db.close()

    app.cleanup_ctx.append(storage)
    if leader:
        app.cleanup_ctx.append(_every(PRUNE_INTERVAL, metrics.prune_idempotency, "prune"))
    return [*client.ROUTES, *features.ROUTES, *admin.ROUTES, *edge.ROUTES]


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


def _relay(app: web.Application, settings: Settings, worker: int) -> list[Route]:
    assert settings.upstream_url is not None  # guaranteed by Settings validation
    leader = worker == 0

    def buffer_in(path: Path) -> tuple[SqliteDatabase, MetricsStore]:
        db = SqliteDatabase(path, BUFFER_SCHEMA, settings.sqlite_synchronous)
        return db, MetricsStore(db, settings.commit_max_requests, settings.idempotency_ttl)

    # the leader's file: the flusher's, and where requests with an Idempotency-Key go
    db, buffer = buffer_in(settings.buffer_path)
    own_db, own = (db, buffer) if leader else buffer_in(shard_path(settings.buffer_path, worker))
    opened = [(own_db, own)] if leader else [(own_db, own), (db, buffer)]
    outbox = SqliteOutbox(db, settings.max_batch_bytes)
    upstream = UpstreamClient(settings.upstream_url, settings.upstream_timeout)
    tokens = {
        spec.principal.environment: spec.secret
        for spec in (parse_key(key, TokenType.CLIENT) for key in settings.upstream_tokens)
    }
    shards = ShardMerger(settings.buffer_path, buffer, settings.sqlite_synchronous)
    flusher = Flusher(
        outbox,
        upstream,
        tokens,
        settings.flush_interval,
        settings.backoff_max,
        gather=shards.merge,
    )
    monitor = BufferMonitor(outbox, settings.buffer_max_bytes)
    hop = Hop(settings.app_name, settings.instance_id or _instance_id(settings.data_dir))
    app[INGEST] = Ingest(ShardedBuffer(own, buffer), hop=hop)
    app[KEY_RESOLVER] = RelayKeyResolver(settings.client_tokens, upstream, settings.key_cache_ttl)
    app[UPSTREAM] = upstream

    async def storage(app: web.Application) -> AsyncIterator[None]:
        try:
            for database, store in opened:
                await database.open()
                store.start()
            await upstream.open()
            if leader:
                await monitor.check()
            app[READY][0] = True
            log.info(
                "relay started",
                extra={
                    "upstream": settings.upstream_url,
                    "app_name": hop.app_name,
                    "instance_id": hop.instance_id,
                    "environments": sorted(tokens),
                },
            )
            yield
            app[READY][0] = False
            for _, store in opened:
                await store.stop()
        finally:
            await upstream.close()
            for database, _ in opened:
                await database.close()

    async def flushing(app: web.Application) -> AsyncIterator[None]:
        flusher.start()
        yield
        await flusher.stop(settings.final_flush_timeout)

    app.cleanup_ctx.append(storage)
    if leader:
        app.cleanup_ctx.append(flushing)
        app.cleanup_ctx.append(_every(MONITOR_INTERVAL, monitor.check, "buffer-monitor"))
        app.cleanup_ctx.append(_every(PRUNE_INTERVAL, buffer.prune_idempotency, "prune"))
    return [*client.ROUTES, *passthrough.ROUTES, *edge.ROUTES]


def _instance_id(data_dir: Path) -> str:
    """Generated on first start and kept, so a restarted relay keeps its identity upstream."""
    path = data_dir / "instance-id"
    if path.is_file():
        return path.read_text().strip()
    data_dir.mkdir(parents=True, exist_ok=True)
    value = f"relay-{uuid.uuid4()}"
    path.write_text(value + "\n")
    return value


def _announce(created: list[KeySpec]) -> None:
    """Print first-start keys once, on stdout and never in the log: only hashes are kept."""
    if not created:
        return
    lines = ["", "No API key existed, so these were created. They are shown only now:"]
    lines += [f"  {spec.principal.type.value:<6} {spec.secret}" for spec in created]
    lines += ["Create more with `relay keys create` or POST /api/admin/api-tokens.", ""]
    print("\n".join(lines), file=sys.stdout, flush=True)


def _every(
    seconds: float, job: Callable[[], Awaitable[object]], name: str
) -> Callable[[web.Application], AsyncIterator[None]]:
    """Run ``job`` every ``seconds``. On shutdown a run in progress is let finish, never
    cancelled: a cancelled await does not stop a statement already handed to the database
    thread, so the job's bookkeeping after it (counting evicted entries) would be lost."""
    stop = asyncio.Event()

    async def loop() -> None:
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), seconds)
                return
            try:
                await job()
            except Exception:
                log.exception("periodic job failed", extra={"job": name})

    async def ctx(app: web.Application) -> AsyncIterator[None]:
        task = asyncio.create_task(loop(), name=name)
        yield
        stop.set()
        await task

    return ctx
