"""A frontend key's flags at a relay. The upstream answers ``/api/client/features`` to
client keys only, so a frontend key's flags come from a copy held for client keys of its
environment that see all of its projects, narrowed to them (as Unleash Edge does); with no
such copy yet, one is fetched with a configured client key that does (``client_tokens``,
then ``upstream_tokens``). A relay with neither answers 403 with what to configure, and
says so at start for each of its ``frontend_tokens``. OFREP evaluates a frontend key's flags
from here, and a client key's from the key's own copy (``FrontendFlags.flags``).

A multi-project key (``[]:environment.secret``) names none of its projects: configured as
a frontend key it would be taken to see every project, so it is refused at start (the
relay learns such a key, with its projects, from the upstream's ``/edge/validate``), and
as a client key it never fetches for a frontend key (its copy is its own, ``own``).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Sequence

from relay.core.client_features import Rendered, Scope, projects_of
from relay.core.errors import Forbidden, Unauthorized
from relay.core.keys import InvalidKey, Principal, parse_key
from relay.edge.flags.cache import MAX_SCOPE_KEYS, FlagCache
from relay.edge.flags.entries import Entry
from relay.edge.flags.store import FlagScope
from relay.wire.common import KeyType

log = logging.getLogger(__name__)


class FrontendFlags:
    def __init__(self, cache: FlagCache, keys: Sequence[str], frontend: Sequence[str]) -> None:
        """``keys``: client keys that may fetch; ``frontend``: the ``frontend_tokens``."""
        self._cache = cache
        # the copy a scope is served from, as chosen when the copies were as ``generation``
        self._covering: dict[Scope, tuple[int, FlagScope]] = {}
        self._keys = {
            k: parse_key(k, KeyType.CLIENT).principal for k in keys if not k.startswith("[]:")
        }
        for key in frontend:
            principal = parse_key(key, KeyType.FRONTEND).principal
            if key.startswith("[]:"):
                raise InvalidKey(
                    f"{principal.display} in frontend_tokens: a multi-project frontend key"
                    " names none of its projects; leave it out, the relay learns it upstream"
                )
            if not any(covers(_held(c), _scope(principal)) for c in self._keys.values()):
                log.warning(
                    "no client key in client_tokens or upstream_tokens sees this frontend"
                    " key's projects: it is answered 403 until an SDK with such a key polls",
                    extra={"key": principal.display},
                )

    async def document(self, principal: Principal) -> Rendered:
        await self._cache.current()
        scope = _scope(principal)
        entry = self._held(scope)
        if entry is not None:
            rendered = await self._cache.stored(entry)  # a new copy: once it is stored
            if rendered is not None:
                return self._cache.views.get(entry, rendered, scope)
        for key, client in self._keys.items():
            if covers(_held(client), scope):
                with contextlib.suppress(Forbidden, Unauthorized):  # the next key, if any
                    return await self._cache.answer(key, client, scope)
        raise Forbidden(
            f"No client key of environment {principal.environment} that sees this frontend"
            " key's projects has reached this relay: add one to client_tokens"
        )

    async def flags(self, key: str, principal: Principal) -> Rendered:
        """A key's flags for OFREP (``EvaluationSource``): a frontend key's as above, a
        client key's from its own copy (fetched with it, as its SDK's poll would)."""
        if principal.type is KeyType.FRONTEND:
            return await self.document(principal)
        scope = Scope(principal.environment, projects_of(principal.projects, ()), None, False)
        return await self._cache.answer(key, principal, scope)

    async def next_change(self) -> None:
        """Returns once a copy's revision moved."""
        await self._cache.moved.wait()

    def _held(self, scope: Scope) -> Entry | None:
        """The copy held for client keys that cover ``scope``: of those with a copy, the
        one every worker picks alike (``_preferred``), so that a frontend key is served from
        one copy whichever worker answers. Two copies of the same flags are refreshed at
        moments of their own (or one's refresh fails): served from one by a worker and from
        the other by another, a change went back. Chosen again only when a scope gets its
        first copy or leaves."""
        generation = self._cache.generation
        last = self._covering.get(scope)
        entry = None if last is None or last[0] != generation else self._cache.copy_of(last[1])
        if entry is None or entry.rendered is None:
            held = [
                e
                for e in self._cache.copies()
                if e.rendered and e.scope.own is None and covers(e.scope, scope)
            ]
            if not held:
                return None
            entry = min(held, key=lambda e: _preferred(e.scope))
            if len(self._covering) >= MAX_SCOPE_KEYS:
                self._covering.clear()
            self._covering[scope] = (generation, entry.scope)
        return entry


def _preferred(scope: FlagScope) -> tuple[bool, int, str]:
    """The order covering copies are chosen in, the same in every worker: named projects
    before all of them (fewer flags to narrow), the fewest first, then by id."""
    return "*" in scope.projects, len(scope.projects), scope.id


def _scope(principal: Principal) -> Scope:
    return Scope(principal.environment, projects_of(principal.projects, ()), None, False)


def _held(client: Principal) -> FlagScope:
    return FlagScope(client.environment, client.projects)


def covers(held: FlagScope, scope: Scope) -> bool:
    """Whether keys of ``held`` see every flag ``scope`` may: the same environment, and
    all projects or a superset of its."""
    if held.environment != scope.environment:
        return False
    return "*" in held.projects or (
        scope.projects is not None and set(scope.projects) <= set(held.projects)
    )
