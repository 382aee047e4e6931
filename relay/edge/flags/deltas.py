"""``/api/client/delta`` and ``/api/client/streaming`` in relay mode: the ``DeltaSource``
of the relay's flag cache. A key's events are those of its scope's copy
(``relay.edge.flags.revisions``), rendered from that copy's catalog, so the delta, the
stream and the client features answer agree. A key the upstream refused, or whose scope
has no copy and an unreachable upstream, gets what its poll would (401/403, 503); through
an outage, streams stay open on the copy held and new SDKs are hydrated from it.

A client naming a revision past the copy held got it from another worker, which this one
is behind (a relay's workers load each other's copies from ``cache.db`` within two ticks;
offline mode's each reload the file on their own): it waits for that revision,
``CATCH_UP`` seconds at most, rather than being hydrated with flags older than its own.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from typing import Protocol

from relay.api.broadcast import Broadcast
from relay.core.catalog import Rendered, Scope
from relay.core.delta import Delta, delta
from relay.core.errors import DomainError
from relay.core.keys import Principal
from relay.edge.flags.entries import Entry
from relay.edge.flags.store import FlagScope
from relay.edge.flags.views import Views

CATCH_UP = 3.0
MAX_DELTAS = 1_000
MAX_DELTA_BYTES = 64 * 1024 * 1024


class CopySource(Protocol):
    """The copies deltas are put together from: the flag cache's
    (``relay.edge.flags.cache``), or offline mode's file's (``relay.edge.flags.bootstrap``)."""

    views: Views

    @property
    def moved(self) -> Broadcast:
        """Woken when a copy's revision moves."""
        ...

    async def entry(self, key: str, principal: Principal) -> tuple[Entry, Rendered]: ...


@dataclass(frozen=True, slots=True)
class KeyFlags:
    """One key's deltas."""

    cache: CopySource
    key: str
    principal: Principal

    held: Deltas

    async def delta(self, scope: Scope, since: int | None) -> Delta:
        """Put together once per scope, query and revision for every stream that asks."""
        entry, rendered = await self.cache.entry(self.key, self.principal)
        if since is not None and since > entry.changes.revision:
            with contextlib.suppress(TimeoutError):  # a revision of no worker's: hydrated
                await asyncio.wait_for(self._reached(since), CATCH_UP)
            entry, rendered = await self.cache.entry(self.key, self.principal)
        changes = entry.changes
        since = since if since is not None and changes.holds(since) else None
        key = (entry.scope, scope, since, changes.revision)
        found = self.held.get(key)
        if found is None:
            catalog = self.cache.views.catalog(entry, rendered, inline=False)
            found = delta(catalog, scope, changes, since)
            self.held.put(key, found)
        return found

    async def _reached(self, revision: int) -> None:
        """Returns once the scope's copy is at ``revision`` or past it."""
        while (await self.cache.entry(self.key, self.principal))[0].changes.revision < revision:
            await self.cache.moved.wait()

    async def changed(self, revision: int) -> None:
        """Returns once the scope's copy is at another revision than ``revision``: a later
        one, or (its ``cache.db`` lost, workers disagreeing) one the client gets a
        hydration at."""
        while True:
            try:
                entry, _ = await self.cache.entry(self.key, self.principal)
            except DomainError:
                return  # refused meanwhile: the stream's next delta says so
            if entry.changes.revision != revision:
                return
            await self.cache.moved.wait()


class Deltas:
    """Deltas put together, ``MAX_DELTAS`` and ``MAX_DELTA_BYTES`` at most (then all
    dropped: made-up queries and revisions cannot grow memory; a change makes them stale)."""

    def __init__(self) -> None:
        self._held: dict[tuple[FlagScope, Scope, int | None, int], Delta] = {}
        self._bytes = 0

    def get(self, key: tuple[FlagScope, Scope, int | None, int]) -> Delta | None:
        return self._held.get(key)

    def put(self, key: tuple[FlagScope, Scope, int | None, int], found: Delta) -> None:
        if len(self._held) >= MAX_DELTAS or self._bytes + len(found.body) > MAX_DELTA_BYTES:
            self._held.clear()
            self._bytes = 0
        self._held[key] = found
        self._bytes += len(found.body)


class FlagDeltas:
    def __init__(self, cache: CopySource) -> None:
        self._cache = cache
        self._held = Deltas()

    def for_key(self, key: str, principal: Principal) -> KeyFlags:
        return KeyFlags(self._cache, key, principal, self._held)
