"""The relay (relay mode) put together: its buffer files, upstream client, flusher, buffer
monitor, SDK-key resolver, routes and jobs. ``relay.app`` calls ``build`` and
``initialise`` when the mode is relay."""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

from aiohttp import web

from relay.api import client, delta, frontend, frontend_metrics, ofrep, streaming, validate
from relay.api.application import new_application, serve_routes
from relay.api.auth import warn_short_secrets
from relay.api.jobs import every
from relay.api.shared import Shared
from relay.api.state import (
    COUNTS_WAITING,
    DELTA_SOURCE,
    FRONTEND_SOURCE,
    FRONTENDS,
    INGEST,
    KEY_RESOLVER,
    READY,
)
from relay.core.domain import Hop
from relay.core.errors import StorageError
from relay.core.frontend import Frontends
from relay.core.ingest import Ingest
from relay.core.keys import parse_key
from relay.edge import backstage, passthrough, proxy
from relay.edge.cache_file import cache_file, open_cache
from relay.edge.flags import api as flag_api
from relay.edge.flags.backup import restore
from relay.edge.flags.cache import TICK, FlagCache
from relay.edge.flags.deltas import FlagDeltas
from relay.edge.flags.entries import REFUSED_TTL, vouched
from relay.edge.flags.frontend import FrontendFlags
from relay.edge.flags.store import FlagStore
from relay.edge.key_resolver import NEGATIVE_TTL, SdkKeyResolver
from relay.edge.key_words import KeyWords
from relay.edge.metrics.buffer_monitor import BufferMonitor
from relay.edge.metrics.flusher import Flusher
from relay.edge.metrics.keys import Notes, UpstreamKeys
from relay.edge.metrics.outbox import SqliteOutbox, claim_entries
from relay.edge.metrics.reserve import (
    START_PATIENCE,
    Admitted,
    IngestGate,
    Reserve,
    make_room,
    open_with_room,
    reserve_size,
    wal_bound,
)
from relay.edge.metrics.salvage import check_buffers
from relay.edge.metrics.shards import drain_shards
from relay.edge.metrics.space import BufferSpace
from relay.edge.reporter import REPORT_BOUNDS, Reporter
from relay.edge.reporter import ROUTES as reporter_routes
from relay.edge.state import EDGE_REPORTS, FLAG_CACHE, UPSTREAM
from relay.edge.upstream import UpstreamClient
from relay.settings import Settings
from relay.settings.usage import named
from relay.store.edge_reports import EdgeReportStore
from relay.store.metrics import MetricsStore
from relay.store.sql import BUFFER_SCHEMA
from relay.store.sqlite import SqliteDatabase
from relay.wire.common import MAX_NAME, KeyType

log = logging.getLogger(__name__)

PRUNE_INTERVAL = 3600.0
INSTANCE_ID = "instance-id"
MONITOR_INTERVAL = 2.0
LISTEN_INTERVAL = 0.1  # the leader's look at what every worker wrote (a flood wakes the monitor)
WORDS_PRUNE_INTERVAL = 60.0


async def initialise(settings: Settings) -> None:
    """The buffer migrated (with what an older relay's per-worker files held), the flag
    cache opened, and the instance id kept, once before several workers start."""
    await _check_buffers(settings, ran_before=_ran_before(settings))
    # on a full disk the files open with the room the reserve hands back, as in a worker
    reserve = Reserve(settings.data_dir / "buffer.reserve", _reserve_bytes(settings))
    cache = cache_file(settings.data_dir, settings.sqlite_synchronous)
    await open_cache(cache, settings.buffer_path, reserve)
    await _restore(settings, FlagStore(cache))
    await cache.close()
    buffer = _buffer_file(settings, settings.buffer_path)
    await open_with_room(buffer, reserve, START_PATIENCE)
    try:
        await _drain_shards(settings, buffer)
    finally:
        await buffer.close()
    if settings.instance_id is None:
        instance_id(settings.data_dir)


def build(settings: Settings, shared: Shared) -> web.Application:
    """Every worker writes counts into ``buffer.db`` (taking turns through its lock) and
    serves flags from its flag cache; what they decide together (keys, flag copies, bounds)
    goes through ``cache.db`` and the memory they share (``relay.api.shared``). Worker 0,
    the leader, runs the jobs there must be one of (flusher, buffer monitor, pruning)."""
    if settings.upstream_url is None:
        raise ValueError("relay mode needs upstream_url")  # Settings validation ensures it
    app = new_application(settings, shared)
    leader = shared.worker == 0

    db = _buffer_file(settings, settings.buffer_path)
    wal_bytes = _reserve_bytes(settings)
    reserve = Reserve(settings.data_dir / "buffer.reserve", wal_bytes)
    outbox = SqliteOutbox(db, settings.max_batch_bytes)
    monitor = BufferMonitor(
        db, settings.buffer_max_bytes, wal_bytes, reserve, outbox.in_flight, shared
    )
    buffer = MetricsStore(
        db,
        settings.commit_max_requests,
        settings.idempotency_ttl,
        touched=True,
        group_bytes=wal_bound(wal_bytes),
    )
    upstream = UpstreamClient(settings.upstream_url, settings.upstream_timeout)
    keys = {
        spec.principal.environment: spec.secret
        for spec in (parse_key(key, KeyType.CLIENT) for key in settings.upstream_tokens)
    }
    app[COUNTS_WAITING] = notes = Notes(shared)

    def lendable(environment: str) -> str | None:
        return vouched(flags.copies(), environment) or notes.borrow(environment)

    upstream_keys = UpstreamKeys(keys, lendable, notes)
    flusher = Flusher(
        outbox,
        upstream,
        upstream_keys,
        settings.flush_interval,
        settings.backoff_max,
        lambda: make_room(reserve, db),
        BufferSpace(db),
        claim_entries(wal_bound(wal_bytes)),
    )
    ran_before = _ran_before(settings)
    hop = Hop(settings.app_name, settings.instance_id or instance_id(settings.data_dir))
    admitted = Admitted(buffer, IngestGate(reserve, db), shared, settings.buffer_max_bytes)
    app[INGEST] = Ingest(admitted, hop=hop)
    configured = {
        KeyType.CLIENT: settings.client_tokens,
        KeyType.FRONTEND: settings.frontend_tokens,
    }
    cache = cache_file(settings.data_dir, settings.sqlite_synchronous)
    words = KeyWords(cache, shared)
    resolver = SdkKeyResolver(
        configured,
        upstream,
        settings.key_cache_ttl,
        words,
        strict=settings.strict_keys,
        scopes_named=named("client_tokens", settings.setting_names),
    )
    app[KEY_RESOLVER] = resolver
    app[UPSTREAM] = upstream
    flag_store = FlagStore(cache)

    def ready() -> None:
        app[READY][0] = True

    flags = FlagCache(
        flag_store,
        upstream,
        settings.features_refresh_interval,
        settings.client_tokens,
        {"Unleash-AppName": hop.app_name, "Unleash-InstanceId": hop.instance_id},
        ready,
        words,
        shared,
    )
    app[FLAG_CACHE] = flags
    app[DELTA_SOURCE] = FlagDeltas(flags)
    streaming.add_streams(app)
    fetching = settings.client_tokens + settings.upstream_tokens
    frontend_flags = FrontendFlags(flags, fetching, settings.frontend_tokens)
    app[FRONTEND_SOURCE] = frontend_flags
    ofrep.add_ofrep(app, frontend_flags)
    app[FRONTENDS] = Frontends()
    reports = EdgeReportStore(cache, REPORT_BOUNDS)
    app[EDGE_REPORTS] = reports
    reporter = Reporter(hop, upstream, keys, db, reports, flusher, settings.report_interval)

    async def current() -> None:
        await resolver.current()
        await flags.current()

    app[backstage.SOURCES] = backstage.Sources(flags.copies, resolver, db, reporter.shown, current)

    async def storage(app: web.Application) -> AsyncIterator[None]:
        try:
            # the buffer file before the cache's: on a full disk it needs the reserve more
            # (with one worker, the cache takes the flag copies of an older buffer.db before
            # its migration drops them: ``initialise`` does that for several)
            unchecked: list[Path] = []
            if settings.workers == 1:
                unchecked = await _check_buffers(settings, ran_before)
                await open_cache(cache, settings.buffer_path, reserve)
                await _restore(settings, flag_store)
            await open_with_room(db, reserve, START_PATIENCE)
            buffer.start()
            if settings.workers > 1:
                await open_with_room(cache, reserve, START_PATIENCE)
            elif leader:
                await _drain_shards(settings, db)
            for path in unchecked:
                log.warning(
                    "buffer file not checked for damage at start: it could not be opened"
                    " then (disk full?)",
                    extra={"path": str(path)},
                )
            await upstream.open()
            if leader:
                await _first_check(monitor)
                warn_short_secrets(
                    settings.client_tokens, named("client_tokens", settings.setting_names)
                )
                if not keys:
                    log.warning(
                        "no upstream keys: each environment's counts are sent with an SDK key"
                        " of it the upstream vouched for, and wait while there is none"
                    )
            log.info(
                "relay started",
                extra={
                    "upstream": settings.upstream_url,
                    "app_name": hop.app_name,
                    "instance_id": hop.instance_id,
                    "environments": sorted(keys),
                    **_proxy_paths(settings),
                },
            )
            yield
            app[READY][0] = False
            await buffer.stop()
        finally:
            await upstream.close()
            await db.close()
            await cache.close()

    async def flushing(app: web.Application) -> AsyncIterator[None]:
        flusher.start()
        yield
        await flusher.stop(settings.final_flush_timeout)

    async def flag_cache(app: web.Application) -> AsyncIterator[None]:
        """Ready once every ``client_tokens`` key has flags (``FlagCache``); keys the
        upstream vouched for before a restart are known again while it is down."""
        await words.load()
        resolver.remember(await flag_store.keys())
        await flags.start()
        yield
        await flags.stop()

    app.cleanup_ctx.append(storage)
    app.cleanup_ctx.append(flag_cache)
    tick = min(TICK, settings.features_refresh_interval)
    app.cleanup_ctx.append(every(tick, flags.tick, "flag-cache"))

    async def lend() -> None:
        """This worker's SDK keys the leader's flusher may send counts with (environments
        without an ``upstream_tokens`` key)."""
        environments = {e.scope.environment for e in flags.copies()} - set(keys)
        lent = {env: vouched(flags.copies(), env) for env in sorted(environments)}
        notes.lend({env: key for env, key in lent.items() if key is not None})

    app.cleanup_ctx.append(every(tick, lend, "lend-keys"))
    if leader:
        app.cleanup_ctx.append(flushing)
        app.cleanup_ctx.append(
            every(MONITOR_INTERVAL, monitor.check, "buffer-monitor", wake=monitor.wake)
        )
        app.cleanup_ctx.append(every(LISTEN_INTERVAL, monitor.listen, "buffer-writes"))
        app.cleanup_ctx.append(every(PRUNE_INTERVAL, buffer.prune_idempotency, "prune"))
        app.cleanup_ctx.append(every(PRUNE_INTERVAL, flags.prune, "prune-flags"))
        app.cleanup_ctx.append(every(PRUNE_INTERVAL, monitor.prune, "prune-dead-letters"))
        app.cleanup_ctx.append(every(WORDS_PRUNE_INTERVAL, _prune(words), "prune-key-words"))
        app.cleanup_ctx.append(every(settings.report_interval, reporter.tick, "report"))
    # last: its final write ends before the flusher's final flush and the buffers close
    app.cleanup_ctx.append(ofrep.counting)
    routes = [
        *client.ROUTES,
        *frontend_metrics.ROUTES,
        *flag_api.ROUTES,
        *delta.ROUTES,
        *streaming.ROUTES,
        *frontend.routes(not settings.disable_all_endpoint, (403, 503)),
        *ofrep.ROUTES,
        *reporter_routes,
        *passthrough.ROUTES,
        *validate.ROUTES,
        *backstage.routes(settings),
    ]
    if settings.proxy_client_keys or settings.proxy_server_keys:
        app[proxy.PROXY] = proxy.Proxy(settings)
        routes = proxy.alongside(routes, proxy.routes(settings))
    serve_routes(app, routes)
    return app


def _prune(words: KeyWords) -> Callable[[], Awaitable[None]]:
    return lambda: words.prune(max(NEGATIVE_TTL, REFUSED_TTL))


async def _drain_shards(settings: Settings, buffer: SqliteDatabase) -> None:
    """What an older relay's workers buffered in files of their own moved into
    ``buffer.db`` (``relay.edge.metrics.shards``)."""
    store = MetricsStore(
        buffer, settings.commit_max_requests, settings.idempotency_ttl, touched=True
    )
    store.start()
    try:
        wal = wal_bound(_reserve_bytes(settings))
        await drain_shards(settings.buffer_path, store, settings.sqlite_synchronous, wal)
    finally:
        await store.stop()


def _proxy_paths(settings: Settings) -> dict[str, object]:
    """What the start-up line says of the Unleash Proxy's paths, when served."""
    if not (settings.proxy_client_keys or settings.proxy_server_keys):
        return {}
    return {
        "proxy_paths": f"{settings.proxy_base_path}/proxy",
        "proxy_client_keys": len(settings.proxy_client_keys),
        "proxy_all_endpoint": not settings.disable_all_endpoint,
    }


async def _check_buffers(settings: Settings, ran_before: bool) -> list[Path]:
    wal = wal_bound(_reserve_bytes(settings))
    return await check_buffers(settings.buffer_path, settings.sqlite_synchronous, wal, ran_before)


async def _restore(settings: Settings, store: FlagStore) -> None:
    """An Unleash Edge backup read into an empty ``cache.db`` (``relay.edge.flags.backup``),
    before the flag cache and the key resolver load it."""
    if settings.backup_folder is not None:
        await restore(settings.backup_folder, store, settings.features_refresh_interval)


def _reserve_bytes(settings: Settings) -> int:
    return reserve_size(settings.buffer_max_bytes, settings.data_dir)


def _ran_before(settings: Settings) -> bool:
    """A relay ran in the data directory before: the instance id it generated is there."""
    return settings.instance_id is None and (settings.data_dir / INSTANCE_ID).is_file()


def _buffer_file(settings: Settings, path: Path) -> SqliteDatabase:
    wal = wal_bound(_reserve_bytes(settings))
    return SqliteDatabase(path, BUFFER_SCHEMA, settings.sqlite_synchronous, wal)


async def _first_check(monitor: BufferMonitor) -> None:
    """Bound the buffer and publish its gauges before serving; a full disk must not stop the
    relay from starting (it answers 503 to writes and drains what it holds)."""
    try:
        await monitor.check()
    except StorageError as exc:
        log.warning("cannot check the buffer at start-up", extra={"error": str(exc)})


def instance_id(data_dir: Path) -> str:
    """Generated on first start and kept, so a restarted relay keeps its identity upstream.
    A file that does not hold a valid name (empty, too long: the upstream would refuse every
    registration carrying it in connectVia) is replaced, with an error logged."""
    path = data_dir / INSTANCE_ID
    if path.is_file():
        kept = path.read_text(errors="replace").strip()
        if 0 < len(kept) <= MAX_NAME and "\x00" not in kept:
            return kept
        log.error("instance-id file is not a valid id: a new one is generated")
    data_dir.mkdir(parents=True, exist_ok=True)
    value = f"relay-{uuid.uuid4()}"
    path.write_text(value + "\n")
    return value
