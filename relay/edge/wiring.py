"""The relay (relay mode) put together: its buffer files, upstream client, flusher, buffer
monitor, SDK-key resolver, routes and jobs. ``relay.app`` calls ``build`` and
``initialise`` when the mode is relay."""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

from aiohttp import web

from relay.api import client, validate
from relay.api.application import new_application, serve_routes
from relay.api.auth import warn_short_secrets
from relay.api.jobs import every
from relay.api.state import INGEST, KEY_RESOLVER, READY
from relay.core.domain import Hop
from relay.core.ingest import Ingest
from relay.core.keys import parse_key
from relay.edge import passthrough
from relay.edge.buffer_monitor import BufferMonitor
from relay.edge.flusher import Flusher
from relay.edge.key_resolver import SdkKeyResolver
from relay.edge.outbox import SqliteOutbox
from relay.edge.reporter import ROUTES as reporter_routes
from relay.edge.reporter import Reporter
from relay.edge.shards import ShardedBuffer, ShardMerger, shard_path
from relay.edge.state import EDGE_REPORTS, UPSTREAM
from relay.edge.upstream import UpstreamClient
from relay.settings import Settings
from relay.store.edge_reports import EdgeReportStore
from relay.store.metrics import MetricsStore
from relay.store.sql import BUFFER_SCHEMA
from relay.store.sqlite import SqliteDatabase
from relay.wire.common import KeyType

log = logging.getLogger(__name__)

PRUNE_INTERVAL = 3600.0
MONITOR_INTERVAL = 2.0


async def initialise(settings: Settings) -> None:
    """Each worker's buffer file migrated, and the instance id kept, once before several
    workers start."""
    for worker in range(settings.workers):
        buffer = SqliteDatabase(
            shard_path(settings.buffer_path, worker), BUFFER_SCHEMA, settings.sqlite_synchronous
        )
        await buffer.open()
        await buffer.close()
    if settings.instance_id is None:
        instance_id(settings.data_dir)


def build(settings: Settings, worker: int) -> web.Application:
    """Worker 0, the leader, runs the jobs there must be one of (flusher, buffer monitor,
    pruning); each worker buffers in its own file (``relay.edge.shards``)."""
    if settings.upstream_url is None:
        raise ValueError("relay mode needs upstream_url")  # Settings validation ensures it
    app = new_application(settings)
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
    keys = {
        spec.principal.environment: spec.secret
        for spec in (parse_key(key, KeyType.CLIENT) for key in settings.upstream_tokens)
    }
    shards = ShardMerger(settings.buffer_path, buffer, settings.sqlite_synchronous)
    flusher = Flusher(
        outbox, upstream, keys, settings.flush_interval, settings.backoff_max, shards.merge
    )
    monitor = BufferMonitor(outbox, settings.buffer_max_bytes)
    hop = Hop(settings.app_name, settings.instance_id or instance_id(settings.data_dir))
    app[INGEST] = Ingest(ShardedBuffer(own, buffer), hop=hop)
    app[KEY_RESOLVER] = SdkKeyResolver(settings.client_tokens, upstream, settings.key_cache_ttl)
    app[UPSTREAM] = upstream
    app[EDGE_REPORTS] = EdgeReportStore(db)
    reporter = Reporter(hop, upstream, keys, db, outbox, flusher, settings.report_interval)

    async def storage(app: web.Application) -> AsyncIterator[None]:
        try:
            for database, store in opened:
                await database.open()
                store.start()
            await upstream.open()
            if leader:
                await monitor.check()
                warn_short_secrets(settings.client_tokens, "RELAY_CLIENT_TOKENS")
                if not keys:
                    log.warning(
                        "no upstream keys: counts stay buffered until RELAY_UPSTREAM_TOKENS"
                        " has a client key per environment"
                    )
            app[READY][0] = True
            log.info(
                "relay started",
                extra={
                    "upstream": settings.upstream_url,
                    "app_name": hop.app_name,
                    "instance_id": hop.instance_id,
                    "environments": sorted(keys),
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
        app.cleanup_ctx.append(every(MONITOR_INTERVAL, monitor.check, "buffer-monitor"))
        app.cleanup_ctx.append(every(PRUNE_INTERVAL, buffer.prune_idempotency, "prune"))
        app.cleanup_ctx.append(every(settings.report_interval, reporter.tick, "report"))
    routes = [*client.ROUTES, *reporter_routes, *passthrough.ROUTES, *validate.ROUTES]
    serve_routes(app, routes)
    return app


def instance_id(data_dir: Path) -> str:
    """Generated on first start and kept, so a restarted relay keeps its identity upstream."""
    path = data_dir / "instance-id"
    if path.is_file():
        return path.read_text().strip()
    data_dir.mkdir(parents=True, exist_ok=True)
    value = f"relay-{uuid.uuid4()}"
    path.write_text(value + "\n")
    return value
