"""A frontend key's flags at a relay. The upstream answers ``/api/client/features`` to
client keys only, so a frontend key's flags come from a copy held for client keys of its
environment that see all of its projects, narrowed to them (as Unleash Edge does); with no
such copy yet, one is fetched with a configured client key that does (``client_tokens``,
then ``upstream_tokens``). A relay with neither answers 403 with what to configure.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

from relay.core.client_features import Rendered, Scope, projects_of
from relay.core.errors import Forbidden, Unauthorized
from relay.core.keys import Principal, parse_key
from relay.edge.flags.cache import FlagCache
from relay.edge.flags.store import FlagScope
from relay.wire.common import KeyType


class FrontendFlags:
    def __init__(self, cache: FlagCache, keys: Sequence[str]) -> None:
        self._cache = cache
        self._keys = {k: parse_key(k, KeyType.CLIENT).principal for k in keys}

    async def document(self, principal: Principal) -> Rendered:
        scope = Scope(principal.environment, projects_of(principal.projects, ()), None, False)
        held = self._cache.held(scope, lambda s: s.own is None and covers(s, scope))
        if held is not None:
            return held
        for key, client in self._keys.items():
            if covers(FlagScope(client.environment, client.projects), scope):
                with contextlib.suppress(Forbidden, Unauthorized):  # the next key, if any
                    return await self._cache.answer(key, client, scope)
        raise Forbidden(
            f"No client key of environment {principal.environment} that sees this frontend"
            " key's projects has reached this relay: add one to client_tokens"
        )


def covers(held: FlagScope, scope: Scope) -> bool:
    """Whether keys of ``held`` see every flag ``scope`` may: the same environment, and
    all projects or a superset of its."""
    if held.environment != scope.environment:
        return False
    return "*" in held.projects or (
        scope.projects is not None and set(scope.projects) <= set(held.projects)
    )
