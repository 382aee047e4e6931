"""Offline mode put together: a relay with no upstream, its flags from a file
(``relay.edge.flags.bootstrap``), as Unleash Edge's ``offline`` subcommand. For CI,
development and air-gapped sites.

- **Keys.** Only ``client_tokens`` and ``frontend_tokens``, taken as Unleash Edge takes
  them (``relay.core.keys.offline_principal``): one in Unleash's form sees its project,
  any other string every flag of the file. With nobody to ask, any other key is 401.
- **Flags.** The client features API (and its delta, its stream, the Frontend API) from the
  file, checked every ``reload_interval`` seconds (0: read once); a file that stops reading
  keeps the copy held.
- **Counts.** SDKs' metrics and registrations are answered 202 and counted
  (``relay_metric_entries_total``), then dropped, or with ``offline_metrics = keep`` kept in
  ``buffer.db`` (bounded by ``buffer_max_bytes``, oldest evicted first), where a relay
  started later in the same data directory sends them upstream. Which one is said at start.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Sequence

from aiohttp import web

from relay.api import client, delta, frontend, frontend_metrics, ofrep, streaming
from relay.api.application import new_application, serve_routes
from relay.api.jobs import every
from relay.api.shared import Shared
from relay.api.state import DELTA_SOURCE, FRONTEND_SOURCE, FRONTENDS, INGEST, KEY_RESOLVER, READY
from relay.core.frontend import Frontends
from relay.core.ingest import Ingest, MetricsSink
from relay.core.ingest_batch import IdempotencyKey, IngestBatch
from relay.core.keys import Principal, hash_key, offline_principal
from relay.edge import backstage
from relay.edge.flags import api as flag_api
from relay.edge.flags.bootstrap import BootstrapError, FileFlags
from relay.edge.flags.deltas import FlagDeltas
from relay.edge.metrics.admitted import Admitted
from relay.edge.metrics.buffer_file import BufferFile
from relay.edge.metrics.buffer_monitor import BufferMonitor
from relay.edge.state import FLAG_CACHE
from relay.settings import Settings, SettingsError
from relay.settings.fields import OfflineMetrics
from relay.store.buffer_pages import BufferPages
from relay.store.reserve import open_with_room
from relay.wire.common import KeyType

log = logging.getLogger(__name__)

MONITOR_INTERVAL = 2.0
LISTEN_INTERVAL = 0.1  # the leader's look at what every worker wrote (a flood wakes the monitor)
PRUNE_INTERVAL = 3600.0


class ConfiguredKeys:
    """The ``KeyResolver`` of offline mode: the configured keys, and nothing else."""

    def __init__(self, keys: dict[str, Principal]) -> None:
        self._keys = {hash_key(key): principal for key, principal in keys.items()}

    def listing(self) -> tuple[list[tuple[Principal, str]], int]:
        return [(principal, "Trusted") for principal in self._keys.values()], 0

    async def current(self) -> None:
        """Configured keys change only with a restart."""

    def known(self, key: str) -> Principal | None:
        return self._keys.get(hash_key(key))

    async def resolve_many(self, keys: Sequence[str]) -> dict[str, Principal | None]:
        return {key: self.known(key) for key in keys}

    def refusal(self, key: str) -> str | None:
        return None


class Dropped:
    """The sink of ``offline_metrics = drop``: counted by ``Ingest``, then let go."""

    async def write(self, batch: IngestBatch, idempotency_key: IdempotencyKey | None) -> bool:
        return True


def keys(settings: Settings) -> dict[str, Principal]:
    """The configured keys (``InvalidKey`` for one that is not a key of its type); none is
    a ``SettingsError``, as in Edge: nobody could read the flags."""
    if not (settings.client_tokens or settings.frontend_tokens):
        raise SettingsError(
            "offline mode accepts only client_tokens and frontend_tokens: set one"
            " (RELAY_CLIENT_TOKENS)"
        )
    return {
        key: offline_principal(key, type)
        for type, configured in (
            (KeyType.CLIENT, settings.client_tokens),
            (KeyType.FRONTEND, settings.frontend_tokens),
        )
        for key in configured
    }


async def initialise(settings: Settings) -> None:
    """The file checked once before several workers start: one clear error."""
    _flags(settings)


def _flags(settings: Settings, shared: Shared | None = None) -> FileFlags:
    if settings.bootstrap_file is None:  # Settings validation ensures it
        raise SettingsError("offline mode needs bootstrap_file")
    flags = FileFlags(settings.bootstrap_file, keys(settings), shared)
    try:
        flags.load()
    except BootstrapError as exc:
        raise SettingsError(f"bootstrap_file cannot be served: {exc}") from None
    return flags


def build(settings: Settings, shared: Shared) -> web.Application:
    app = new_application(settings, shared)
    worker = shared.worker
    leader = worker == 0
    configured = keys(settings)
    flags = _flags(settings, shared)
    app[FLAG_CACHE] = flags
    app[DELTA_SOURCE] = FlagDeltas(flags)
    app[FRONTEND_SOURCE] = flags
    app[FRONTENDS] = Frontends()
    streaming.add_streams(app)
    resolver = ConfiguredKeys(configured)
    app[KEY_RESOLVER] = resolver
    sink: MetricsSink = Dropped()
    keep = settings.offline_metrics is OfflineMetrics.KEEP
    if keep:
        # every worker writes into buffer.db (taking turns through its lock): the file a
        # relay started here later flushes
        buffer = BufferFile(settings)
        db, reserve = buffer.db, buffer.reserve
        monitor = BufferMonitor(db, settings.buffer_max_bytes, reserve.size, reserve, set(), shared)
        store = buffer.counts()
        sink = Admitted(store, None, shared, settings.buffer_max_bytes)
    app[INGEST] = Ingest(sink)
    app[backstage.SOURCES] = backstage.Sources(
        flags.copies, resolver, BufferPages(db) if keep else None
    )

    async def started(app: web.Application) -> AsyncIterator[None]:
        if keep:
            await open_with_room(db, reserve)
            store.start()
        if leader:
            log.info(
                "offline mode: flags from the bootstrap file, no upstream",
                extra={
                    "bootstrap_file": str(settings.bootstrap_file),
                    "reload_interval": settings.reload_interval,
                    "client_keys": len(settings.client_tokens),
                    "frontend_keys": len(settings.frontend_tokens),
                    "metrics": f"kept in {settings.buffer_path}"
                    if keep
                    else "answered 202, counted, dropped",
                },
            )
        app[READY][0] = True
        yield
        app[READY][0] = False
        if keep:
            await store.stop()
            await db.close()

    app.cleanup_ctx.append(started)
    if settings.reload_interval > 0:
        app.cleanup_ctx.append(every(settings.reload_interval, flags.reload, "bootstrap-reload"))
    if keep and leader:
        app.cleanup_ctx.append(
            every(MONITOR_INTERVAL, monitor.check, "buffer-monitor", wake=monitor.wake)
        )
        app.cleanup_ctx.append(every(LISTEN_INTERVAL, monitor.listen, "buffer-writes"))
        app.cleanup_ctx.append(every(PRUNE_INTERVAL, store.prune_idempotency, "prune"))
    ofrep.add_ofrep(app, flags)
    app.cleanup_ctx.append(ofrep.counting)  # after started: it ends before the buffer closes
    serve_routes(
        app,
        [
            *client.ROUTES,
            *frontend_metrics.ROUTES,
            *flag_api.ROUTES,
            *delta.ROUTES,
            *streaming.ROUTES,
            *frontend.routes(not settings.disable_all_endpoint, ()),
            *ofrep.ROUTES,
            *backstage.routes(settings),
        ],
    )
    return app
