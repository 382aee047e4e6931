"""API keys: issued, listed and revoked from the admin API, the web page and the command
line, and issued from the start-up configuration."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace

from relay.central.key_store import KeyRecord, KeyStore, new_key_id
from relay.core.audit import Actor
from relay.core.errors import InvalidInput
from relay.core.keys import KeySpec, new_key, parse_key
from relay.wire.admin import CreateApiKey
from relay.wire.common import KeyType

log = logging.getLogger(__name__)


class KeyService:
    def __init__(self, store: KeyStore) -> None:
        self._store = store

    async def issue(self, actor: Actor, request: CreateApiKey) -> tuple[str, KeyRecord]:
        """A new random key: its secret (which exists only in the returned value) and its
        record. Every field given must hold: an admin key is for all environments and
        projects, a client or frontend key's environment and projects must exist."""
        projects = tuple(request.projects)
        if request.project is not None:
            projects = (request.project,)
        match request.type:
            case KeyType.ADMIN:
                environment = "*"
                if request.environment not in (None, "*") or projects != ("*",):
                    raise InvalidInput("An admin key is for every environment and project (*)")
            case KeyType.CLIENT | KeyType.FRONTEND:
                environment = request.environment or ""
                if environment in ("", "*"):
                    raise InvalidInput(f"A {request.type} key needs an environment")
                # that they exist is checked as the key is stored (KeyStore.add)
        spec = new_key(request.type, environment, projects)
        if request.tokenName is not None:
            spec = KeySpec(spec.secret, replace(spec.principal, token_name=request.tokenName))
        key_id = new_key_id()
        await self._store.add(spec, key_id, actor)
        return spec.secret, KeyRecord(key_id, spec.principal, time.time(), None)

    async def listed(self) -> list[KeyRecord]:
        return await self._store.listed()

    async def revoke(self, actor: Actor, name_or_id: str) -> KeyRecord:
        record = await self._store.revoke(actor, name_or_id)
        log.info("API key revoked", extra={"key": record.principal.display, "id": record.id})
        return record

    async def ensure(self, configured: Mapping[KeyType, Sequence[str]]) -> int:
        """Create configured keys (of each type) that are absent (idempotent); returns how
        many were new."""
        specs = [parse_key(k, type) for type, keys in configured.items() for k in keys]
        created = 0
        for spec in specs:
            if await self._store.add(spec):
                log.info("created configured API key", extra={"key": spec.principal.display})
                created += 1
        return created

    async def bootstrap(self) -> list[KeySpec]:
        """On a store with no key at all, one admin and one ``development`` client key, so a
        fresh service is usable at once. Returned (with secrets) to be shown once."""
        if await self._store.count() > 0:
            return []
        specs = [
            new_key(KeyType.ADMIN, "*", ("*",)),
            new_key(KeyType.CLIENT, "development", ("default",)),
        ]
        for spec in specs:
            await self._store.add(spec)
        return specs
