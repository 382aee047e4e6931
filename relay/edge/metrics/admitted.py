"""The ingest sink of a relay worker: counts admitted against the buffer's room
(``Admitted``), what every worker admitted counted in the memory they share."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import time

from prometheus_client import Counter

from relay.api.shared import Room, Shared
from relay.core.errors import Unavailable, Unpaid
from relay.core.ingest_batch import IdempotencyKey, IngestBatch
from relay.store.metrics import MetricsStore, written_size
from relay.store.reserve import IngestGate

REFUSED = Counter(
    "relay_buffer_refused_requests_total",
    "Requests answered 503 because the buffer was full and their key's own buffered counts"
    " could not make room, by the key's kind (browser: a public key's)",
    ["kind"],
)
GROWTH = 3.0  # file bytes per byte counted written, until the leader has measured some
ROOM_PATIENCE = 10.0
"""Seconds new counts wait for room in a buffer over its bound (``Admitted``)."""
ROOM_POLL = 0.01
BROWSER_SHARE = 0.75
"""The share of the bound browsers' counts grow the buffer to (``Admitted``): past it they
take the room of their own key's oldest; an SDK's counts have the last quarter."""


class Admitted:
    """A relay worker's ingest sink: counts written only while the disk has room for them
    (``IngestGate``), and while the buffer has: what a request will write is counted first
    (``Shared.admit``: in the memory the workers share, so requests at once see each
    other). While that takes the buffer past its bound (``over``) the request gives its
    count back and asks the leader for room, which makes it of everything but counts
    (``relay.store.buffer_space``); once there is no more of that (``Room.DRY``), the
    request's new counts take the room of its own key's oldest (``relay.store.own_room``),
    never another key's; a request whose key holds too little gets 503 at once (an SDK
    keeps its counts and retries; the buffer holds other keys' counts, or counts already
    cut into batches for the upstream, and only the flusher frees room). The leader's room
    is waited for ``ROOM_PATIENCE`` seconds at most, then 503 too. Browsers' counts (a
    public key's, ``Origin.browser``) grow the buffer to ``BROWSER_SHARE`` of its bound
    only, then pay for their room without waiting for any made: no flood of a key anyone
    can read leaves an SDK without room. They wait only for the leader to look when what
    takes them past their share is an estimate (writes since it last measured, priced at
    the growth it last saw): refused on it, a browser's counts were 503 until the next
    check while the files had room (seen in CI: forty posts in a row). A request larger
    than the room eviction can make goes in alone, once the leader has made what room it
    can for it: the buffer passes its bound by one request at most."""

    def __init__(
        self, store: MetricsStore, gate: IngestGate | None, shared: Shared, max_bytes: int
    ) -> None:
        self._store = store
        self._gate = gate
        self._shared = shared
        self._max_bytes = max_bytes
        self._wants: collections.Counter[int] = collections.Counter()  # room -> requests
        self._leader = LeaderWords(shared)

    async def write(self, batch: IngestBatch, idempotency_key: IdempotencyKey | None) -> bool:
        if self._gate is not None:
            await self._gate.admit()
        size = written_size(batch, idempotency_key)
        kind = "browser" if batch.origin.browser else "client"
        try:
            pays = await self._room(size, batch.origin.browser)
        except Unavailable:
            REFUSED.labels(kind).inc()
            raise
        try:
            if pays:
                await self._store.make_room(batch)
            return await self._store.write(batch, idempotency_key)
        except Unpaid:
            REFUSED.labels(kind).inc()
            raise
        finally:
            if not pays:
                self._shared.settle(size)

    def _alone(self, size: int, asked: int) -> bool:
        """A request larger than the room eviction can make, with no other write in flight,
        once the leader has measured every write before it and made what room it can of
        other than counts for it: a check begun after the request asked (``asked``: the
        leader's ``Room.ROUNDS`` then; the one under way may not have seen it) has ended.
        Once only counts are left (``Room.DRY``) it pays for its room as any other: let in
        unpaid, a key's one large request would take the files past the bound with nothing
        of its own given for it (before a check had seen it, ``Room.DRY`` still said what
        the last check found without it, and whether the leader had measured first
        decided: 1,024 KiB bound, six requests of 1.5 MB each all 202 and 5.2 MB of files,
        or all 503)."""
        shared = self._shared
        large = size * growth(shared) > self._max_bytes - self._max_bytes // 8
        alone = shared.admitted() - shared.settled() == size
        measured = shared.room(Room.MARK) == shared.settled()
        room = not (shared.room(Room.FULL) or shared.room(Room.DRY))
        return large and alone and measured and answered(shared, asked) and room

    async def _room(self, size: int, browser: bool) -> bool:
        """False once ``size`` bytes are admitted; True when the request is to pay for its
        room (see the class's docstring)."""
        deadline = time.monotonic() + ROOM_PATIENCE
        bound = int(self._max_bytes * BROWSER_SHARE) if browser else self._max_bytes
        shared, wanting = self._shared, 0
        asked = shared.room(Room.ROUNDS)
        try:
            while True:
                seen = self._leader.words()  # what this round decides on
                shared.admit(size)
                if not over(shared, bound) or (not browser and self._alone(size, asked)):
                    return False
                shared.withdraw(size)
                if shared.room(Room.DRY) or (browser and looked(shared, asked)):
                    return True
                # the leader makes room; for a browser's request it only looks (1 byte):
                # room it made of all but counts would be past the browsers' share anyway
                wanting = self._want(wanting, 1 if browser else round(size * growth(shared)))
                left = deadline - time.monotonic()
                if left <= 0:
                    raise Unavailable("The buffer is full and making room: retry later")
                await self._leader.moved(seen, left)
        finally:
            self._want(wanting, 0)

    def _want(self, before: int, room: int) -> int:
        """A waiting request's want, ``before`` and now (0: none), counted with this
        worker's others; the most of them told the leader. Work only when it changes (a
        request's want is set once, not at every wake: with thousands waiting, recounting
        them all at each wake of each held the worker's loop)."""
        if room == before:
            return room
        if before:
            self._wants[before] -= 1
            if not self._wants[before]:
                del self._wants[before]
        if room:
            self._wants[room] += 1
        self._shared.want_room(max(self._wants, default=0))
        return room


class LeaderWords:
    """A wake for this worker's requests waiting for room whenever the leader publishes a
    new measure or check (``Room``'s words): one look at the shared memory every
    ``ROOM_POLL`` while any waits, for all of them. Each request looking on its own made
    a flood of a public key's requests, all waiting for one check, hold the loop."""

    def __init__(self, shared: Shared) -> None:
        self._shared = shared
        self._changed = asyncio.Event()
        self._waiting = 0
        self._watch: asyncio.Task[None] | None = None

    async def moved(self, seen: tuple[int, ...], within: float) -> None:
        """Once the leader's words differ from ``seen`` (those the caller decided on: a
        change before the watch began is one too), or after ``within`` seconds."""
        if self.words() != seen:
            return
        changed = self._changed
        self._waiting += 1
        if self._watch is None:
            self._watch = asyncio.create_task(self._watching(seen))
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(changed.wait(), within)
        finally:
            self._waiting -= 1

    def words(self) -> tuple[int, ...]:
        return tuple(self._shared.room(word) for word in Room)

    async def _watching(self, seen: tuple[int, ...]) -> None:
        try:
            while self._waiting:
                await asyncio.sleep(ROOM_POLL)
                now = self.words()
                if now != seen:
                    seen = now
                    self._changed.set()
                    self._changed = asyncio.Event()
        finally:
            self._watch = None


def over(shared: Shared, max_bytes: int) -> bool:
    """Whether the buffer is over ``max_bytes``, or would be with what every worker admitted
    since the leader last measured it (grown as the files grew per byte written)."""
    if shared.room(Room.FULL):
        return True
    admitted = shared.admitted() - shared.room(Room.MARK)
    return shared.room(Room.HELD) + admitted * growth(shared) > max_bytes


def answered(shared: Shared, asked: int) -> bool:
    """Whether a check of the leader's begun after ``asked`` (its ``Room.ROUNDS`` when a
    request asked; the check under way then may not have seen the request) has ended."""
    return shared.room(Room.ROUNDS) >= asked + 2


def looked(shared: Shared, asked: int) -> bool:
    """Whether the buffer's room is known, not estimated, for a request that asked at
    ``asked``: the leader measured every write settled so far, or has looked since."""
    return shared.room(Room.MARK) == shared.settled() or answered(shared, asked)


def growth(shared: Shared) -> float:
    """File bytes per byte counted written, as the leader last saw it."""
    return shared.room(Room.GROWTH) / 1000 or GROWTH
