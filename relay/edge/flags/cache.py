"""The relay's flag cache: SDKs get their flags from memory, the upstream sees one request per
scope per ``features_refresh_interval``, and a copy outlives the upstream's outages and the
relay's restarts (docs/relays.md, "Flags at a relay", for what callers see).

- **Scopes.** Keys with the same projects and environment (``FlagScope``) share one copy,
  fetched without a query with the key the upstream last answered (``relay.edge.flags.fetch``),
  from which every query and SDK version is rendered (``relay.edge.flags.views``).
- **First use.** A scope nobody asked for yet is fetched on its first request; concurrent
  requests share that fetch, or take a fresh copy another worker stored.
- **Refreshes.** Every ``TICK`` each worker loads what other workers wrote and claims the
  due scopes it holds keys for (``relay.edge.flags.store``): one worker revalidates each
  scope per interval, with ``If-None-Match``, and then follows its stream upstream
  (``relay.edge.flags.follow``); a scope first fetched for an SDK is claimed and followed
  at once.
- **Refusals.** A key refused upstream (401/403) leaves its scope and gets that status for
  ``REFUSED_TTL`` seconds, from every worker (``relay.edge.flags.refusals``); a scope whose
  every key was refused loses its copy.
- **One answer, however many workers.** A new copy is stored before it is served, and a
  worker loads what the others stored before it answers (``relay.edge.flags.copies``).
- **Outages.** The copy held is served whatever the upstream does; a scope with no copy
  gets 503, at once for ``HOLD_OFF`` seconds after a failed fetch (``relay.edge.flags.entries``).
- **Durable.** Copies (at their revision: ``revisions``) are in ``cache.db`` before they
  are served; the hashes of the keys that read them within a ``TICK``; both are loaded at
  start.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence

from aiohttp import web

from relay.api.broadcast import Broadcast
from relay.api.shared import Shared
from relay.core.client_features import Rendered
from relay.core.errors import StorageError
from relay.core.keys import Principal, hash_key, parse_key, redact
from relay.edge.flags.copies import MAX_SCOPES, Copies
from relay.edge.flags.entries import Entry, no_copy, report
from relay.edge.flags.entry_source import EntrySource
from relay.edge.flags.fetch import Fetch, Fetcher
from relay.edge.flags.follow import Follower
from relay.edge.flags.readiness import Readiness
from relay.edge.flags.refusals import Refusals
from relay.edge.flags.store import MAX_STORED_KEYS, Confirmed, Copy, FlagScope, FlagStore, Pending
from relay.edge.flags.views import Views
from relay.edge.key_words import KeyWords
from relay.edge.upstream import UpstreamClient
from relay.wire.common import KeyType

log = logging.getLogger(__name__)

TICK = 1.0
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
        words: KeyWords,
        shared: Shared,
    ) -> None:
        """``configured``: the ``client_tokens``, which must have a copy (or have been
        refused) before the relay is ready; ``identity``: headers naming the relay;
        ``words``: the upstream's word on keys, shared by the workers."""
        self._store = store
        self._fetcher = Fetcher(upstream, identity)
        self._interval = interval
        self._configured = {k: parse_key(k, KeyType.CLIENT).principal for k in configured}
        self._ready = Readiness(self._configured, on_ready)
        self._scopes: dict[str, FlagScope] = {}
        self.views = Views()
        self._refused = Refusals(words)
        self._pending = Pending()
        self._entries = Copies(
            store, interval, shared, self._pending, self._pinned, self._check_ready
        )
        self._fetching = asyncio.Semaphore(CONCURRENT_FETCHES)
        self._storage_failing = False
        self._follower = Follower(self._fetcher, self._entries.take, self._poll)

    @property
    def moved(self) -> Broadcast:
        """Woken when a copy's revision moves (streams waiting for a change)."""
        return self._entries.moved

    def copies(self) -> Iterable[Entry]:
        return self._entries.values()

    @property
    def generation(self) -> int:
        """Moves when a scope gets its first copy or leaves."""
        return self._entries.generation

    def copy_of(self, scope: FlagScope) -> Entry | None:
        return self._entries.get(scope)

    async def current(self) -> None:
        await self._entries.current()

    async def stored(self, entry: Entry) -> Rendered | None:
        return await self._entries.stored(entry)

    async def entry(self, key: str, principal: Principal) -> tuple[Entry, Rendered]:
        await self.current()
        expired = self._refused.check(key)
        scope = self._scope_of(key, principal)
        if expired is not None:
            await self._recheck(scope, key, principal, expired)
        entry = self._entries.get(scope)
        if entry is not None and entry.rendered is not None:
            self._entries.used(scope)
            rendered = entry.rendered
        else:
            entry, rendered = await self._first(scope, key)
        rendered = await self.stored(entry) or rendered
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
            entry = self._entries.get(scope) or self._entries.add(scope)
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

    async def _recheck(self, scope: FlagScope, key: str, principal: Principal, status: int) -> None:
        """A key the upstream refused is served again only once the upstream answers for
        it: its refusal stands while it cannot say."""
        entry = self._entries.get(scope) or self._entries.add(scope)
        async with self._fetching:
            await self._fetch_with(entry, key)
        if entry.fetch_key != key:  # refused again, or no answer
            raise self._refused.error(self._refused.status(key, status))
        await self._refused.clear(key, principal)

    async def _refuse(self, entry: Entry, key: str, status: int) -> None:
        """Said for every worker before the request that brought it hears it."""
        await self._refused.add(key, status)
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
                copy = await self._entries.first(entry.scope)
                if copy is not None and self._entries.take(entry, copy):
                    self._check_ready()
                    if copy.fetched_at + self._interval > time.time():
                        return  # fresh: another worker has just fetched it
            for key in [first] if first is not None else entry.candidates():
                if await self._fetch_with(entry, key):
                    if entry.fetch_key == key and (first is None or await self._claim(entry)):
                        self._follower.start(entry, key)
                    return
            if not entry.keys and self._entries.get(entry.scope) is entry:
                self._entries.drop(entry)

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
                if not self._entries.take(entry, copy, fetched=True):
                    entry.fail("the upstream's answer is not one of flags")
                    return True
            case Fetch.SAME:
                entry.fetched_at = now
                self._pending.queue(Confirmed(entry.scope, now))
            case Fetch.REFUSED:
                await self._refuse(entry, key, fetched.status or 401)
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

    def _pinned(self) -> set[FlagScope]:
        return {self._scope_of(k, p) for k, p in self._configured.items()}

    async def running(self, app: web.Application) -> AsyncIterator[None]:
        """Serving while the application does (a ``cleanup_ctx``): ready once every
        configured key has flags."""
        await self.start()
        yield
        await self.stop()

    async def start(self) -> None:
        """The copies stored, the configured keys' scopes, then a first tick (which
        fetches what they lack)."""
        await self._entries.sync()
        for key, principal in self._configured.items():
            scope = self._scope_of(key, principal)
            (self._entries.get(scope) or self._entries.add(scope)).keys[key] = None
        self._check_ready()
        await self.tick()

    async def tick(self) -> None:
        """What other workers wrote, this worker's writes, and its claims of due scopes."""
        try:
            await self._entries.sync()
            await self._write_and_claim()
        except StorageError as exc:
            if not self._storage_failing:
                log.error("flag cache cannot use its file", extra={"error": str(exc)})
            self._storage_failing = True
        else:
            self._storage_failing = False
        report(self._entries.values(), self.views.bytes + self.views.catalog_bytes)

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
