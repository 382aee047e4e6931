"""The copies a relay worker holds of its scopes' flags (``Entry``, one per scope), one answer
for the whole relay however many workers it runs.

- **Stored before served.** A copy taken from the upstream (a fetch, its stream), or one a
  worker moved past another's (a clash), is stored in ``cache.db`` before any request is
  answered from it (``stored``), at a revision no other worker stored
  (``FlagStore.publish``: the first to store a revision wins; the other takes that copy
  and, when the upstream's own revisions say its copy is the newer, stores it past both),
  and counted in the memory the workers share.
- **Caught up before answering.** A worker loads what other workers stored since it last
  looked before it answers a request (``current``, ``relay.api.shared.CatchUp``), and at
  every tick.

So no worker answers from a copy older than one another has answered from, and equal
answers carry equal ETags and revisions whichever worker gives them. On a file that cannot
take a copy (a full disk) it is served all the same, by this worker, and stored by the next
tick (``Pending``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Set

from relay.api.broadcast import Broadcast
from relay.api.shared import CatchUp, Kind, Shared
from relay.core.client_features import Rendered, Scope, projects_of
from relay.core.errors import StorageError
from relay.edge.flags.entries import Entry, forget
from relay.edge.flags.store import Copy, Dropped, FlagScope, FlagStore, Pending, Saved

log = logging.getLogger(__name__)

MAX_SCOPES = 1_000
PUBLISH_TRIES = 4  # stores of one change tried before it is served unstored (logged)


class Copies:
    def __init__(
        self,
        store: FlagStore,
        interval: float,
        shared: Shared,
        pending: Pending,
        pinned: Callable[[], Set[FlagScope]],
        loaded: Callable[[], None],
    ) -> None:
        """``pending``: the cache's writes of the next tick; ``pinned``: scopes never
        evicted for room (the configured keys'); ``loaded``: told after each load."""
        self._store = store
        self._interval = interval
        self._pending = pending
        self._pinned = pinned
        self._loaded = loaded
        self._entries: OrderedDict[FlagScope, Entry] = OrderedDict()
        self._syncing = asyncio.Lock()
        self._changed = 0
        self._catch_up = CatchUp(shared, Kind.FLAGS, self.sync)
        self.moved = Broadcast()  # streams waiting for a scope's revision to move
        self.generation = 0  # moves when a scope gets its first copy or leaves

    def values(self) -> Iterable[Entry]:
        return self._entries.values()

    def get(self, scope: FlagScope) -> Entry | None:
        return self._entries.get(scope)

    def used(self, scope: FlagScope) -> None:
        self._entries.move_to_end(scope)

    def add(self, scope: FlagScope) -> Entry:
        """A new entry for ``scope``; the least recently used past ``MAX_SCOPES`` go."""
        base = Scope(scope.environment, projects_of(scope.projects, ()), None, False)
        entry = self._entries[scope] = Entry(scope, base)
        if len(self._entries) > MAX_SCOPES:
            pinned = self._pinned()
            for old in list(self._entries)[: len(self._entries) - MAX_SCOPES]:
                if old not in pinned and old != scope and self._entries[old].task is None:
                    forget(self._entries.pop(old))
                    self.generation += 1
        return entry

    def drop(self, entry: Entry) -> None:
        """Every key of the scope was refused: its copy goes, here and in the file."""
        forget(self._entries.pop(entry.scope))
        self.generation += 1
        if entry.rendered is not None:
            self._pending.queue(Dropped(entry.scope))

    async def current(self) -> None:
        """Returns once every copy another worker stored before the call is held here."""
        await self._catch_up.current()

    @staticmethod
    async def stored(entry: Entry) -> Rendered | None:
        """``entry``'s answer once it is in ``cache.db``."""
        if entry.publishing is not None:
            await asyncio.shield(entry.publishing)
        return entry.rendered

    def take(self, entry: Entry, copy: Copy, fetched: bool = False) -> bool:
        """``copy`` becomes the entry's answer; False (logged) when it is none. A copy
        fetched (or streamed), or one the entry moved past (a clash), is stored before it
        is served; streams waiting for a change are woken once it is."""
        before, held = entry.changes.revision, entry.rendered
        try:
            entry.take(copy.body, None if fetched else copy.revision)
        except (ValueError, RecursionError) as exc:
            log.error(
                "an answer of the upstream is not one of flags: the copy held stays",
                extra={"scope": entry.scope.label, "error": str(exc)},
            )
            return False
        if held is None or entry.rendered is not held:  # the one held is newer: it stays
            entry.upstream_etag, entry.fetched_at = copy.etag, copy.fetched_at
        if held is None:
            self.generation += 1
        if not fetched and entry.changes.revision == copy.revision:
            entry.stored = max(entry.stored, copy.revision)
        if entry.changes.revision != entry.stored:
            if entry.publishing is None:
                entry.publishing = asyncio.create_task(self._publish(entry), name="flag-publish")
        elif entry.changes.revision != before:
            self.moved.wake()
        return True

    async def _publish(self, entry: Entry) -> None:
        """Stores the entry's revision, the latest while it moves on; one another worker
        stored first is taken instead (``take`` then moves past it when it is older)."""
        stored = False
        try:
            for _ in range(PUBLISH_TRIES):
                revision = entry.changes.revision
                held = _held(entry)
                if held is None or revision == entry.stored:
                    break
                if await self._store.publish(entry.scope, held, self._interval):
                    entry.stored, stored = max(entry.stored, revision), True
                    continue
                other = await self._store.copy(entry.scope)
                if other is None or other.revision < revision:
                    continue  # dropped or damaged meanwhile: stored again
                entry.stored = max(entry.stored, other.revision)
                if entry.changes.revision == revision:  # nothing newer taken meanwhile
                    self.take(entry, other)
            else:
                log.warning(
                    "flags: a scope changed faster than it could be stored; stored next tick",
                    extra={"scope": entry.scope.label},
                )
                self._unstored(entry)
        except StorageError as exc:
            log.error(
                "flags: cannot store a new copy; served by this worker only until it can",
                extra={"scope": entry.scope.label, "error": str(exc)},
            )
            self._unstored(entry)
        finally:
            entry.publishing = None
            if stored:
                self._catch_up.published()
            self.moved.wake()

    def _unstored(self, entry: Entry) -> None:
        held = _held(entry)
        if held is not None:
            self._pending.queue(Saved(entry.scope, held))

    async def sync(self) -> None:
        """Rows written since the last look: a copy at a later revision than the one held
        is taken (one being stored here is newer than any stored)."""
        async with self._syncing:
            for head in await self._store.heads(self._changed):
                self._changed = max(self._changed, head.changed)
                entry = self._entries.get(head.scope)
                if entry is None:
                    if head.etag is None:
                        continue
                    entry = self.add(head.scope)
                entry.due_at = head.due_at
                if head.fetched_at is None:
                    continue  # no copy there yet
                if _newer(entry, head.etag, head.revision):
                    copy = await self._store.copy(head.scope)
                    if copy is not None and _newer(entry, copy.etag, copy.revision):
                        self.take(entry, copy)
                    elif copy is None and entry.rendered is None:
                        entry.due_at = 0.0  # a copy there that cannot be read: fetched now
                entry.fetched_at = head.fetched_at
            self._loaded()

    async def first(self, scope: FlagScope) -> Copy | None:
        """The copy stored for ``scope``, if the file can say."""
        try:
            return await self._store.copy(scope)
        except StorageError:
            return None  # logged by the tick; the upstream is asked


def _held(entry: Entry) -> Copy | None:
    """What ``entry`` holds, as it is stored."""
    if entry.rendered is None:
        return None
    at = entry.fetched_at or time.time()
    return Copy(entry.rendered.body, entry.upstream_etag or "", at, entry.changes.revision)


def _newer(entry: Entry, etag: str | None, revision: int) -> bool:
    """A stored copy at ``revision`` is not the one ``entry`` holds, nor older: a later
    revision, or the same with other flags (two workers gave one revision other flags, as
    when ``cache.db`` was lost: ``revisions.moved`` moves past both)."""
    held = entry.changes.revision
    if entry.rendered is None or revision > held:
        return True
    if revision < held or entry.publishing is not None:
        return False
    return etag != entry.upstream_etag
