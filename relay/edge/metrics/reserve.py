"""Disk space set aside next to the buffer, handed back when the disk is full.

A full disk does not stop reads, but a relay must also drain: and a WAL checkpoint, a claim
and the acknowledgement of a sent batch all need a little room before they free any. Worse,
in WAL mode the pages written since the last checkpoint sit in the WAL until a checkpoint
copies them into the database file, which then grows: on a full disk no checkpoint
completes, so every later write appends to the WAL, and nothing is ever freed. The reserve
(``<data_dir>/buffer.reserve``, allocated, never sparse, as large as the WAL is allowed to
grow) is the room that breaks this: when the flusher or the buffer monitor meets a full
disk, it is deleted and the WAL checkpointed at once (``make_room``), before anything else
writes; the drain then reuses the pages it frees. While it is out, the WAL is checkpointed
after every commit (``SqliteDatabase.keep_wal_short``): a WAL left to grow into the room
would take what its own checkpoint needs (measured: a relay that had to hand the reserve
back to open its file sent one batch of four, then its WAL held the rest of the disk). It
is allocated again once the disk has room for twice it; a relay that starts on a disk too
full to open its buffer (SQLite needs room for the WAL index) hands it back for that too.

Its size (and the WAL's bound) is ``reserve_bytes`` of the buffer's bound, but never more
than a sixteenth of the disk: sized by the bound alone (4 MiB by default), it was never taken
on a disk smaller than twice it, and a relay without one filled a 6 MiB disk to a state it
could not drain from (the WAL holding everything, no checkpoint possible).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from pathlib import Path

from prometheus_client import Counter

from relay.api.shared import Room, Shared
from relay.core.domain import IdempotencyKey, IngestBatch
from relay.core.errors import DiskFull, StorageError, Unavailable, Unpaid
from relay.edge.metrics.space import reserve_bytes
from relay.store.metrics import MetricsStore, written_size
from relay.store.sqlite import SqliteDatabase

log = logging.getLogger(__name__)

RELEASED = Counter(
    "relay_buffer_reserve_released_total",
    "Times the disk was full and the space set aside for draining was handed back",
)
REFUSED = Counter(
    "relay_buffer_refused_requests_total",
    "Requests answered 503 because the buffer was full and their key's own buffered counts"
    " could not make room, by the key's kind (browser: a public key's)",
    ["kind"],
)
RETRY_AFTER = 60.0  # seconds between attempts to allocate it again
OPEN_RETRY = 0.5
GROWTH = 3.0  # file bytes per byte counted written, until the leader has measured some
ROOM_PATIENCE = 10.0
"""Seconds new counts wait for room in a buffer over its bound (``Admitted``)."""
ROOM_POLL = 0.01
BROWSER_SHARE = 0.75
"""The share of the bound browsers' counts grow the buffer to (``Admitted``): past it they
take the room of their own key's oldest; an SDK's counts have the last quarter."""
START_PATIENCE = 30.0
"""Seconds a file opened at start waits for room on a full disk (``open_with_room``)."""
MIN_BYTES = 64 * 1024
WAL_SHARE = 4


def wal_bound(reserve: int) -> int:
    """Where the buffer's WAL is checkpointed: a quarter of the reserve. What a checkpoint
    must place in the database file is what the WAL holds not yet copied, up to this bound
    plus the commit that crossed it, and the reserve handed back on a full disk must hold
    that: checkpointed at the reserve's own size, a commit past it left a WAL the reserve
    could not place, and the relay drained nothing until the disk grew."""
    return reserve // WAL_SHARE


def reserve_size(max_bytes: int, data_dir: Path) -> int:
    """The reserve's size and the WAL's bound for a buffer capped at ``max_bytes`` in
    ``data_dir`` (see the module's docstring)."""
    existing = next(p for p in (data_dir, *data_dir.parents) if p.exists())
    try:
        disk = os.statvfs(existing)
    except OSError:
        return reserve_bytes(max_bytes)
    return min(reserve_bytes(max_bytes), max(MIN_BYTES, disk.f_blocks * disk.f_frsize // 16))


class Reserve:
    def __init__(self, path: Path, size: int) -> None:
        self._path = path
        self._size = size
        self._next_try = 0.0

    @property
    def size(self) -> int:
        return self._size

    @property
    def held(self) -> bool:
        return self._path.exists()

    def room(self) -> int:
        """Bytes free on the disk."""
        try:
            disk = os.statvfs(self._path.parent)
        except OSError:
            return 0
        return disk.f_bavail * disk.f_frsize

    def ensure(self) -> None:
        """Allocate the reserve if it is missing and the disk has room for twice it (taking it
        must not fill the disk the buffer drains on); never fails."""
        if self._path.exists() or time.monotonic() < self._next_try:
            return
        self._next_try = time.monotonic() + RETRY_AFTER
        if self.room() < 2 * self._size:
            return
        try:
            fd = os.open(self._path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except OSError:
            return
        try:
            os.posix_fallocate(fd, 0, self._size)
            os.fsync(fd)
        except OSError:  # no room (yet): try again later
            os.close(fd)
            self._path.unlink(missing_ok=True)
            return
        os.close(fd)

    def release(self) -> bool:
        """Hand the space back (the disk is full); True if there was any to give."""
        try:
            self._path.unlink()
        except OSError:  # none, or a read-only disk
            return False
        RELEASED.inc()
        log.warning(
            "disk full: released the space set aside for draining the buffer",
            extra={"bytes": self._size, "path": str(self._path)},
        )
        return True


async def make_room(reserve: Reserve, db: SqliteDatabase) -> bool:
    """On a full disk: hand the reserve back and checkpoint the WAL into the room it leaves.
    True if there was a reserve to give (the caller may try again at once)."""
    if not reserve.release():
        return False
    try:
        await db.keep_wal_short(True)
        await db.checkpoint()
    except StorageError as exc:
        log.error("disk full: cannot checkpoint the buffer's WAL", extra={"error": str(exc)})
    return True


class IngestGate:
    """While the disk is nearly full (less room than the reserve), new counts are taken only
    while the WAL is at most half the reserve: a reader holding checkpoints back let it grow
    past what the reserve could place, and a relay restarted on the full disk drained
    nothing (found in CI). While the reserve is out, new counts are taken only into room
    the drain has freed inside the buffer file (at least the reserve's size): a commit that
    grows the file on a full disk leaves the WAL with pages no checkpoint can place, and then
    nothing could be written, the drain's acknowledgements included (measured: SDKs that
    went on posting after the reserve was handed back took its room, and the restarted relay
    drained nothing). SDKs get 503 and keep their counts meanwhile."""

    def __init__(self, reserve: Reserve, db: SqliteDatabase) -> None:
        self._reserve = reserve
        self._db = db

    async def admit(self) -> None:
        size = self._reserve.size
        if self._reserve.held:  # a stat of the WAL first: statvfs is the rarer need
            if _wal_bytes(self._db) <= size // 2 or self._reserve.room() >= size:
                return
            # nearly full, and checkpoints lag (a reader holds them back): the WAL must stay
            # what the reserve can place in the database once the disk is full
            raise DiskFull(
                "the disk is nearly full: counts are taken again once the buffer's WAL is copied"
            )
        if self._reserve.room() >= 2 * size:
            return  # the reserve will be taken at the next check
        row = await self._db.fetch_one(
            "SELECT (SELECT freelist_count FROM pragma_freelist_count())"
            " * (SELECT page_size FROM pragma_page_size())"
        )
        if row is None or row[0] < self._reserve.size:
            raise DiskFull("the disk is full: counts are taken again once the buffer drained")


class Admitted:
    """A relay worker's ingest sink: counts written only while the disk has room for them
    (``IngestGate``), and while the buffer has: what a request will write is counted first
    (``Shared.admit``: in the memory the workers share, so requests at once see each
    other). While that takes the buffer past its bound (``over``) the request gives its
    count back and asks the leader for room, which makes it of everything but counts
    (``relay.edge.metrics.space``); once there is no more of that (``Room.DRY``), the
    request's new counts take the room of its own key's oldest (``relay.store.own_room``),
    never another key's; a request whose key holds too little gets 503 at once (an SDK
    keeps its counts and retries; the buffer holds other keys' counts, or counts already
    cut into batches for the upstream, and only the flusher frees room). The leader's room
    is waited for ``ROOM_PATIENCE`` seconds at most, then 503 too. Browsers' counts (a
    public key's, ``Origin.browser``) grow the buffer to ``BROWSER_SHARE`` of its bound
    only, then pay for their room at once: no flood of a key anyone can read leaves an SDK
    without room. A request larger than the room eviction can make goes in alone, once the
    leader has made what room it can: the buffer passes its bound by one request at most."""

    def __init__(
        self, store: MetricsStore, gate: IngestGate | None, shared: Shared, max_bytes: int
    ) -> None:
        self._store = store
        self._gate = gate
        self._shared = shared
        self._max_bytes = max_bytes
        self._waiting: dict[int, int] = {}  # this worker's requests waiting: room each wants

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

    def _alone(self, size: int) -> bool:
        """A request larger than the room eviction can make, with no other write in flight,
        once the leader has measured every write before it and made what room it can of
        other than counts. Once only counts are left (``Room.DRY``) it pays for its room
        as any other: let in unpaid, a key's one large request would take the files past
        the bound with nothing of its own given for it."""
        shared = self._shared
        large = size * growth(shared) > self._max_bytes - self._max_bytes // 8
        alone = shared.admitted() - shared.settled() == size
        measured = shared.room(Room.MARK) == shared.settled()
        room = not (shared.room(Room.FULL) or shared.room(Room.DRY))
        return large and alone and measured and room

    async def _room(self, size: int, browser: bool) -> bool:
        """False once ``size`` bytes are admitted; True when the request is to pay for its
        room (see the class's docstring)."""
        deadline = time.monotonic() + ROOM_PATIENCE
        bound = int(self._max_bytes * BROWSER_SHARE) if browser else self._max_bytes
        shared, waiter = self._shared, object()
        try:
            while True:
                shared.admit(size)
                if not over(shared, bound) or (not browser and self._alone(size)):
                    return False
                shared.withdraw(size)
                if browser or shared.room(Room.DRY):
                    return True
                self._wait(id(waiter), round(size * growth(shared)))  # the leader makes room
                if time.monotonic() >= deadline:
                    raise Unavailable("The buffer is full and making room: retry later")
                await asyncio.sleep(ROOM_POLL)
        finally:
            self._wait(id(waiter), 0)

    def _wait(self, waiter: int, room: int) -> None:
        """The room this worker's waiting requests want, told the leader."""
        if room:
            self._waiting[waiter] = room
        else:
            self._waiting.pop(waiter, None)
        self._shared.want_room(max(self._waiting.values(), default=0))


def over(shared: Shared, max_bytes: int) -> bool:
    """Whether the buffer is over ``max_bytes``, or would be with what every worker admitted
    since the leader last measured it (grown as the files grew per byte written)."""
    if shared.room(Room.FULL):
        return True
    admitted = shared.admitted() - shared.room(Room.MARK)
    return shared.room(Room.HELD) + admitted * growth(shared) > max_bytes


def growth(shared: Shared) -> float:
    """File bytes per byte counted written, as the leader last saw it."""
    return shared.room(Room.GROWTH) / 1000 or GROWTH


def _wal_bytes(db: SqliteDatabase) -> int:
    try:
        return os.stat(f"{db.path}-wal").st_size
    except FileNotFoundError:
        return 0


async def open_with_room(
    db: SqliteDatabase, reserve: Reserve | None, patience: float = 0.0
) -> None:
    """Open a file beside the buffer; on a disk too full for the WAL index SQLite needs to
    open it (a file closed cleanly has none), with the room the reserve hands back. With
    several workers there is one reserve for every file they open at start, and the leader
    may take the room it left (merging another worker's shard): while the disk stays full
    the open is tried again every ``OPEN_RETRY`` seconds for ``patience`` seconds, as the
    leader's drain frees room, rather than one worker's file stopping the relay (it did,
    now and then, in a full run of the tests)."""
    deadline = time.monotonic() + patience
    waiting = False
    while True:
        try:
            await db.open()
            return
        except StorageError:
            if reserve is None or reserve.room() >= reserve.size:
                raise  # not a full disk
            if reserve.release():
                continue
            if time.monotonic() >= deadline:
                raise
            if not waiting:
                log.warning("disk full: waiting for room to open", extra={"path": str(db.path)})
                waiting = True
            await asyncio.sleep(OPEN_RETRY)
