"""Keeps the relay's buffer observable and bounded.

``buffer_max_bytes`` bounds the buffer file on disk: its pages in use (every table and
index: buffered counts, registrations, outbox, dead letters, idempotency keys; flag copies
and relays' reports are in ``cache.db``, bounded apart) and its WAL,
which has its own part of the bound (``wal_bytes``: checkpoints keep it there). When the
pages pass the rest, each of two parts over its own share is cut back, oldest first
(``BufferSpace.evict``), counted and logged: idempotency keys, to seven eighths of their
eighth of the bound, and the rest (counts and all else), to an eighth of the bound below
its share (what the WAL and the keys' part leave). So an upstream down for a long time
costs the oldest counts, never the disk or the relay's answers, and a caller flooding keys
costs only keys. Pages freed stay in the file for reuse, so the file's size on disk is
the most the buffer ever held, a little above the bound.

The check runs every ``interval`` seconds and as soon as the buffer's writes, by any worker
(they all write into this one file, and count what they write in the memory they share),
add up to a thirty-second of the bound, or what was held and written since passes it
(``listen``, every ``LISTEN_INTERVAL``); it reads page counts only. What it measured is
published in that memory (``relay.api.shared.Room``): while the buffer is over its bound,
and while what was written since the check would take it past, every worker holds new
counts back until the check has made room (``Admitted``), so the files stay within the
bound plus what was written between two looks (``docs/relays.md``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Set
from typing import Final

from aiohttp import web
from prometheus_client import Counter, Gauge

from relay.api.shared import Room, Shared
from relay.core.errors import DiskFull, StorageError
from relay.edge.metrics.admitted import GROWTH, over
from relay.store.buffer_space import BufferSpace, BufferStats, Evicted
from relay.store.own_room import EVICTED, EVICTED_EVALUATIONS
from relay.store.reserve import Reserve, make_room
from relay.store.salvage import damaged_files
from relay.store.sqlite import SqliteDatabase

log = logging.getLogger(__name__)

# Set by the leader worker only (``relay.process.server``); the others report 0, hence "livemax".
_ONE: Final = "livemax"
BUFFERED_ENTRIES = Gauge(
    "relay_buffer_entries",
    "Entries the relay holds and has not delivered: counts buffered, and the entries of"
    " outbox batches",
    multiprocess_mode=_ONE,
)
BUFFERED_REGISTRATIONS = Gauge(
    "relay_buffer_registrations", "Registrations waiting in the buffer", multiprocess_mode=_ONE
)
BUFFER_BYTES = Gauge(
    "relay_buffer_bytes",
    "Bytes of the buffer database's pages in use, plus its WAL",
    multiprocess_mode=_ONE,
)
OUTBOX_BATCHES = Gauge(
    "relay_outbox_batches", "Batches waiting to be accepted upstream", multiprocess_mode=_ONE
)
OUTBOX_ENTRIES = Gauge(
    "relay_outbox_entries", "Entries in batches waiting upstream", multiprocess_mode=_ONE
)
DEAD_LETTER_ENTRIES = Gauge(
    "relay_dead_letter_entries",
    "Entries kept in dead_letters (refused by the upstream for good)",
    multiprocess_mode=_ONE,
)
OLDEST_AGE = Gauge(
    "relay_buffer_oldest_entry_age_seconds",
    "Age of the oldest write not yet sent upstream (buffered or in the outbox)",
    multiprocess_mode=_ONE,
)
DAMAGED_FILES = Gauge(
    "relay_buffer_damaged_files",
    "Damaged buffer files found at start, moved aside (salvaged) and kept for an operator",
    multiprocess_mode=_ONE,
)
KEYS_EVICTED = Counter(
    "relay_idempotency_keys_evicted_total",
    "Idempotency keys forgotten before their TTL to bound the buffer",
)
DEAD_LETTERS_PRUNED = Counter(
    "relay_dead_letters_pruned_entries_total",
    "Dead-lettered entries deleted: past their age or size bound, or to bound the buffer",
)

MAX_GROWTH = 16.0
PUBLISH_EVERY = 2.0
OLDEST_EVERY = 30.0
"""Seconds between reads of the oldest unsent write (``BufferSpace.oldest_write`` reads
every buffered row); the age gauge counts on from the last read in between."""
DEAD_LETTER_MAX_AGE = 7 * 24 * 3600.0


class BufferMonitor:
    def __init__(
        self,
        db: SqliteDatabase,
        max_bytes: int,
        wal_bytes: int,
        reserve: Reserve,
        sending: Set[int],
        shared: Shared,
    ) -> None:
        """``reserve`` is the space set aside for draining, handed back on a full disk and
        taken again when there is room; ``sending``, the ids of the outbox batches being
        sent, live (never evicted); ``shared``: where every worker counts what it wrote,
        and where the measure is published."""
        self._db = db
        self._space = BufferSpace(db, wal_bytes)
        self._growth = GROWTH
        self._pages = 0  # pages in use at the last measure
        self._max_bytes = max_bytes
        self._wal_bytes = wal_bytes
        self._reserve = reserve
        self._sending = sending
        self._shared = shared
        self.wake = asyncio.Event()
        self._trigger = max(64 * 1024, max_bytes // 32)
        self._heard = shared.settled()
        self._published_at = -PUBLISH_EVERY
        self._oldest_at = -OLDEST_EVERY
        self._oldest_write: float | None = None
        self._full = False  # the disk was full at the last check, with no reserve to give

    async def listen(self) -> None:
        """A look at what the workers wrote since the last check: a flood, or writes that
        would take the buffer past its bound, wake it."""
        since = self._shared.admitted() - self._heard
        waiting = self._shared.wanted()
        if since >= self._trigger or waiting or over(self._shared, self._max_bytes):
            self.wake.set()

    async def checked_at_start(self, app: web.Application) -> AsyncIterator[None]:
        """The leader bounds the buffer and publishes its gauges before serving; a full disk
        must not stop the relay from starting (it answers 503 to writes and drains what it
        holds)."""
        try:
            await self.check()
        except StorageError as exc:
            log.warning("cannot check the buffer at start-up", extra={"error": str(exc)})
        yield

    async def check(self) -> None:
        before = (self._pages, self._heard)
        self.wake.clear()
        try:
            wanted = self._shared.wanted()
            footprint = await self._measure()
            self._grew(self._pages - before[0], self._heard - before[1])
            if footprint > self._max_bytes or footprint + wanted > self._max_bytes:
                self._room(footprint, full=True)
                await self._bound(wanted)
                footprint = await self._measure()
            else:
                self._shared.set_room(Room.DRY, 0)
                if self._space.wal_bytes() > self._wal_bytes:
                    await self._db.checkpoint()
                    footprint = await self._measure()
            self._room(footprint, full=footprint > self._max_bytes)
            if wanted:
                self._shared.set_room(Room.ROUNDS, self._shared.room(Room.ROUNDS) + 1)
        except DiskFull as exc:  # deleting needs a little room too
            if not await make_room(self._reserve, self._db):
                self._disk_full(str(exc))
            return
        if self._full:
            self._full = False
            log.info("buffer: the disk has room again")
        if footprint <= self._max_bytes:
            await asyncio.to_thread(self._reserve.ensure)
        await self._db.keep_wal_short(not self._reserve.held)
        if time.monotonic() - self._oldest_at >= OLDEST_EVERY:  # it reads every row's
            self._oldest_at = time.monotonic()
            self._oldest_write = await self._space.oldest_write()
        if time.monotonic() - self._published_at >= PUBLISH_EVERY:  # counting reads every row
            self._published_at = time.monotonic()
            self._publish(await self._space.stats())

    async def _measure(self) -> int:
        """The files' bytes (pages in use and the WAL), with what the workers had written
        by then (read first: what commits meanwhile is counted twice, never missed)."""
        self._heard = self._shared.settled()
        self._pages = await self._space.pages_bytes()
        return self._pages + self._space.wal_bytes()

    def _grew(self, grown: int, written: int) -> None:
        """How much the pages in use grow per byte the workers count written (their
        estimate leaves out indexes and b-tree pages), from a check's worth of writes (the
        WAL, emptied by checkpoints, is left out: it held the same pages a while)."""
        if written >= self._trigger // 4 and grown > 0:
            self._growth = min(MAX_GROWTH, max(1.0, grown / written))

    def _room(self, footprint: int, full: bool) -> None:
        self._shared.measured(footprint, self._heard, full, self._growth)

    def _disk_full(self, error: str) -> None:
        """Said once, not at every check: the drain (``relay.edge.metrics.flusher``) goes on."""
        if not self._full:
            self._full = True
            log.warning(
                "disk full, no reserve left: the buffer's WAL waits for room to be checkpointed",
                extra={"error": error},
            )

    async def _bound(self, wanted: int = 0) -> None:
        """Evict all but counts to the target when over the bound, and further when new
        counts wait for room (``wanted`` bytes of it), to where they fit; when that cannot
        make the room wanted, new counts pay for their own (``Room.DRY``). Counts are never
        evicted here, whoever grew the files (``relay.store.buffer_space``)."""
        await self._db.checkpoint()  # the WAL back to nothing: what is left is data
        began = time.time()
        held = await self._space.pages_bytes()
        keys_part = self._max_bytes // 8
        rest_part = self._max_bytes - self._wal_bytes - keys_part
        if held + wanted > self._max_bytes - self._wal_bytes:
            keys = await self._space.key_bytes()
            aim = _aim(held - keys, rest_part, self._max_bytes // 8)
            target = max(0, min(aim, rest_part - wanted))
            keys_target = _aim(keys, keys_part, keys_part // 8)
            evicted = await self._space.evict(target, keys_target, began, self._sending)
            rest, keys = await self._space.rest_bytes(), await self._space.key_bytes()
            room = self._max_bytes - self._wal_bytes - keys  # what the rest may hold
            self._shared.set_room(Room.DRY, int(rest + wanted > min(room, rest_part)))
            self._report(evicted, held)

    def _report(self, evicted: Evicted, held: int) -> None:
        EVICTED.inc(evicted.entries)
        EVICTED_EVALUATIONS.inc(evicted.evaluations)
        KEYS_EVICTED.inc(evicted.keys)
        DEAD_LETTERS_PRUNED.inc(evicted.dead_letters)
        log.warning(
            "buffer over buffer_max_bytes: evicted the oldest data",
            extra={
                "entries": evicted.entries,
                "evaluations": evicted.evaluations,
                "idempotency_keys": evicted.keys,
                "dead_letter_entries": evicted.dead_letters,
                "bytes": evicted.bytes,
                "tables": sorted(evicted.tables),
                "held_bytes": held,
                "max_bytes": self._max_bytes,
            },
        )

    async def prune(self) -> None:
        """Dead letters are kept a week, and in at most an eighth of the bound."""
        pruned = await self._space.prune_dead_letters(DEAD_LETTER_MAX_AGE, self._max_bytes // 8)
        if pruned:
            DEAD_LETTERS_PRUNED.inc(pruned)
            log.info("pruned dead letters", extra={"entries": pruned})

    def _publish(self, stats: BufferStats) -> None:
        BUFFERED_ENTRIES.set(stats.entries + stats.outbox_entries)
        BUFFERED_REGISTRATIONS.set(stats.registrations)
        BUFFER_BYTES.set(stats.bytes)
        OUTBOX_BATCHES.set(stats.outbox_batches)
        OUTBOX_ENTRIES.set(stats.outbox_entries)
        DEAD_LETTER_ENTRIES.set(stats.dead_letter_entries)
        written = self._oldest_write if stats.entries or stats.outbox_entries else None
        OLDEST_AGE.set(0.0 if written is None else max(0.0, time.time() - written))
        DAMAGED_FILES.set(len(damaged_files(self._db.path)))


def _aim(held: int, part: int, below: int) -> int:
    """Where eviction takes data holding ``held`` bytes of its ``part`` of the bound:
    ``below`` under it once over it, else only back to it (should writes during the
    eviction pass it)."""
    return part - below if held > part else part
