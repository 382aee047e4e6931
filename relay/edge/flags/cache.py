"""The relay's flag cache: SDKs get their flags from memory, the upstream sees one request per
scope per ``features_refresh_interval``, and a copy outlives the upstream's outages and the
relay's restarts (docs/relays.md, "Flags at a relay", for what callers see).

- **Scopes.** Keys with the same projects and environment (``FlagScope``) share one copy,
  fetched without a query with the key the upstream last answered (``flag_fetch``), from
  which every query and SDK version is rendered (``flag_entries``).
- **First use.** A scope nobody asked for yet is fetched on its first request; concurrent
  requests share that fetch, or take a fresh copy another worker stored.
- **Refreshes.** Every ``TICK`` each worker loads what other workers wrote and claims the
  due scopes it holds keys for (``flag_store``): one worker revalidates each scope per
  interval, with ``If-None-Match``, and then follows its stream upstream (``flag_follow``);
  a scope first fetched for an SDK is claimed and followed at once.
- **Refusals.** A key refused upstream (401/403) leaves its scope and gets that status for
  ``REFUSED_TTL`` seconds; a scope whose every key was refused loses its copy.
- **Outages.** The copy held is served whatever the upstream does; a scope with no copy
  gets 503, at once for ``HOLD_OFF`` seconds after a failed fetch (``flag_entries``).
- **Durable.** Copies (at their revision: ``revisions``) and the hashes of the keys that
  read them reach ``cache.db`` within a ``TICK`` and are loaded at start.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence

from relay.api.broadcast import Broadcast
from relay.core.client_features import Rendered, Scope, projects_of
from relay.core.errors import StorageError
from relay.core.keys import Principal, hash_key, parse_key, redact
from relay.edge.flags.entries import (
    Entry,
    EntrySource,
    Readiness,
    Refusals,
    Views,
    forget,
    no_copy,
    report,
)
from relay.edge.flags.fetch import Fetch, Fetcher
from relay.edge.flags.follow import Follower
from relay.edge.flags.store import (
    MAX_STORED_KEYS,
    Confirmed,
    Copy,
    Dropped,
    FlagScope,
    FlagStore,
    Pending,
    Saved,
)
from relay.edge.upstream import UpstreamClient
from relay.wire.common import KeyType

log = logging.getLogger(__name__)

TICK = 1.0
MAX_SCOPES = 1_000
MAX_KEYS_PER_SCOPE = 16
MAX_SCOPE_KEYS = 10_000  # keys whose scope is remembered
CONCURRENT_FETCHES = 8
RETENTION = 7 * 86400.0  # a stored scope nobody refreshed for this long is deleted


class FlagCache(EntrySource):
    def __init__(
        self,
        store: FlagStore,
        upstream: UpstreamClient,
        interval: float,
        configured: Sequence[str],
        identity: Mapping[str, str],
        on_ready: Callable[[], None],
    ) -> None:
        """``configured``: the ``client_tokens``, which must have a copy (or have been
        refused) before the relay is ready; ``identity``: headers naming the relay."""
        self._store = store
        self._fetcher = Fetcher(upstream, identity)
        self._interval = interval
        self._configured = {k: parse_key(k, KeyType.CLIENT).principal for k in configured}
        self._ready = Readiness(self._configured, on_ready)
        self._entries: OrderedDict[FlagScope, Entry] = OrderedDict()
        self._scopes: dict[str, FlagScope] = {}
        self.views = Views()
        self._refused = Refusals()
        self._pending = Pending()
        self._fetching = asyncio.Semaphore(CONCURRENT_FETCHES)
        self._changed = 0
        self._storage_failing = False
        self.moved = Broadcast()  # streams waiting for a scope's revision to move
        self._follower = Follower(self._fetcher, self._take, self._pending, self._poll)

    def copies(self) -> Iterable[Entry]:
        return self._entries.values()

    def copy_of(self, scope: FlagScope) -> Entry | None:
        return self._entries.get(scope)

    async def entry(self, key: str, principal: Principal) -> tuple[Entry, Rendered]:
        expired = self._refused.check(key)
        scope = self._scope_of(key, principal)
        if expired is not None:
            await self._recheck(scope, key, expired)
        entry = self._entries.get(scope)
        if entry is not None and entry.rendered is not None:
            self._entries.move_to_end(scope)
            rendered = entry.rendered
        else:
            entry, rendered = await self._first(scope, key)
        if key not in entry.keys:
            entry.keys[key] = None
            while len(entry.keys) > MAX_KEYS_PER_SCOPE:
                entry.keys.popitem(last=False)
        if key not in self._configured:
            self._pending.record(key, entry.scope, principal.display)
        return entry, rendered

    def _scope_of(self, key: str, principal: Principal) -> FlagScope:
        """Memoised per key (a key's grants never change): this runs on every poll."""
        scope = self._scopes.get(key)
        if scope is None:
            if len(self._scopes) >= MAX_SCOPE_KEYS:
                self._scopes.clear()
            own = hash_key(key)[:16] if key.startswith("[]:") and key in self._configured else None
            scope = FlagScope(principal.environment, tuple(sorted(principal.projects)), own)
            self._scopes[key] = scope
        return scope

    async def _first(self, scope: FlagScope, key: str) -> tuple[Entry, Rendered]:
        """The scope's entry once it has a copy, fetched with ``key`` if need be; raises
        when that key is refused, or when there is no copy and the upstream cannot say."""
        while True:
            entry = self._entries.get(scope) or self._add(scope)
            if entry.rendered is not None:
                return entry, entry.rendered
            if entry.task is None and time.monotonic() < entry.hold_until:
                raise no_copy()
            await asyncio.shield(entry.task or self._start(entry, key))
            self._refused.check(key)
            if entry.rendered is not None:
                return entry, entry.rendered
            if entry.failing:
                raise no_copy()
            # another key of the scope was refused: this one is tried next

    async def _recheck(self, scope: FlagScope, key: str, status: int) -> None:
        """A key the upstream refused is served again only once the upstream answers for
        it: its refusal stands while it cannot say."""
        entry = self._entries.get(scope) or self._add(scope)
        async with self._fetching:
            await self._fetch_with(entry, key)
        if entry.fetch_key != key:  # refused again, or no answer
            raise self._refused.error(key, status)
        self._refused.clear(key)

    def _refuse(self, entry: Entry, key: str, status: int) -> None:
        self._refused.add(key, status)
        entry.keys.pop(key, None)
        if entry.fetch_key == key:
            entry.fetch_key = None
        self._ready.settle(key)
        log.warning(
            "the upstream refused an SDK key for flags: it gets the same answer here",
            extra={"key": redact(key), "status": status, "scope": entry.scope.label},
        )

    def _start(self, entry: Entry, first: str | None) -> asyncio.Task[None]:
        task = asyncio.create_task(self._renew(entry, first), name="flag-fetch")
        entry.task = task

        def done(task: asyncio.Task[None]) -> None:
            entry.task = None
            if not task.cancelled() and task.exception() is not None:
                log.error("fetching flags failed", exc_info=task.exception())

        task.add_done_callback(done)
        return task

    async def _renew(self, entry: Entry, first: str | None) -> None:
        """Fetch ``entry``'s scope with ``first``, or with its keys in turn while they are
        refused; a first copy may be one another worker stored."""
        async with self._fetching:
            if entry.rendered is None:
                copy = await self._stored(entry.scope)
                if copy is not None and self._take(entry, copy):
                    self._check_ready()
                    if copy.fetched_at + self._interval > time.time():
                        return  # fresh: another worker has just fetched it
            for key in [first] if first is not None else entry.candidates():
                if await self._fetch_with(entry, key):
                    if entry.fetch_key == key and (first is None or await self._claim(entry)):
                        self._follower.start(entry, key)
                    return
            if not entry.keys and self._entries.get(entry.scope) is entry:
                self._drop(entry)

    def _claim(self, entry: Entry) -> Awaitable[bool]:
        """A scope first fetched for an SDK is followed at once, by the worker claiming it."""
        return self._store.claim(entry.scope, time.time(), self._interval)

    async def _fetch_with(self, entry: Entry, key: str) -> bool:
        """One fetch; False when ``key`` was refused (another may be tried). A new answer
        is not taken once the entry took another copy (its stream's, another worker's): it
        may be older (the stream brings what is newer, else the next refresh)."""
        asked = entry.rendered
        fetched = await self._fetcher.fetch(key, entry.upstream_etag, asked, entry.poll)
        now = time.time()
        match fetched.outcome:
            case Fetch.NEW if entry.rendered is not asked:
                pass
            case Fetch.NEW:
                copy = Copy(fetched.body, fetched.etag, now)
                if not self._take(entry, copy, fetched=True):
                    entry.fail("the upstream's answer is not one of flags")
                    return True
                copy = dataclasses.replace(copy, revision=entry.changes.revision)
                self._pending.queue(Saved(entry.scope, copy))
            case Fetch.SAME:
                entry.fetched_at = now
                self._pending.queue(Confirmed(entry.scope, now))
            case Fetch.REFUSED:
                self._refuse(entry, key, fetched.status or 401)
                self._check_ready()
                return False
            case Fetch.FAILED:
                entry.fail(fetched.error)
                return True
        entry.fetch_key = key
        entry.due_at = max(entry.due_at, now + self._interval)
        if entry.failing:
            log.info("flags refreshed again", extra={"scope": entry.scope.label})
            entry.failing = False
        self._check_ready()
        return True

    def _poll(self, entry: Entry) -> None:  # the stream ended: polled until tried again
        if entry.task is not None:  # the fetch that started it, ending: then
            entry.task.add_done_callback(lambda _: self._poll(entry))
        elif self._entries.get(entry.scope) is entry:
            self._start(entry, None)

    def _take(self, entry: Entry, copy: Copy, fetched: bool = False) -> bool:
        """``copy`` becomes the entry's answer; False (logged) when it is none. Streams
        waiting for a change are woken when its revision moved. A loaded copy older than
        the one held leaves it, past both: stored, for the other workers to take."""
        before, held = entry.changes.revision, entry.rendered
        try:
            entry.take(copy.body, None if fetched else copy.revision)
        except (ValueError, RecursionError) as exc:
            log.error(
                "an answer of the upstream is not one of flags: the copy held stays",
                extra={"scope": entry.scope.label, "error": str(exc)},
            )
            return False
        if held is not None and entry.rendered is held:  # the one held is newer: it stays
            copy = Copy(held.body, entry.upstream_etag or "", entry.fetched_at or time.time())
        else:
            entry.upstream_etag, entry.fetched_at = copy.etag, copy.fetched_at
        if entry.changes.revision != before:
            self.moved.wake()
        if not fetched and entry.changes.revision > copy.revision:  # past a clash: stored
            copy = dataclasses.replace(copy, revision=entry.changes.revision)
            self._pending.queue(Saved(entry.scope, copy))
        return True

    def _add(self, scope: FlagScope) -> Entry:
        base = Scope(scope.environment, projects_of(scope.projects, ()), None, False)
        entry = self._entries[scope] = Entry(scope, base)
        if len(self._entries) > MAX_SCOPES:
            pinned = {self._scope_of(k, p) for k, p in self._configured.items()}
            for old in list(self._entries)[: len(self._entries) - MAX_SCOPES]:
                if old not in pinned and old != scope and self._entries[old].task is None:
                    forget(self._entries.pop(old))
        return entry

    def _drop(self, entry: Entry) -> None:
        """Every key of the scope was refused: its copy goes, here and in the file."""
        forget(self._entries.pop(entry.scope))
        if entry.rendered is not None:
            self._pending.queue(Dropped(entry.scope))

    async def start(self) -> None:
        """The copies stored, the configured keys' scopes, then a first tick (which
        fetches what they lack)."""
        await self._sync()
        for key, principal in self._configured.items():
            scope = self._scope_of(key, principal)
            (self._entries.get(scope) or self._add(scope)).keys[key] = None
        self._check_ready()
        await self.tick()

    async def tick(self) -> None:
        """What other workers wrote, this worker's writes, and its claims of due scopes."""
        try:
            await self._sync()
            await self._write_and_claim()
        except StorageError as exc:
            if not self._storage_failing:
                log.error("flag cache cannot use its file", extra={"error": str(exc)})
            self._storage_failing = True
        else:
            self._storage_failing = False
        report(self._entries.values(), self.views)

    async def _sync(self) -> None:
        """Rows written since the last look; one passed over (this worker's copy is newer)
        is read again at the next: a refresh in flight may yet fail."""
        passed: list[int] = []  # in the order written
        for head in await self._store.heads(self._changed):
            self._changed = max(self._changed, head.changed)
            entry = self._entries.get(head.scope)
            if entry is None:
                if head.etag is None:
                    continue
                entry = self._add(head.scope)
            entry.due_at = head.due_at
            held, copy = (entry.upstream_etag, entry.changes.revision), None
            if head.fetched_at is None:
                continue  # no copy there yet
            if not self._ahead(entry, held) and (head.etag, head.revision) != held:
                copy = await self._store.copy(head.scope)
            if self._ahead(entry, held):
                passed.append(head.changed)
                continue
            if copy is not None:
                self._take(entry, copy)
            entry.fetched_at = head.fetched_at
        self._changed = passed[0] - 1 if passed else self._changed
        self._check_ready()

    def _ahead(self, entry: Entry, held: tuple[str | None, int]) -> bool:
        """Fetching, holding a copy not yet written, or one taken since it was ``held`` (its
        stream's, as one was loaded): newer than any stored."""
        now = (entry.upstream_etag, entry.changes.revision)
        return entry.task is not None or entry.scope in self._pending or held != now

    async def _stored(self, scope: FlagScope) -> Copy | None:
        try:
            return await self._store.copy(scope)
        except StorageError:
            return None  # logged by the tick; the upstream is asked

    async def _write_and_claim(self) -> None:
        now = time.time()
        for held in self._entries.values():
            if held.streamed:  # the stream confirms it; no other worker claims it
                held.fetched_at = now
                self._pending.queue(Confirmed(held.scope, now))
        bogus = now + 2 * self._interval  # a refresh that far ahead: the clock was set back
        due = [
            e.scope
            for e in self._entries.values()
            if e.keys and e.task is None and not now < e.due_at <= bogus
        ]
        if not (self._pending or due):
            return
        writes = self._pending.drain()
        failure: StorageError | None = None
        try:
            claimed = await self._store.write(writes, due, now, self._interval)
        except StorageError as exc:
            # Claims only share refreshes between workers: without the file (a full disk),
            # each worker refreshes what it holds rather than none doing it.
            self._pending.restore(writes)
            claimed, failure = set(due), exc
        except BaseException:
            self._pending.restore(writes)  # never lost to a bug: written next tick
            raise
        for scope in due:
            entry = self._entries.get(scope)
            if entry is None:
                continue
            entry.due_at = now + self._interval  # by this worker, or by another one just now
            if scope in claimed and entry.task is None:
                self._start(entry, None)
        if failure is not None:
            raise failure

    async def prune(self) -> None:  # the leader's, hourly
        await self._store.prune(time.time() - RETENTION, MAX_SCOPES, MAX_STORED_KEYS)

    async def stop(self) -> None:
        """Fetches in flight are cancelled; what they and others wrote is written."""
        tasks = [t for e in self._entries.values() for t in (e.task, e.follow) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._pending:
            try:
                await self._store.write(self._pending.drain(), (), time.time(), self._interval)
            except StorageError as exc:
                log.error("flag cache: last writes lost", extra={"error": str(exc)})

    def _check_ready(self) -> None:
        self._ready.check(lambda key, principal: self._entries.get(self._scope_of(key, principal)))
