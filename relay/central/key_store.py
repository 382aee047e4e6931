"""API keys of the central service, stored only as SHA-256 hashes (see ``relay.core.keys``):
resolved from a cache, listed, revoked, and their last use recorded. Their rows are
``KeyRecords``' (``relay.central.key_records`` on either backend)."""

from __future__ import annotations

import contextlib
import secrets
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from aiohttp import web

from relay.api.jobs import every
from relay.api.shared import CatchUp, Kind, Shared
from relay.core.audit import Actor
from relay.core.errors import StorageError
from relay.core.keys import KeySpec, Principal, hash_key

POLL_INTERVAL = 1.0
"""Seconds between two reads of the key revision: a key revoked through another worker or
instance stops working here within about that (docs/standalone.md, "Keys")."""
USE_INTERVAL = 5.0
"""Seconds between two writes of the keys' last use: never a write per request."""


@dataclass(frozen=True, slots=True)
class KeyRecord:
    """A stored key as listed: never its secret."""

    id: str
    principal: Principal
    created_at: float
    last_used_at: float | None


class KeyRecords(Protocol):
    """Stored keys by the hash of their secret, and the key revision: a number that moves
    whenever a key is revoked or loses a project, on any instance."""

    async def revision(self) -> int: ...

    async def principals(self, digests: Sequence[str] | None = None) -> dict[str, Principal]:
        """The keys with these hashes that exist (every key: None)."""
        ...

    async def add(
        self, digest: str, key_id: str, principal: Principal, actor: Actor | None
    ) -> bool:
        """Store a key unless one with this hash exists; True when it was created. A key
        issued by an ``actor`` is logged (never its secret), and its environment and
        projects must exist (``InvalidInput``), held until it is in."""
        ...

    async def count(self) -> int: ...

    async def listed(self) -> list[tuple[str, KeyRecord]]:
        """Every key with its hash, oldest first, with its last use as stored."""
        ...

    async def revoke(self, actor: Actor, name_or_id: str) -> tuple[str, KeyRecord]:
        """Delete the key with this id, else the one key with this name (``NotFound``,
        ``Conflict`` when the name is several keys'), with the web sessions opened with
        it; the revision moves and the revocation is logged. Its hash and record."""
        ...

    async def write_uses(self, used: Mapping[str, float]) -> None:
        """Last uses by hash, each kept only when later than the one stored."""
        ...


class KeyStore:
    """Resolves presented keys. Every valid key is held in memory once loaded (``load`` at
    start, then each key created or found), since keys are read on every request and are
    few; ``known`` answers from there, so callers with valid keys pass the per-address
    limit of failures (``relay.api.throttle``) untouched. A key created by another instance
    sharing the database is found on its first use; one revoked there is dropped from memory
    when ``poll`` sees the key revision move (every ``POLL_INTERVAL``). The workers of one
    instance decide as one: a worker that revoked a key, or saw the revision move, says so
    in the memory they share before it answers, and the others poll before they answer
    (``current``, ``relay.api.shared``).

    The last use of each key is noted in memory as it is resolved and written every
    ``USE_INTERVAL`` by ``write_uses``: what a crash loses is a few seconds of "last used"."""

    def __init__(self, records: KeyRecords, shared: Shared | None = None) -> None:
        """``shared``: the memory of the service's workers (None: a command line's store)."""
        self._records = records
        self._cache: dict[str, Principal] = {}
        self._revision = -1
        self._used: dict[str, float] = {}
        self._catch_up = None if shared is None else CatchUp(shared, Kind.KEYS, self.poll)

    async def load(self) -> None:
        revision = await self._records.revision()
        self._cache = await self._records.principals()
        self._revision = revision

    async def poll(self) -> None:
        """Drop keys revoked elsewhere: reload when the key revision moved."""
        if await self._records.revision() != self._revision:
            await self.load()
            self._published()

    async def current(self) -> None:
        if self._catch_up is not None:
            await self._catch_up.current()

    def _published(self) -> None:
        if self._catch_up is not None:
            self._catch_up.published()

    def known(self, key: str) -> Principal | None:
        digest = hash_key(key)
        found = self._cache.get(digest)
        if found is not None:
            self._used[digest] = time.time()
        return found

    async def resolve(self, key: str) -> Principal | None:
        return (await self.resolve_many([key]))[key]

    def refusal(self, key: str) -> str | None:
        return None  # a key this service does not hold is simply not one

    async def resolve_many(self, keys: Sequence[str]) -> dict[str, Principal | None]:
        """One lookup for the keys not in memory."""
        digests = {key: hash_key(key) for key in keys}
        missing = sorted({d for d in digests.values() if d not in self._cache})
        fresh: dict[str, Principal] = {}
        if missing:
            revision = self._revision
            fresh = await self._records.principals(missing)
            if revision == self._revision:  # else a reload saw revocations this read may predate
                self._cache.update(fresh)
        found = {
            key: self._cache.get(digest) or fresh.get(digest) for key, digest in digests.items()
        }
        now = time.time()
        self._used.update((digests[key], now) for key, p in found.items() if p is not None)
        return found

    async def add(
        self, spec: KeySpec, key_id: str | None = None, actor: Actor | None = None
    ) -> bool:
        """Store a key unless it exists; True when it was created. A key issued by an
        ``actor`` (not from the configuration) is logged, never its secret, and its
        environment and projects must exist."""
        digest = hash_key(spec.secret)
        created = await self._records.add(digest, key_id or new_key_id(), spec.principal, actor)
        if created:
            self._cache[digest] = spec.principal
        return created

    async def count(self) -> int:
        return await self._records.count()

    async def listed(self) -> list[KeyRecord]:
        """Every key, oldest first, with its last use (this worker's newer notes included)."""
        return [self._noted(digest, record) for digest, record in await self._records.listed()]

    async def revoke(self, actor: Actor, name_or_id: str) -> KeyRecord:
        """Delete the key with this id, else the one key with this name (Conflict when the
        name is several keys'). It stops working here at once, elsewhere at their next
        ``poll``; the web page's sessions opened with it end with it."""
        digest, stored = await self._records.revoke(actor, name_or_id)
        record = self._noted(digest, stored)
        # this store's revision is left behind on purpose: its next poll reloads, dropping a
        # copy that a read begun before this commit may have cached meanwhile
        self._cache.pop(digest, None)
        self._used.pop(digest, None)
        self._published()
        return record

    async def write_uses(self) -> None:
        """Write the last uses noted since the previous call, in one transaction."""
        used, self._used = self._used, {}
        if used:
            await self._records.write_uses(used)

    def _noted(self, digest: str, record: KeyRecord) -> KeyRecord:
        """The record with this worker's note of its last use when that is newer."""
        noted = self._used.get(digest)
        last = record.last_used_at
        if noted is None or (last is not None and noted <= last):
            return record
        return KeyRecord(record.id, record.principal, record.created_at, noted)


def kept_current(store: KeyStore) -> Callable[[web.Application], AsyncIterator[None]]:
    """The key store's jobs while the application runs: the key revision polled every
    ``POLL_INTERVAL``, last uses written every ``USE_INTERVAL`` and once more at the end
    (before the database closes; a database already away loses those few seconds)."""
    polling = every(POLL_INTERVAL, store.poll, "key-revision")
    writing = every(USE_INTERVAL, store.write_uses, "key-uses")

    async def ctx(app: web.Application) -> AsyncIterator[None]:
        poll, write = (
            contextlib.asynccontextmanager(polling),
            contextlib.asynccontextmanager(writing),
        )
        async with poll(app), write(app):
            yield
        with contextlib.suppress(StorageError):
            await store.write_uses()

    return ctx


def shown(key_id: str, principal: Principal) -> dict[str, Any]:
    """A key as its events show it: what the admin API lists, never a secret."""
    return {
        "id": key_id,
        "tokenName": principal.token_name,
        "type": principal.type.value,
        "environment": principal.environment,
        "projects": list(principal.projects),
    }


def new_key_id() -> str:
    """Random, never derived from the secret: an id may be shown and logged."""
    return secrets.token_hex(8)
