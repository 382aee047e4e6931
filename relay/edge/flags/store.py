"""The flag cache's durable rows in the relay's ``cache.db``: each scope's last answer from
the upstream (body, ETag, when it was confirmed), and the hashes of the SDK keys that read
it. Every worker reads them; whichever fetched writes them. Apart from the counts of
``buffer.db``, they are bounded on their own: ``MAX_STORED_BYTES`` of answers, checked with
every new answer written (the most recently refreshed stay), and scopes and keys by number.

Refreshes are shared out through ``due_at``: a worker refreshes a scope only after moving
its ``due_at`` on, in a statement that does so only when it is due, so one worker refreshes
each scope per interval, whichever of them hold keys for it. ``changed`` grows with every
write, so a worker loads only the rows written since it last looked.
"""

from __future__ import annotations

import contextlib
import json
import math
import time
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass

from relay.core.errors import StorageError
from relay.core.keys import Principal, hash_key
from relay.store.cache_file import change_number, next_change
from relay.store.sql import Transaction
from relay.store.sqlite import SqliteDatabase
from relay.wire.common import KeyType


@dataclass(frozen=True, slots=True)
class FlagScope:
    """What keys share one upstream fetch and one cached answer: an environment and a set
    of projects (``*``: all). ``own`` sets apart a key whose projects cannot be known from
    the key itself (a multi-project ``[]:env.secret`` in ``client_tokens``): a prefix of
    its hash, so such a key shares with no other."""

    environment: str
    projects: tuple[str, ...]
    own: str | None = None

    @property
    def id(self) -> str:
        return json.dumps([self.environment, list(self.projects), self.own])

    @property
    def label(self) -> str:
        """For metrics and logs: the projects, never a key."""
        projects = ",".join(self.projects)
        return f"{projects}#{self.own}" if self.own else projects

    @classmethod
    def from_id(cls, scope_id: object) -> FlagScope:
        """``ValueError`` for anything ``id`` cannot have written (a row damaged by hand)."""
        try:
            environment, projects, own = json.loads(scope_id)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            raise ValueError("not a scope") from None
        if not (
            isinstance(environment, str)
            and isinstance(projects, list)
            and all(isinstance(p, str) for p in projects)
            and (own is None or isinstance(own, str))
        ):
            raise ValueError("not a scope")
        return cls(environment, tuple(projects), own)


@dataclass(frozen=True, slots=True)
class Head:
    """A row as other workers look at it each second: no body."""

    scope: FlagScope
    etag: str | None
    fetched_at: float | None
    due_at: float
    changed: int
    revision: int = 0


@dataclass(frozen=True, slots=True)
class Copy:
    """An answer of the upstream, and the revision the relay gave it (what its SDKs
    streaming or polling deltas are at: ``relay.edge.flags.revisions``)."""

    body: bytes
    etag: str
    fetched_at: float
    revision: int = 0


@dataclass(frozen=True, slots=True)
class Saved:
    """A new answer from the upstream (200)."""

    scope: FlagScope
    copy: Copy


@dataclass(frozen=True, slots=True)
class Confirmed:
    """The upstream answered 304: the copy stands, confirmed at ``at``."""

    scope: FlagScope
    at: float


@dataclass(frozen=True, slots=True)
class Dropped:
    """The upstream refused every key of the scope: its copy goes."""

    scope: FlagScope


@dataclass(frozen=True, slots=True)
class KeySeen:
    key_hash: str
    scope: FlagScope
    display: str
    at: float


Write = Saved | Confirmed | Dropped | KeySeen

RECORD_EVERY = 3600.0  # how often a key in use is written again (its seen_at)
MAX_STORED_KEYS = 10_000
MAX_STORED_BYTES = 256 * 1024 * 1024  # of answers in cache.db; one is at most 32 MiB


class Pending:
    """Writes waiting for the next transaction: the latest of each scope (a 304 after a
    200 keeps the 200's body), and the keys in use, each written again once an
    ``RECORD_EVERY`` (so its row outlives pruning while it is used)."""

    def __init__(self) -> None:
        self._scopes: dict[FlagScope, Saved | Confirmed | Dropped] = {}
        self._keys: dict[str, KeySeen] = {}
        self._recorded: OrderedDict[str, float] = OrderedDict()  # key -> when it was queued

    def __bool__(self) -> bool:
        return bool(self._scopes or self._keys)

    def __contains__(self, scope: FlagScope) -> bool:
        return scope in self._scopes

    def queue(self, write: Saved | Confirmed | Dropped) -> None:
        queued = self._scopes.get(write.scope)
        if isinstance(queued, Saved) and isinstance(write, Confirmed):
            copy = queued.copy
            write = Saved(write.scope, Copy(copy.body, copy.etag, write.at, copy.revision))
        self._scopes[write.scope] = write

    def record(self, key: str, scope: FlagScope, display: str) -> None:
        now = time.monotonic()
        at = self._recorded.get(key)
        if at is not None and now - at < RECORD_EVERY:
            return
        self._recorded[key] = now
        self._recorded.move_to_end(key)
        while len(self._recorded) > MAX_STORED_KEYS:
            self._recorded.popitem(last=False)
        digest = hash_key(key)
        self._keys[digest] = KeySeen(digest, scope, display, time.time())

    def drain(self) -> list[Write]:
        writes: list[Write] = [*self._scopes.values(), *self._keys.values()]
        self._scopes, self._keys = {}, {}
        return writes

    def restore(self, writes: list[Write]) -> None:
        """``writes`` failed: queued again, under what was queued since."""
        for write in writes:
            match write:
                case KeySeen():
                    self._keys.setdefault(write.key_hash, write)
                case Saved() | Confirmed() | Dropped():
                    self._scopes.setdefault(write.scope, write)


class FlagStore:
    def __init__(self, db: SqliteDatabase, most_bytes: int = MAX_STORED_BYTES) -> None:
        self._db = db
        self._most_bytes = most_bytes

    async def heads(self, since: int) -> list[Head]:
        rows = await self._db.fetch_all(
            "SELECT scope, etag, fetched_at, due_at, changed, revision FROM flag_scopes"
            " WHERE changed > ? ORDER BY changed",
            (since,),
        )
        heads = []
        for scope_id, etag, fetched_at, due_at, changed, revision in rows:
            with contextlib.suppress(ValueError, TypeError):  # a damaged row: skipped, pruned
                heads.append(
                    Head(
                        FlagScope.from_id(scope_id),
                        etag if isinstance(etag, str) else None,
                        _number(fetched_at) if fetched_at is not None else None,
                        _number(due_at),
                        change_number(changed),
                        revision if isinstance(revision, int) else 0,
                    )
                )
        return heads

    async def copy(self, scope: FlagScope) -> Copy | None:
        row = await self._db.fetch_one(
            "SELECT body, etag, fetched_at, revision FROM flag_scopes"
            " WHERE scope = ? AND body IS NOT NULL",
            (scope.id,),
        )
        if row is None or not isinstance(row[0], bytes):
            return None  # none yet, or a body damaged by hand: the upstream is asked
        etag, fetched_at, revision = row[1], row[2], row[3]
        revision = revision if isinstance(revision, int) and revision >= 0 else 0
        try:
            return Copy(
                row[0], etag if isinstance(etag, str) else "", _number(fetched_at or 0), revision
            )
        except ValueError:
            return None

    async def keys(self) -> dict[str, Principal]:
        """Key hash -> what the key was for, of the keys that read flags here."""
        rows = await self._db.fetch_all("SELECT key_hash, scope, display FROM flag_keys")
        found = {}
        for key_hash, scope_id, display in rows:
            with contextlib.suppress(ValueError):  # a damaged row: that key is asked upstream
                scope = FlagScope.from_id(scope_id)
                if isinstance(key_hash, str) and isinstance(display, str):
                    found[key_hash] = Principal(
                        KeyType.CLIENT, scope.environment, scope.projects, display
                    )
        return found

    async def write(
        self, writes: Iterable[Write], due: Iterable[FlagScope], now: float, interval: float
    ) -> set[FlagScope]:
        """``writes``, then a claim of each ``due`` scope, in one transaction: the scopes
        this worker is now to refresh (their ``due_at`` moved on by ``interval``). A
        ``due_at`` more than two intervals ahead counts as due: the clock was set back; so
        does a row whose copy cannot be read (damaged by hand: ``heads`` and ``copy`` pass
        it over), which would otherwise leave its scope without flags until it was due."""
        writes, due = list(writes), list(due)

        async def work(tx: Transaction) -> set[FlagScope]:
            changed = await next_change(tx, "flag_scopes")
            for write in writes:
                await _apply(tx, write, changed, interval)
            if any(isinstance(write, Saved) for write in writes):
                await self._bound(tx)
            claimed = set()
            for scope in due:
                if await tx.execute(
                    "INSERT INTO flag_scopes (scope, due_at, changed) VALUES (?, ?, ?)"
                    " ON CONFLICT (scope) DO UPDATE SET due_at = excluded.due_at"
                    " WHERE flag_scopes.due_at <= ? OR flag_scopes.due_at > ?"
                    " OR typeof(flag_scopes.body) NOT IN ('blob', 'null')"
                    " OR typeof(flag_scopes.fetched_at) NOT IN ('integer', 'real', 'null')",
                    (scope.id, now + interval, changed, now, now + 2 * interval),
                ):
                    claimed.add(scope)
            return claimed

        return await self._db.run(work)

    async def publish(self, scope: FlagScope, copy: Copy, interval: float) -> bool:
        """``copy`` stored as ``scope``'s, unless a copy at its revision or a later one is
        there already (another worker's): each revision one answer, whichever worker
        stored it first. Whether it was stored."""

        async def work(tx: Transaction) -> bool:
            changed = await next_change(tx, "flag_scopes")
            stored = bool(
                await tx.execute(
                    "INSERT INTO flag_scopes (scope, body, etag, fetched_at, due_at, changed,"
                    " revision) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (scope) DO UPDATE SET"
                    " body = excluded.body, etag = excluded.etag,"
                    " fetched_at = excluded.fetched_at,"
                    " due_at = max(flag_scopes.due_at, excluded.due_at),"
                    " changed = excluded.changed, revision = excluded.revision"
                    " WHERE flag_scopes.body IS NULL OR flag_scopes.revision < excluded.revision",
                    (
                        scope.id,
                        copy.body,
                        copy.etag,
                        copy.fetched_at,
                        copy.fetched_at + interval,
                        changed,
                        copy.revision,
                    ),
                )
            )
            if stored:
                await self._bound(tx)
            return stored

        return await self._db.run(work)

    async def claim(self, scope: FlagScope, now: float, interval: float) -> bool:
        """``scope``'s refresh claimed alone, as ``write`` claims due ones: whether this
        worker refreshes and follows it (one upstream stream per scope). Without the file,
        True, as a tick's claims: each worker then follows what it holds."""
        try:
            return scope in await self.write((), [scope], now, interval)
        except StorageError:
            return True  # logged by the tick

    async def _bound(self, tx: Transaction) -> None:
        """The most recently refreshed answers stay, ``most_bytes`` of them in all."""
        await tx.execute(
            "DELETE FROM flag_scopes WHERE scope IN (SELECT scope FROM (SELECT scope,"
            " sum(coalesce(length(body), 0)) OVER (ORDER BY due_at DESC, scope"
            " ROWS UNBOUNDED PRECEDING) AS held FROM flag_scopes) WHERE held > ?)",
            (self._most_bytes,),
        )

    async def prune(self, before: float, most_scopes: int, most_keys: int) -> None:
        """Scopes nobody refreshed since ``before`` go, with their keys; then the most
        recently refreshed ``most_scopes`` (within ``most_bytes``) and seen ``most_keys``
        stay."""

        async def work(tx: Transaction) -> None:
            await tx.execute("DELETE FROM flag_scopes WHERE due_at < ?", (before,))
            await tx.execute(
                "DELETE FROM flag_scopes WHERE scope NOT IN"
                " (SELECT scope FROM flag_scopes ORDER BY due_at DESC LIMIT ?)",
                (most_scopes,),
            )
            await self._bound(tx)
            await tx.execute(
                "DELETE FROM flag_keys WHERE seen_at < ?"
                " OR scope NOT IN (SELECT scope FROM flag_scopes)",
                (before,),
            )
            await tx.execute(
                "DELETE FROM flag_keys WHERE key_hash NOT IN"
                " (SELECT key_hash FROM flag_keys ORDER BY seen_at DESC LIMIT ?)",
                (most_keys,),
            )

        await self._db.run(work)


async def _apply(tx: Transaction, write: Write, changed: int, interval: float) -> None:
    match write:
        case Saved(scope, copy):  # as ``publish``: never over a later revision
            due = copy.fetched_at + interval
            await tx.execute(
                "INSERT INTO flag_scopes (scope, body, etag, fetched_at, due_at, changed,"
                " revision) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (scope) DO UPDATE SET"
                " body = excluded.body, etag = excluded.etag, fetched_at = excluded.fetched_at,"
                " due_at = max(flag_scopes.due_at, excluded.due_at), changed = excluded.changed,"
                " revision = excluded.revision"
                " WHERE flag_scopes.body IS NULL OR flag_scopes.revision < excluded.revision",
                (scope.id, copy.body, copy.etag, copy.fetched_at, due, changed, copy.revision),
            )
        case Confirmed(scope, at):
            await tx.execute(
                "UPDATE flag_scopes SET fetched_at = ?, changed = ?,"
                " due_at = max(due_at, ?) WHERE scope = ?",
                (at, changed, at + interval, scope.id),
            )
        case Dropped(scope):
            await tx.execute("DELETE FROM flag_scopes WHERE scope = ?", (scope.id,))
            await tx.execute("DELETE FROM flag_keys WHERE scope = ?", (scope.id,))
        case KeySeen(key_hash, scope, display, at):
            await tx.execute(
                "INSERT INTO flag_keys (key_hash, scope, display, seen_at) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (key_hash) DO UPDATE SET scope = excluded.scope,"
                " display = excluded.display, seen_at = excluded.seen_at",
                (key_hash, scope.id, display, at),
            )


def _number(value: object) -> float:
    """A time read back from the file: ``ValueError`` unless a finite number."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError("not a time")
    return float(value)
