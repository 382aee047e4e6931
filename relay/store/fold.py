"""The fold: the central service's ingest log summed into the tables its reads use.

A fold pass is one transaction: it takes the fold lock (on PostgreSQL an advisory lock: one
pass at a time across every instance on the database, and a pass whose instance dies is
rolled back and its lock released with its connection), deletes up to ``PASS_BYTES`` of log
rows returning them, sums them in memory (counts summed, the latest registration kept,
impact states folded, in log order) and writes the sums with the writes a group commit made
before the log (``relay.store.metrics.write_folded``). A count is thus either still in the
log or in the tables, never both and never neither, whatever stops when: exactly once.

Every instance folds, one pass at a time: worker 0 every ``FOLD_INTERVAL`` seconds (what
keeps the log short), and every read first (``caught_up``), so what a read returns includes
every count answered 202 before it began, on any instance. Reads of one process share a
fold that began after they asked, as group commit shares a transaction.

Below the API's validation the database might still refuse a value (a name too long for
PostgreSQL's index: the API refuses those). A pass refused is retried in halves down to one
log row, whose batch is then cut in halves in place (the row replaced by two, in one
transaction), down to the one count, registration or series refused, which is moved to
``ingest_refused``, logged and counted: the rest of what shared its group is folded.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Sequence

from prometheus_client import Counter, Histogram

from relay.core.errors import DataRefused, StorageError
from relay.core.ingest_batch import IngestBatch, MetricKey
from relay.store import ingest_log
from relay.store.metrics import MAX_TOTAL, write_folded
from relay.store.sql import Database, Row, Transaction

log = logging.getLogger(__name__)

FOLD_INTERVAL = 1.0
"""Seconds between two folds of worker 0 of each instance: the log holds about this much
traffic (reads fold first whatever its length)."""
PASS_BYTES = 2 * 1024 * 1024
"""Log bytes (JSON) one pass takes at most (one row at least): what it holds in memory
(~30,000 counts when none share a key, ~15 MB decoded)."""
PASS_ROWS = 1000
FOLD_LOCK = 0x72656C6179666F6C  # "relayfol": pg_advisory_xact_lock key of a fold pass

FOLD_SECONDS = Histogram(
    "relay_fold_seconds",
    "Seconds a fold of the ingest log took (its passes, waits for other instances' included)",
)
FOLDED = Counter("relay_folded_log_rows_total", "Ingest log rows (group commits) folded")
REFUSED = Counter(
    "relay_fold_refused_total",
    "Counts, registrations or impact series the database refused to fold (ingest_refused)",
)


class Folder:
    """The fold of one process. ``instances_kept``: as ``MetricsStore``'s."""

    def __init__(self, db: Database, instances_kept: int | None) -> None:
        self._db = db
        self._kept = instances_kept
        self._started = 0  # folds begun by this process
        self._running: asyncio.Task[None] | None = None
        self._failing = False

    async def caught_up(self) -> None:
        """Return once a fold begun after this call has ended: every count committed before
        the call is then in the tables. Raises ``StorageError`` if that fold failed."""
        asked = self._started
        while True:
            task = self._running
            if task is None or task.done():
                self._started += 1
                task = self._running = asyncio.create_task(self._fold(), name="fold")
                task.add_done_callback(_retrieve)
            if self._started > asked:
                # shield: a reader that goes away must not cancel the fold others wait for
                await asyncio.shield(task)
                return
            with contextlib.suppress(StorageError):  # begun before the call: not its fold
                await asyncio.shield(task)

    async def fold(self) -> None:
        """The periodic fold: a failure (the database away) is logged once, not every time."""
        try:
            await self.caught_up()
        except StorageError as exc:
            if not self._failing:
                log.warning("cannot fold the ingest log", extra={"error": str(exc)})
            self._failing = True
        else:
            if self._failing:
                log.warning("folding the ingest log again")
            self._failing = False

    async def stop(self) -> None:
        """Let a fold in progress end (before the database closes)."""
        if self._running is not None:
            with contextlib.suppress(StorageError):
                await self._running

    async def _fold(self) -> None:
        """Every log row visible now, one pass after the other: rows committed later (ids
        above ``last`` or not) are the next fold's, so a fold ends however busy ingest is."""
        began = time.monotonic()
        row = await self._db.fetch_one("SELECT max(id) FROM ingest_log")
        last = None if row is None else row[0]
        while last is not None:
            rows = await self._db.fetch_all(
                "SELECT id, bytes FROM ingest_log WHERE id <= ? ORDER BY id LIMIT ?",
                (last, PASS_ROWS),
            )
            if not rows:
                break
            await self._pass(_within(rows, PASS_BYTES))
        FOLD_SECONDS.observe(time.monotonic() - began)

    async def _pass(self, ids: Sequence[int]) -> None:
        try:
            FOLDED.inc(await self._db.run(functools.partial(self._write, ids)))
        except DataRefused as exc:
            if len(ids) > 1:
                await self._pass(ids[: len(ids) // 2])
                await self._pass(ids[len(ids) // 2 :])
                return
            parts, refused = await self._db.run(functools.partial(_split, ids[0], str(exc)))
            if refused is not None:
                REFUSED.inc()
                log.error(
                    "the database refused to fold a count: kept in ingest_refused",
                    extra={"error": refused},
                )
            for part in parts:
                await self._pass([part])

    async def _write(self, ids: Sequence[int], tx: Transaction) -> int:
        """The log rows folded (none: another instance's pass took them)."""
        await tx.lock(FOLD_LOCK)
        rows = await tx.fetch_all(
            f"DELETE FROM ingest_log WHERE id IN ({', '.join('?' * len(ids))})"
            " RETURNING id, arrived, batch",
            ids,
        )
        if not rows:
            return 0
        try:
            batch, arrived = summed(rows)
        except ValueError as exc:  # a row this version cannot read: set aside as refused
            raise DataRefused(str(exc)) from exc
        await write_folded(tx, batch, arrived, self._kept)
        return len(rows)


def summed(rows: Sequence[Row]) -> tuple[IngestBatch, dict[MetricKey, float]]:
    """The log rows (id, arrived, batch) summed in id order, totals kept within
    ``MAX_TOTAL`` as the tables keep them; when each count last arrived."""
    sums = ingest_log.Summed()
    for row in sorted(rows, key=lambda row: int(row[0])):
        sums.add(row[2], float(row[1]))
    batch, arrived = sums.result()
    for counts in batch.counts.values():
        counts.yes, counts.no = min(counts.yes, MAX_TOTAL), min(counts.no, MAX_TOTAL)
        for name, count in counts.variants.items():
            counts.variants[name] = min(count, MAX_TOTAL)
    return batch, arrived


async def _split(row_id: int, error: str, tx: Transaction) -> tuple[list[int], str | None]:
    """Log row ``row_id`` replaced by its batch's halves (their ids), or when it holds one
    element only, moved to ``ingest_refused`` (the error returned, to log after the commit)."""
    await tx.lock(FOLD_LOCK)
    rows = await tx.fetch_all(
        "DELETE FROM ingest_log WHERE id = ? RETURNING arrived, batch", (row_id,)
    )
    if not rows:
        return [], None
    arrived, text = rows[0][0], rows[0][1]
    try:
        halves = ingest_log.halves(ingest_log.decode(text))
    except ValueError as exc:  # kept whole, for an operator (or a later version) to read
        error, halves = str(exc), None
    if halves is None:
        await tx.execute(
            "INSERT INTO ingest_refused (arrived, refused_at, error, batch) VALUES (?, ?, ?, ?)",
            (arrived, time.time(), error[:1000], text),
        )
        return [], error
    return [await ingest_log.append(tx, ingest_log.encode(half), arrived) for half in halves], None


def _within(rows: Sequence[Row], budget: int) -> list[int]:
    """The ids of the first rows (id, bytes) within ``budget`` bytes, one at least."""
    ids: list[int] = []
    total = 0
    for row in rows:
        total += int(row[1])
        if ids and total > budget:
            break
        ids.append(int(row[0]))
    return ids


def _retrieve(task: asyncio.Task[None]) -> None:
    """A fold's failure is seen even when every reader waiting for it has gone."""
    if not task.cancelled():
        task.exception()
