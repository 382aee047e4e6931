"""``/api/client/delta`` and ``/api/client/streaming`` in relay mode: the ``DeltaSource``
of the relay's flag cache. A key's events are those of its scope's copy
(``relay.edge.flags.revisions``), rendered from that copy's catalog, so the delta, the
stream and the client features answer agree. A key the upstream refused, or whose scope
has no copy and an unreachable upstream, gets what its poll would (401/403, 503); through
an outage, streams stay open on the copy held and new SDKs are hydrated from it.
"""

from __future__ import annotations

from dataclasses import dataclass

from relay.core.catalog import Scope
from relay.core.delta import Delta, delta
from relay.core.errors import DomainError
from relay.core.keys import Principal
from relay.edge.flags.cache import FlagCache


@dataclass(frozen=True, slots=True)
class KeyFlags:
    """One key's deltas."""

    cache: FlagCache
    key: str
    principal: Principal

    async def delta(self, scope: Scope, since: int | None) -> Delta:
        entry, rendered = await self.cache.entry(self.key, self.principal)
        catalog = self.cache.views.catalog(entry, rendered, inline=False)
        return delta(catalog, scope, entry.changes, since)

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


@dataclass(frozen=True, slots=True)
class FlagDeltas:
    cache: FlagCache

    def for_key(self, key: str, principal: Principal) -> KeyFlags:
        return KeyFlags(self.cache, key, principal)
