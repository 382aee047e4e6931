"""The standalone's flags for the Frontend API (``FrontendSource``) and OpenFeature
(``EvaluationSource``): a key's scope as the client API serves it
(``relay.central.flags.serving``), its projects in its environment, segments as ids."""

from __future__ import annotations

from relay.central.flags.serving import ClientFeaturesCache
from relay.core.client_features import Rendered, Scope, projects_of
from relay.core.keys import Principal


class ServedFlags:
    def __init__(self, served: ClientFeaturesCache) -> None:
        self._served = served

    async def document(self, principal: Principal) -> Rendered:
        """A frontend key's flags: its projects in its environment, segments as ids."""
        projects = projects_of(principal.projects, ())
        return await self._served.answer(Scope(principal.environment, projects, None, False))

    async def flags(self, key: str, principal: Principal) -> Rendered:
        """A key's flags for OFREP: a frontend or client key's alike."""
        return await self.document(principal)

    async def next_change(self) -> None:
        """Returns once another snapshot is served."""
        await self._served.next_change()
