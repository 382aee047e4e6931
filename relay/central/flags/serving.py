"""The client API's answers, cached so that SDK polls never touch the database (the deltas
and streams: ``served_deltas``; the Frontend API and OFREP: ``frontend_source``).

This worker holds a snapshot of every flag (``records.load_state``), each flag rendered once
per environment and segment form into a catalog (``relay.core.catalog``), and, per scope (a
key's projects and environment, the query's filters, the SDK's segment support), the answer
put together from it: its bytes and ETag. A request's work is bounded by what it returns,
not by how many flags there are. All of it stands until the flag revision moves on:

- a write through this worker tells the cache its revision when it commits, so the next
  poll here sees it, and counts it in the memory the workers share (``committed``): every
  other worker reads the revision before its next answer (``relay.api.shared.CatchUp``),
  so no worker serves flags older than another has served since;
- every ``POLL_INTERVAL`` the revision is read from the database (one row), so a write by
  another worker or instance (or ``relay flags``) is seen within that interval, and the
  snapshot is reloaded then, before any SDK asks; while streams wait for changes, every
  ``STREAM_POLL_INTERVAL``, so that they get another worker's write on SQLite within a
  fraction of a second too (on PostgreSQL its NOTIFY wakes them at once: ``heard``).

If the database cannot be read, the last snapshot keeps being served (SDKs keep their
flags) and a reload is tried again after ``RETRY_INTERVAL``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict

from prometheus_client import Counter, Gauge

from relay.api.broadcast import Broadcast
from relay.api.client_features import built, derived
from relay.api.shared import CatchUp, Kind, Shared
from relay.central.flags.records import Reads, current_revision, load_served
from relay.core.client_features import Catalog, Rendered, Scope, catalog
from relay.core.delta import Changes
from relay.core.errors import StorageError
from relay.core.flags import FlagState

log = logging.getLogger(__name__)

POLL_INTERVAL = 1.0
STREAM_POLL_INTERVAL = 0.2
RETRY_INTERVAL = 1.0
MAX_SCOPES = 1000
MAX_BYTES = 64 * 1024 * 1024
"""Answers kept (and their bytes at most), least recently used first out: an answer is
cheap to put together again, and the ``namePrefix`` or ``project`` values a client makes up
must not grow memory without bound. Catalogs are one per environment and segment form."""

REVISION_CHANNEL = "relay_flag_revision"
"""What PostgreSQL announces each flag write's revision on (a trigger, as it commits)."""

LOADS = Counter("relay_flag_snapshot_loads_total", "Flag snapshots read from the database")
HEARD = Counter(
    "relay_flag_revision_notifications_total",
    "Flag writes announced by the database (PostgreSQL), this instance's included",
)
REVISION = Gauge(
    "relay_flag_revision", "Flag revision of the snapshot served", multiprocess_mode="max"
)


class ClientFeaturesCache:
    def __init__(
        self,
        db: Reads,
        max_scopes: int = MAX_SCOPES,
        max_bytes: int = MAX_BYTES,
        shared: Shared | None = None,
    ) -> None:
        """``shared``: the memory of the service's workers (None: one process alone)."""
        self._db = db
        self._catch_up = None if shared is None else CatchUp(shared, Kind.FLAGS, self.poll)
        self._max_scopes = max_scopes
        self._max_bytes = max_bytes
        self._bytes = 0
        self._newest = 0
        self._state: FlagState | None = None
        self._changes = Changes(0, 0)
        self._polled = 0.0
        self._moved = Broadcast()
        """Streams waiting in ``changed``: a local write is loaded at once for them."""
        self._reloading: asyncio.Task[FlagState] | None = None
        self._rendered: OrderedDict[Scope, Rendered] = OrderedDict()
        self._catalogs: dict[tuple[str, bool], Catalog] = {}
        self._loading = asyncio.Lock()
        self._retry_at = 0.0
        self._unreadable = False

    def written(self, revision: int) -> None:
        """A flag write with this revision has committed: streams waiting for a change
        get it now, not at the next poll."""
        self._newest = max(self._newest, revision)
        behind = self._state is not None and self._state.revision < revision
        idle = self._reloading is None or self._reloading.done()
        if behind and idle and len(self._moved):
            self._reloading = asyncio.get_running_loop().create_task(self._current())

    def committed(self, revision: int) -> None:
        """A flag write through this worker committed: ``written``, and told the other
        workers."""
        self.written(revision)
        if self._catch_up is not None:
            self._catch_up.published()

    async def _caught_up(self) -> None:
        if self._catch_up is not None:
            await self._catch_up.current()

    def heard(self, payload: str) -> None:
        """Another instance's write was announced (``REVISION_CHANNEL``): streams get it
        now, not at the next read of the revision."""
        HEARD.inc()
        if payload.isdigit():
            self.written(int(payload))

    async def snapshot(self) -> tuple[FlagState, Changes]:
        """The flags served now, caught up with the other workers' writes, and the change
        log that came with them (``relay.central.flags.served_deltas``)."""
        await self._caught_up()
        state = await self._current()
        return state, self._changes

    async def changed(self, revision: int) -> None:
        """Returns once the flags served are past ``revision``."""
        while True:
            state = await self._current()
            if state.revision > revision:
                return
            await self._moved.wait()

    async def answer(self, scope: Scope) -> Rendered:
        await self._caught_up()
        state = self._state
        if state is None or state.revision < self._newest:
            state = await self._current()
        rendered = self._rendered.get(scope)
        if rendered is None:
            rendered = self._rendered[scope] = derived(self.catalog(state, scope).answer(scope))
            self._bytes += len(rendered.body)
            while len(self._rendered) > 1 and (
                len(self._rendered) > self._max_scopes or self._bytes > self._max_bytes
            ):
                self._bytes -= len(self._rendered.popitem(last=False)[1].body)
        else:
            self._rendered.move_to_end(scope)
        return rendered

    async def next_change(self) -> None:
        """Returns once another snapshot is served (waiting, it polls the revision as
        streams do)."""
        await self._moved.wait()

    async def feature(self, scope: Scope, name: str) -> bytes | None:
        await self._caught_up()
        return self.catalog(await self._current(), scope).feature(scope, name)

    def catalog(self, state: FlagState, scope: Scope) -> Catalog:
        """The snapshot's flags as ``scope``'s environment serves them, rendered once."""
        key = (scope.environment, scope.inline_segments)
        found = self._catalogs.get(key)
        if found is None:
            found = self._catalogs[key] = built(catalog(state, *key))
        return found

    async def tick(self) -> None:
        """The periodic job, every ``STREAM_POLL_INTERVAL``: ``poll`` every
        ``POLL_INTERVAL``, or at each tick while streams wait."""
        now = time.monotonic()
        if len(self._moved) or now >= self._polled + POLL_INTERVAL:
            self._polled = now
            await self.poll()

    async def poll(self) -> None:
        """Read the revision; reload now if it moved, so SDKs do not wait for it."""
        try:
            self.written(await current_revision(self._db))
        except StorageError as exc:
            self._trouble(exc)
            return
        self._readable()
        if self._state is not None and self._state.revision < self._newest:
            await self._current()

    async def _current(self) -> FlagState:
        state = self._state
        if state is not None and (state.revision >= self._newest or self._waiting()):
            return state
        async with self._loading:
            state = self._state
            if state is None or (state.revision < self._newest and not self._waiting()):
                state = await self._load(state)
        return state

    async def _load(self, stale: FlagState | None) -> FlagState:
        try:
            state, changes = await load_served(self._db)
        except StorageError as exc:
            self._retry_at = time.monotonic() + RETRY_INTERVAL
            self._trouble(exc)
            if stale is None:
                raise
            return stale
        self._readable()
        LOADS.inc()
        REVISION.set(state.revision)
        self._state = state
        self._changes = changes
        self._rendered.clear()
        self._catalogs.clear()
        self._moved.wake()
        self._bytes = 0
        self.written(state.revision)
        return state

    def _waiting(self) -> bool:
        return time.monotonic() < self._retry_at

    def _readable(self) -> None:
        if self._unreadable:
            log.info("flags readable again")
            self._unreadable = False

    def _trouble(self, exc: StorageError) -> None:
        if not self._unreadable:
            log.warning(
                "flags cannot be read: serving the last snapshot", extra={"error": str(exc)}
            )
            self._unreadable = True
