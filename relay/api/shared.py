"""What the worker processes of one service share, so that the service decides as one, however
many workers it runs: a small region of memory every worker maps.

With ``workers`` > 1 the region is a ``memfd`` the supervisor makes before the workers start
(``relay.process.supervisor``) and hands to each, and it ends with the supervisor (a worker
that dies takes the whole service down and up again: no count outlives the processes it
counts). One worker maps a region of its own. It holds:

- **Changes**, per kind (``KEYS``, ``FLAGS``): each worker counts in its own slot the changes
  it stored and made visible (an upstream's word on a key, a new copy of a scope's flags).
  A change is counted after it is in ``cache.db`` and before the request that brought it is
  answered, so a request that starts after that answer finds the sum moved and the worker
  answering it loads what changed first (``CatchUp``): no worker answers from a state older
  than one another worker has already answered from.
- **Writes**: the bytes each worker is about to write into the buffer they share (counted
  as a request is admitted) and has written or given up on, so the leader's buffer
  monitor hears of a flood through any worker, and every worker sees the others' writes in
  flight; and the buffer's room as the leader last measured it (``Room``).
- **Tables**: fixed hash tables of counts per key (open streams) and of budgets per client
  address (invalid keys), changed under a lock (``flock`` on a descriptor of the region's
  own, held for the microseconds a change takes), so a bound counts the service, not a
  worker.

Slots are 8-byte aligned words written whole (one store), each by one worker; the tables are
read and written under the lock only.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import fcntl
import hashlib
import logging
import mmap
import os
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass

from relay.settings import Settings

log = logging.getLogger(__name__)

PROBES = 32
"""Slots a table looks at for a key before it counts as full (its load stays below half)."""
MAX_TABLE_SLOTS = 1 << 21
NOTE_BYTES = 4096
"""A short text each worker leaves for the others (``note``), in a slot of its own."""
ADDRESS_SLOTS = 1 << 17
"""Client addresses whose invalid-key budget is remembered (131,072; a full budget takes no
slot); past them the least recently charged in a key's neighbourhood is forgotten."""


class Room(enum.IntEnum):
    """The buffer's room as the leader last measured it: the words after the rows of slots."""

    HELD = 0  # bytes the buffer's files held (pages in use and the WAL)
    MARK = 1  # the bytes settled by then (``Shared.settled``): what ``HELD`` holds
    FULL = 2  # 1 while it is over its bound and the leader evicts
    GROWTH = 3  # thousandths of a byte of file per byte counted written, as last seen
    DRY = 4  # 1 while no room is left to make but of counts: new counts pay for their own
    ROUNDS = 5  # checks the leader ended with requests waiting for room (``Shared.wanted``)


class Kind(enum.IntEnum):
    """What a change is of: each kind is caught up with on its own."""

    KEYS = 0
    FLAGS = 1


def _slots_for(most: int) -> int:
    """A power of two at least twice ``most``: probing stays short."""
    slots = 64
    while slots < 2 * most and slots < MAX_TABLE_SLOTS:
        slots *= 2
    return slots


@dataclass(frozen=True, slots=True)
class Layout:
    """Where each part lies in the region, from the number of workers and the bounds."""

    workers: int
    stream_slots: int

    @classmethod
    def of(cls, workers: int, stream_max: int) -> Layout:
        return cls(workers, _slots_for(stream_max))

    @property
    def words(self) -> int:
        """Changes (one row of worker slots per kind), writes admitted and settled and the
        room they wait for (a row each), the buffer's room, the stream total."""
        return self.workers * (len(Kind) + 3) + len(Room) + 1

    @property
    def streams_at(self) -> int:
        return self.words * 8

    @property
    def budgets_at(self) -> int:
        return self.streams_at + self.stream_slots * 16

    @property
    def note_at(self) -> int:
        return self.budgets_at + ADDRESS_SLOTS * 24

    @property
    def size(self) -> int:
        return self.note_at + NOTE_BYTES * self.workers


def layout(settings: Settings) -> Layout:
    return Layout.of(settings.workers, settings.stream_max)


def stable_hash(value: str) -> int:
    """A 64-bit hash every process computes alike (``hash()`` is salted per process); never
    0, which marks an empty slot."""
    return int.from_bytes(hashlib.blake2b(value.encode(), digest_size=8).digest()) or 1


class Shared:
    def __init__(self, memory: mmap.mmap, lock: int | None, layout: Layout, worker: int) -> None:
        """``lock``: a descriptor of the region's file of this process's own (``flock`` is
        held per open file: one inherited would be the same lock in every worker); None for
        a region no other process maps."""
        self._memory = memory
        self._lock = lock
        self._layout = layout
        self._worker = worker
        words = memoryview(memory).cast("Q")
        self._words = words
        self._stream_total = layout.words - 1
        streams = memoryview(memory)[layout.streams_at : layout.budgets_at]
        self._stream_keys = streams[: layout.stream_slots * 8].cast("Q")
        self._stream_counts = streams[layout.stream_slots * 8 :].cast("q")
        budgets = memoryview(memory)[layout.budgets_at : layout.size]
        self._budget_keys = budgets[: ADDRESS_SLOTS * 8].cast("Q")
        self._budget_left = budgets[ADDRESS_SLOTS * 8 : ADDRESS_SLOTS * 16].cast("d")
        self._budget_at = budgets[ADDRESS_SLOTS * 16 :].cast("d")
        self._notes = memoryview(memory)[layout.note_at : layout.size]

    @classmethod
    def private(cls, layout: Layout) -> Shared:
        """A region for one process."""
        return cls(mmap.mmap(-1, layout.size), None, layout, 0)

    @classmethod
    def attach(cls, fd: int, layout: Layout, worker: int) -> Shared:
        """A worker's view of the supervisor's region (``fd`` inherited)."""
        memory = mmap.mmap(fd, layout.size)
        lock = os.open(f"/proc/self/fd/{fd}", os.O_RDWR | os.O_CLOEXEC)
        return cls(memory, lock, layout, worker)

    @property
    def worker(self) -> int:
        return self._worker

    def as_worker(self, worker: int) -> Shared:
        """This region as worker ``worker`` sees it: workers in one process (tests)."""
        return Shared(self._memory, self._lock, self._layout, worker)

    # changes: one row of worker slots per kind

    def changes(self, kind: Kind) -> int:
        """How many changes of ``kind`` the workers have published: a sum that only grows."""
        start = kind * self._layout.workers
        return sum(self._words[start : start + self._layout.workers])

    def publish(self, kind: Kind) -> None:
        """Counts a change of ``kind`` this worker has stored and is about to show."""
        slot = kind * self._layout.workers + self._worker
        self._words[slot] += 1

    # writes: the two rows after the changes'

    def admit(self, size: int) -> None:
        """Counts ``size`` bytes a request of this worker is about to write."""
        self._words[len(Kind) * self._layout.workers + self._worker] += size

    def withdraw(self, size: int) -> None:
        """Those bytes not to be written after all, before any was (the request waits)."""
        self._words[len(Kind) * self._layout.workers + self._worker] -= size

    def settle(self, size: int) -> None:
        """Those bytes written (committed), or given up on."""
        self._words[(len(Kind) + 1) * self._layout.workers + self._worker] += size

    def admitted(self) -> int:
        start = len(Kind) * self._layout.workers
        return sum(self._words[start : start + self._layout.workers])

    def settled(self) -> int:
        start = (len(Kind) + 1) * self._layout.workers
        return sum(self._words[start : start + self._layout.workers])

    def want_room(self, size: int) -> None:
        """This worker's requests wait for ``size`` bytes of room (0: none waits)."""
        self._words[(len(Kind) + 2) * self._layout.workers + self._worker] = size

    def wanted(self) -> int:
        """The most room a worker's requests wait for."""
        start = (len(Kind) + 2) * self._layout.workers
        return max(self._words[start : start + self._layout.workers])

    def room(self, word: Room) -> int:
        return int(self._words[(len(Kind) + 3) * self._layout.workers + word])

    def measured(self, held: int, mark: int, full: bool, growth: float) -> None:
        """The leader's measure of the buffer (one writer: the leader)."""
        base = (len(Kind) + 3) * self._layout.workers
        self._words[base + Room.HELD] = held
        self._words[base + Room.MARK] = mark
        self._words[base + Room.GROWTH] = round(growth * 1000)
        self._words[base + Room.FULL] = int(full)

    def set_room(self, word: Room, value: int) -> None:
        """One word of the leader's (``Room.DRY``, ``Room.ROUNDS``): one writer, the leader."""
        self._words[(len(Kind) + 3) * self._layout.workers + word] = value

    # notes: a slot each, written by its worker, read whole (a sequence number, odd mid-write)

    @property
    def workers(self) -> int:
        return self._layout.workers

    def _note_slot(self, worker: int) -> tuple[memoryview, memoryview]:
        slot = self._notes[worker * NOTE_BYTES : (worker + 1) * NOTE_BYTES]
        return slot[:16].cast("Q"), slot[16:]

    def note(self, text: bytes) -> None:
        """This worker's note (cut at ``NOTE_BYTES``)."""
        words, room = self._note_slot(self._worker)
        text = text[: len(room)]
        words[0] += 1
        words[1] = len(text)
        room[: len(text)] = text
        words[0] += 1

    def noted(self, worker: int) -> bytes:
        words, room = self._note_slot(worker)
        while True:
            sequence = words[0]
            text = bytes(room[: min(words[1], len(room))])
            if sequence % 2 == 0 and words[0] == sequence:
                return text

    # tables, under the lock

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        if self._lock is None:
            yield
            return
        fcntl.flock(self._lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(self._lock, fcntl.LOCK_UN)

    def open_stream(self, key: str, most: int, most_per_key: int) -> str | None:
        """Counts a stream of ``key`` unless that passes a bound: which one (``service``,
        ``key``) when it would; None when it was counted."""
        with self._locked():
            if self._words[self._stream_total] >= most:
                return "service"
            slot = _slot(self._stream_keys, self._stream_counts, stable_hash(key))
            if slot is None:
                return "service"
            if self._stream_counts[slot] >= most_per_key:
                return "key"
            self._stream_keys[slot] = stable_hash(key)
            self._stream_counts[slot] += 1
            self._words[self._stream_total] += 1
            return None

    def close_stream(self, key: str) -> None:
        with self._locked():
            slot = _slot(self._stream_keys, self._stream_counts, stable_hash(key))
            if slot is not None and self._stream_keys[slot] == stable_hash(key):
                self._stream_counts[slot] = max(0, self._stream_counts[slot] - 1)
                self._words[self._stream_total] = max(0, self._words[self._stream_total] - 1)

    def streams(self, key: str | None = None) -> int:
        """Open streams in the service, or of ``key``."""
        with self._locked():
            if key is None:
                return int(self._words[self._stream_total])
            slot = _slot(self._stream_keys, self._stream_counts, stable_hash(key))
            if slot is None or self._stream_keys[slot] != stable_hash(key):
                return 0
            return int(self._stream_counts[slot])

    def charge(self, address: str, change: float, limit: float, rate: float) -> float:
        """The invalid-key budget of ``address`` (a full ``limit`` when it has none, refilled
        at ``rate`` a second), moved by ``change`` (negative: spent) and kept within
        ``limit``; returns it as it was before the change."""
        key, now = stable_hash(address), time.monotonic()
        with self._locked():
            slot = self._budget_slot(key, limit, rate, now)
            budget = limit
            if self._budget_keys[slot] == key:
                left, at = self._budget_left[slot], self._budget_at[slot]
                budget = min(limit, left + (now - at) * rate)
            after = min(limit, budget + change)
            self._budget_keys[slot] = key
            self._budget_left[slot] = after
            self._budget_at[slot] = now
            return budget

    def _budget_slot(self, key: int, limit: float, rate: float, now: float) -> int:
        """``key``'s slot, else a free one (never used, or a budget refilled since), else the
        least recently charged of its neighbourhood."""
        keys, left, at = self._budget_keys, self._budget_left, self._budget_at
        start = key & (ADDRESS_SLOTS - 1)
        free: int | None = None
        oldest = start
        for step in range(PROBES):
            slot = (start + step) & (ADDRESS_SLOTS - 1)
            held = keys[slot]
            if held == key:
                return slot
            if held == 0:
                return slot if free is None else free
            if free is None and left[slot] + (now - at[slot]) * rate >= limit:
                free = slot
            if at[slot] < at[oldest]:
                oldest = slot
        return free if free is not None else oldest


def _slot(keys: memoryview, counts: memoryview, key: int) -> int | None:
    """``key``'s slot in a table of counts, else the first free one on its way (never used,
    or at 0); None when neither is within ``PROBES``."""
    size = len(keys)
    start = key & (size - 1)
    free: int | None = None
    for step in range(PROBES):
        slot = (start + step) & (size - 1)
        held = keys[slot]
        if held == key:
            return slot
        if held == 0:
            return slot if free is None else free
        if free is None and counts[slot] == 0:
            free = slot
    return free


class CatchUp:
    """Keeps this worker's copy of something the workers share (which keys the upstream
    refused, the flag copies) no older than what any worker has shown: ``current`` returns
    once every change of its kind published before the call is loaded (``load``), one load
    at a time for all the requests waiting."""

    def __init__(self, shared: Shared, kind: Kind, load: Callable[[], Awaitable[None]]) -> None:
        self._shared = shared
        self._kind = kind
        self._load = load
        self._loaded = shared.changes(kind)
        self._task: asyncio.Task[None] | None = None
        self._failing = False

    async def current(self) -> None:
        target = self._shared.changes(self._kind)
        while self._loaded < target:
            if self._task is None:
                self._task = asyncio.create_task(self._run(), name=f"catch-up-{self._kind.name}")
            await asyncio.shield(self._task)

    def published(self) -> None:
        """This worker stored a change and shows it: counted for the others; nothing for
        this worker to load unless others published meanwhile."""
        before = self._shared.changes(self._kind)
        self._shared.publish(self._kind)
        if self._loaded >= before:
            self._loaded = before + 1

    async def _run(self) -> None:
        start = self._shared.changes(self._kind)
        try:
            await self._load()
        except Exception as exc:
            # Without the file (a full disk) this worker answers from what it holds rather
            # than not at all; its periodic tick loads the rest once it can.
            if not self._failing:
                log.error(
                    "cannot load what other workers stored: answering from this worker's copy",
                    extra={"kind": self._kind.name.lower(), "error": str(exc)},
                )
            self._failing = True
        else:
            self._failing = False
        finally:
            self._loaded = max(self._loaded, start)
            self._task = None
