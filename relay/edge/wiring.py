"""The relay (relay mode) put together: its buffer files, upstream client, flusher, buffer
monitor, SDK-key resolver, routes and jobs. ``relay.app`` calls ``build`` and
``initialise`` when the mode is relay."""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from functools import partial
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
from relay.core.frontend import Frontends
from relay.core.ingest import Ingest
from relay.core.ingest_batch import Hop
from relay.core.keys import parse_key
from relay.edge import backstage, passthrough, proxy
from relay.edge.cache_file import opened
from relay.edge.flags import api as flag_api
from relay.edge.flags.backup import restore, restored
from relay.edge.flags.cache import TICK, FlagCache
from relay.edge.flags.deltas import FlagDeltas
from relay.edge.flags.frontend import FrontendFlags
from relay.edge.flags.refusals import REFUSED_TTL
from relay.edge.flags.store import FlagStore
from relay.edge.key_resolver import NEGATIVE_TTL, SdkKeyResolver
from relay.edge.key_words import KeyWords
from relay.edge.metrics.admitted import Admitted
from relay.edge.metrics.buffer_file import BufferFile, writing
from relay.edge.metrics.buffer_monitor import BufferMonitor
from relay.edge.metrics.flusher import Flusher
from relay.edge.metrics.keys import Lending, Notes, UpstreamKeys
from relay.edge.reporter import REPORT_BOUNDS, Reporter
from relay.edge.reporter import ROUTES as reporter_routes
from relay.edge.state import EDGE_REPORTS, FLAG_CACHE, UPSTREAM
from relay.edge.upstream import UpstreamClient
from relay.settings import Settings
from relay.settings.usage import named
from relay.store.buffer_pages import BufferPages
from relay.store.buffer_space import BufferSpace
from relay.store.cache_file import cache_file, open_cache
from relay.store.edge_reports import EdgeReportStore
from relay.store.key_words import KeyWordStore
from relay.store.outbox import SqliteOutbox, claim_entries
from relay.store.reserve import START_PATIENCE, IngestGate, make_room, open_with_room
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
    buffer = BufferFile(settings)
    await buffer.check(ran_before=_ran_before(settings))
    # on a full disk the files open with the room the reserve hands back, as in a worker
    cache = cache_file(settings.data_dir, settings.sqlite_synchronous)
    await open_cache(cache, settings.buffer_path, buffer.reserve)
    if settings.backup_folder is not None:
        await restore(settings.backup_folder, FlagStore(cache), settings.features_refresh_interval)
    await cache.close()
    await open_with_room(buffer.db, buffer.reserve, START_PATIENCE)
    try:
        await buffer.drain_shards()
    finally:
        await buffer.db.close()
    if settings.instance_id is None:
        instance_id(settings.data_dir)


def build(settings: Settings, shared: Shared) -> web.Application:
    """Every worker writes counts into ``buffer.db`` (taking turns through its lock) and
    serves flags from its flag cache; what they decide together (keys, flag copies, bounds)
    goes through ``cache.db`` and the memory they share (``relay.api.shared``). Worker 0,
    the leader, runs the jobs there must be one of (flusher, buffer monitor, pruning).

    The resources are built first, each needing only those above it; then each is one
    ``cleanup_ctx`` in the order they start (they stop in the reverse order)."""
    if settings.upstream_url is None:
        raise ValueError("relay mode needs upstream_url")  # Settings validation ensures it
    app = new_application(settings, shared)
    leader = shared.worker == 0
    ran_before = _ran_before(settings)  # before ``instance_id`` writes the file
    hop = Hop(settings.app_name, settings.instance_id or instance_id(settings.data_dir))
    keys = {
        spec.principal.environment: spec.secret
        for spec in (parse_key(key, KeyType.CLIENT) for key in settings.upstream_tokens)
    }

    # the files and the upstream
    buffer = BufferFile(settings)
    db, reserve = buffer.db, buffer.reserve
    counts = buffer.counts()
    cache = cache_file(settings.data_dir, settings.sqlite_synchronous)
    flag_store = FlagStore(cache)
    words = KeyWords(KeyWordStore(cache), shared)
    upstream = UpstreamClient(settings.upstream_url, settings.upstream_timeout)

    # keys and flags
    configured = {
        KeyType.CLIENT: settings.client_tokens,
        KeyType.FRONTEND: settings.frontend_tokens,
    }
    resolver = SdkKeyResolver(
        configured,
        upstream,
        settings.key_cache_ttl,
        words,
        strict=settings.strict_keys,
        scopes_named=named("client_tokens", settings.setting_names),
    )

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
    fetching = settings.client_tokens + settings.upstream_tokens
    frontend_flags = FrontendFlags(flags, fetching, settings.frontend_tokens)

    # counts: taken in, bounded, flushed
    notes = Notes(shared)
    lending = Lending(flags.copies, notes, keys)
    outbox = SqliteOutbox(db, settings.max_batch_bytes)
    monitor = BufferMonitor(
        db, settings.buffer_max_bytes, reserve.size, reserve, outbox.in_flight, shared
    )
    space = BufferSpace(db)
    flusher = Flusher(
        outbox,
        upstream,
        UpstreamKeys(keys, lending, notes),
        settings.flush_interval,
        settings.backoff_max,
        settings.final_flush_timeout,
        partial(make_room, reserve, db),
        space,
        claim_entries(buffer.wal_bytes),
    )
    admitted = Admitted(counts, IngestGate(reserve, db), shared, settings.buffer_max_bytes)
    reports = EdgeReportStore(cache, REPORT_BOUNDS)
    interval = settings.report_interval
    reporter = Reporter(hop, upstream, keys, space, reports, flusher, lending.any, interval)

    async def current() -> None:
        await resolver.current()
        await flags.current()

    app[COUNTS_WAITING] = notes
    app[INGEST] = Ingest(admitted, hop=hop)
    app[KEY_RESOLVER] = resolver
    app[UPSTREAM] = upstream
    app[FLAG_CACHE] = flags
    app[DELTA_SOURCE] = FlagDeltas(flags)
    app[FRONTEND_SOURCE] = frontend_flags
    app[FRONTENDS] = Frontends()
    app[EDGE_REPORTS] = reports
    app[backstage.SOURCES] = backstage.Sources(
        flags.copies, resolver, BufferPages(db), reporter.shown, current
    )
    streaming.add_streams(app)
    ofrep.add_ofrep(app, frontend_flags)

    if settings.workers == 1:
        # the buffer checked before the cache adopts the flag copies an older buffer.db
        # holds, which its migration then drops (``initialise`` does this for several)
        files = [
            buffer.checked(ran_before),
            opened(cache, reserve, settings.buffer_path),
            restored(settings.backup_folder, flag_store, settings.features_refresh_interval),
            buffer.opened,
        ]
    else:  # the buffer file before the cache's: on a full disk it needs the reserve more
        files = [buffer.opened, opened(cache, reserve, None)]
    tick = min(TICK, settings.features_refresh_interval)
    app.cleanup_ctx.extend(
        [
            *files,
            upstream.connected,
            writing(counts),
            *([monitor.checked_at_start] if leader else []),
            _started(settings, hop, keys, leader),
            resolver.loading(flag_store),
            flags.running,
            every(tick, flags.tick, "flag-cache"),
            every(tick, lending.lend, "lend-keys"),
        ]
    )
    if leader:
        app.cleanup_ctx.extend(
            [
                flusher.flushing,
                every(MONITOR_INTERVAL, monitor.check, "buffer-monitor", wake=monitor.wake),
                every(LISTEN_INTERVAL, monitor.listen, "buffer-writes"),
                every(PRUNE_INTERVAL, counts.prune_idempotency, "prune"),
                every(PRUNE_INTERVAL, flags.prune, "prune-flags"),
                every(PRUNE_INTERVAL, monitor.prune, "prune-dead-letters"),
                every(WORDS_PRUNE_INTERVAL, _prune(words), "prune-key-words"),
                every(settings.report_interval, reporter.tick, "report"),
            ]
        )
    # last: its final write ends before the flusher's final flush and the buffers close
    app.cleanup_ctx.append(ofrep.counting)
    _serve(app, settings)
    return app


def _serve(app: web.Application, settings: Settings) -> None:
    """The relay's routes, the Unleash Proxy's beside them when it has keys."""
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


def _started(
    settings: Settings, hop: Hop, keys: Mapping[str, str], leader: bool
) -> Callable[[web.Application], AsyncIterator[None]]:
    """Once the files and the upstream client are open: the start said in the log (and the
    leader's warnings on the settings); on shutdown, once the flag cache stopped, not
    ready."""

    async def ctx(app: web.Application) -> AsyncIterator[None]:
        if leader:
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

    return ctx


def _prune(words: KeyWords) -> Callable[[], Awaitable[None]]:
    return lambda: words.prune(max(NEGATIVE_TTL, REFUSED_TTL))


def _proxy_paths(settings: Settings) -> dict[str, object]:
    """What the start-up line says of the Unleash Proxy's paths, when served."""
    if not (settings.proxy_client_keys or settings.proxy_server_keys):
        return {}
    return {
        "proxy_paths": f"{settings.proxy_base_path}/proxy",
        "proxy_client_keys": len(settings.proxy_client_keys),
        "proxy_all_endpoint": not settings.disable_all_endpoint,
    }


def _ran_before(settings: Settings) -> bool:
    """A relay ran in the data directory before: the instance id it generated is there."""
    return settings.instance_id is None and (settings.data_dir / INSTANCE_ID).is_file()


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
