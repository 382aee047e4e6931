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

from relay.core.errors import DiskFull, StorageError
from relay.store.sqlite import SqliteDatabase

log = logging.getLogger(__name__)

RELEASED = Counter(
    "relay_buffer_reserve_released_total",
    "Times the disk was full and the space set aside for draining was handed back",
)
RETRY_AFTER = 60.0  # seconds between attempts to allocate it again
OPEN_RETRY = 0.5
START_PATIENCE = 30.0
"""Seconds a file opened at start waits for room on a full disk (``open_with_room``)."""
MIN_BYTES = 64 * 1024
WAL_SHARE = 4


def reserve_bytes(max_bytes: int) -> int:
    """The WAL's bound and the reserve's size for a buffer capped at ``max_bytes``: a
    sixteenth of it, between 256 KiB and SQLite's default 4 MiB."""
    return min(4 * 1024 * 1024, max(256 * 1024, max_bytes // 16))


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
    nothing. While the reserve is out, new counts are taken only into room
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
