"""The client features answers of a source holding one ``Entry`` per scope."""

from __future__ import annotations

from abc import ABC, abstractmethod

from relay.core.client_features import Rendered, Scope
from relay.core.keys import Principal
from relay.edge.flags.entries import Entry
from relay.edge.flags.views import Views


class EntrySource(ABC):
    """The client features answers of a source that holds one ``Entry`` per scope (the
    relay's copies, offline mode's file): each key's entry, narrowed through ``views``."""

    views: Views

    @abstractmethod
    async def entry(self, key: str, principal: Principal) -> tuple[Entry, Rendered]:
        """The entry ``key`` is served from, and its answer."""

    async def answer(self, key: str, principal: Principal, scope: Scope) -> Rendered:
        entry, rendered = await self.entry(key, principal)
        return self.views.get(entry, rendered, scope)

    async def feature(
        self, key: str, principal: Principal, scope: Scope, name: str
    ) -> bytes | None:
        entry, rendered = await self.entry(key, principal)
        return self.views.feature(entry, rendered, scope, name)
