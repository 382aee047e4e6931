"""API keys of the central service, stored only as SHA-256 hashes (see ``relay.core.keys``),
on either backend: resolved from a cache, listed, revoked, and their last use recorded."""

from __future__ import annotations

import contextlib
import json
import secrets
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from relay.api.jobs import every
from relay.api.shared import CatchUp, Kind, Shared
from relay.central.events import EventLog
from relay.core.audit import Actor, EventType
from relay.core.errors import Conflict, InvalidInput, NotFound, StorageError
from relay.core.keys import KeySpec, Principal, hash_key
from relay.store.sql import Database, Row, Transaction
from relay.wire.common import KeyType

_COLUMNS = "secret_hash, display, type, environment, projects, token_name"
_LISTED = f"id, {_COLUMNS}, created_at, last_used_at"

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

    def __init__(
        self, db: Database, events: EventLog | None = None, shared: Shared | None = None
    ) -> None:
        """``events``: where issuing and revoking keys is logged; ``shared``: the memory
        of the service's workers (None: a command line's store)."""
        self._db = db
        self._events = EventLog(db) if events is None else events
        self._cache: dict[str, Principal] = {}
        self._revision = -1
        self._used: dict[str, float] = {}
        self._catch_up = None if shared is None else CatchUp(shared, Kind.KEYS, self.poll)

    async def load(self) -> None:
        revision = await self._current_revision()
        rows = await self._db.fetch_all(f"SELECT {_COLUMNS} FROM api_tokens")
        self._cache = {row["secret_hash"]: principal_of(row) for row in rows}
        self._revision = revision

    async def poll(self) -> None:
        """Drop keys revoked elsewhere: reload when the key revision moved."""
        if await self._current_revision() != self._revision:
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
            marks = ", ".join("?" * len(missing))
            revision = self._revision
            rows = await self._db.fetch_all(
                f"SELECT {_COLUMNS} FROM api_tokens WHERE secret_hash IN ({marks})", missing
            )
            fresh = {row["secret_hash"]: principal_of(row) for row in rows}
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
        environment and projects must exist (``_hold_scope``)."""
        p = spec.principal
        digest = hash_key(spec.secret)
        key_id = key_id or new_key_id()
        async with self._db.transaction() as tx:
            if actor is not None and p.type is not KeyType.ADMIN:
                await _hold_scope(tx, p)
            created = await tx.execute(
                "INSERT INTO api_tokens (id, secret_hash, display, type, environment, projects,"
                " token_name, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (secret_hash) DO NOTHING",
                (
                    key_id,
                    digest,
                    p.display,
                    p.type.value,
                    p.environment,
                    json.dumps(list(p.projects)),
                    p.token_name,
                    time.time(),
                ),
            )
            if created == 1 and actor is not None:
                await self._events.record(
                    tx, actor, EventType.API_TOKEN_CREATED, **_scope(p), after=shown(key_id, p)
                )
        if created == 1:
            self._cache[digest] = p
        return created == 1

    async def count(self) -> int:
        row = await self._db.fetch_one("SELECT count(*) AS n FROM api_tokens")
        return int(row["n"]) if row is not None else 0

    async def listed(self) -> list[KeyRecord]:
        """Every key, oldest first, with its last use (this worker's newer notes included)."""
        rows = await self._db.fetch_all(f"SELECT {_LISTED} FROM api_tokens ORDER BY created_at")
        return [self._record(row) for row in rows]

    async def revoke(self, actor: Actor, name_or_id: str) -> KeyRecord:
        """Delete the key with this id, else the one key with this name (Conflict when the
        name is several keys'). It stops working here at once, elsewhere at their next
        ``poll``; the web page's sessions opened with it end with it."""

        async def work(tx: Transaction) -> tuple[str, KeyRecord]:
            by_id = f"SELECT {_LISTED} FROM api_tokens WHERE id = ?"
            rows = await tx.fetch_all(by_id, (name_or_id,))
            if not rows:
                rows = await tx.fetch_all(
                    f"SELECT {_LISTED} FROM api_tokens WHERE token_name = ?", (name_or_id,)
                )
            if not rows:
                raise NotFound(f"No API key with the id or name {name_or_id}")
            if len(rows) > 1:
                raise Conflict(f"{len(rows)} API keys are named {name_or_id}: revoke by id")
            row = rows[0]
            await tx.execute("DELETE FROM api_tokens WHERE id = ?", (row["id"],))
            await tx.execute("DELETE FROM web_sessions WHERE key_hash = ?", (row["secret_hash"],))
            await tx.execute("UPDATE key_revision SET revision = revision + 1 WHERE id = 1")
            record = self._record(row)
            before = shown(record.id, record.principal)
            await self._events.record(
                tx, actor, EventType.API_TOKEN_DELETED, **_scope(record.principal), before=before
            )
            return row["secret_hash"], record

        async with self._db.transaction() as tx:
            digest, record = await work(tx)
        # this store's revision is left behind on purpose: its next poll reloads, dropping a
        # copy that a read begun before this commit may have cached meanwhile
        self._cache.pop(digest, None)
        self._used.pop(digest, None)
        self._published()
        return record

    async def write_uses(self) -> None:
        """Write the last uses noted since the previous call, in one transaction."""
        used, self._used = self._used, {}
        if not used:
            return
        async with self._db.transaction() as tx:
            await tx.executemany(
                "UPDATE api_tokens SET last_used_at = ? WHERE secret_hash = ?"
                " AND (last_used_at IS NULL OR last_used_at < ?)",
                [(at, digest, at) for digest, at in sorted(used.items())],
            )

    async def _current_revision(self) -> int:
        row = await self._db.fetch_one("SELECT revision FROM key_revision WHERE id = 1")
        return int(row[0]) if row is not None else 0

    def _record(self, row: Row) -> KeyRecord:
        last = row["last_used_at"]
        noted = self._used.get(row["secret_hash"])
        if noted is not None and (last is None or noted > last):
            last = noted
        return KeyRecord(row["id"], principal_of(row), row["created_at"], last)


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


def _scope(principal: Principal) -> dict[str, str | None]:
    """The project and environment a key event is filed under (Unleash's: a key of one
    project and one environment; None for every one)."""
    projects = principal.projects
    return {
        "project": projects[0] if len(projects) == 1 and projects[0] != "*" else None,
        "environment": None if principal.environment == "*" else principal.environment,
    }


def new_key_id() -> str:
    """Random, never derived from the secret: an id may be shown and logged."""
    return secrets.token_hex(8)


def principal_of(row: Row) -> Principal:
    return Principal(
        type=KeyType(row["type"]),
        environment=row["environment"],
        projects=tuple(json.loads(row["projects"])),
        display=row["display"],
        token_name=row["token_name"],
    )


async def _hold_scope(tx: Transaction, principal: Principal) -> None:
    """The key's environment and projects exist, their rows held (an update that changes
    nothing locks them on PostgreSQL) until the key is in: a deletion of either, which
    holds the same row before it looks for keys, then waits and sees the key, or went
    first and the key is refused. Without it a key made during its project's deletion
    outlived it, and applied to a later project of the same id."""
    environment = principal.environment
    if not await tx.execute("UPDATE environments SET type = type WHERE name = ?", (environment,)):
        raise InvalidInput(f"Environment {environment} does not exist")
    for project in sorted(set(principal.projects) - {"*"}):
        if not await tx.execute("UPDATE projects SET name = name WHERE id = ?", (project,)):
            raise InvalidInput(f"Project {project} does not exist")
