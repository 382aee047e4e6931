"""The standalone's ``DeltaSource`` (``/api/client/delta``, ``/api/client/streaming``): every
key's deltas come from the one flag revision of the snapshot the client API serves
(``relay.central.flags.serving``), each put together once per scope and revision for every
stream and poll that asks."""

from __future__ import annotations

from relay.central.flags.serving import MAX_BYTES, MAX_SCOPES, ClientFeaturesCache
from relay.core.client_features import Scope
from relay.core.delta import Delta, delta
from relay.core.flags import FlagState
from relay.core.keys import Principal


class ServedDeltas:
    def __init__(
        self, served: ClientFeaturesCache, max_scopes: int = MAX_SCOPES, max_bytes: int = MAX_BYTES
    ) -> None:
        self._served = served
        self._max_scopes = max_scopes
        self._max_bytes = max_bytes
        self._of: FlagState | None = None  # the snapshot the deltas kept were made from
        self._deltas: dict[tuple[Scope, int | None], Delta] = {}
        self._bytes = 0

    def for_key(self, key: str, principal: Principal) -> ServedDeltas:
        """Every key's deltas come from the one flag revision."""
        return self

    async def delta(self, scope: Scope, since: int | None) -> Delta:
        """The delta that brings a client at ``since`` up to date (``relay.core.delta``).
        Kept within the bounds of the answers (a made-up revision is a hydration, kept once
        per scope; made-up scopes and revisions cannot grow memory past them), and only
        while the snapshot they were made from is served."""
        state, changes = await self._served.snapshot()
        if state is not self._of:
            self._of, self._bytes = state, 0
            self._deltas.clear()
        key = (scope, since if since is not None and changes.holds(since) else None)
        found = self._deltas.get(key)
        if found is None:
            found = delta(self._served.catalog(state, scope), scope, changes, key[1])
            self._bytes += len(found.body)
            if len(self._deltas) >= self._max_scopes or self._bytes > self._max_bytes:
                self._deltas.clear()
                self._bytes = len(found.body)
            self._deltas[key] = found
        return found

    async def changed(self, revision: int) -> None:
        """Returns once the flags served are past ``revision``."""
        await self._served.changed(revision)
