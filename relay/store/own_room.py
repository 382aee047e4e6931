"""Room in a full relay buffer, paid for by the key that wants it (buffer migration 0006).

Each buffered count is its key's (``owner``: ``relay.core.ingest_batch.Origin``), or nobody's once
two keys added to it. When the buffer is full, a request's new counts (the ones not yet
buffered: adding to a count takes no room) are written only once as many bytes of its own
key's oldest counts are deleted, oldest hour and least recently written first, none of which
the request adds to, nor any added to since the room was chosen. A key that holds too little
is refused (``Unpaid``, 503): what one key posted is never evicted for another key's growth.

The work is bounded by the request: one lookup of its counts, then the oldest counts of its
key until they add up to what it needs (each is at least ``ROW_BYTES``).
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from collections import Counter as Tally
from collections.abc import Iterable, Sequence, Set
from functools import partial
from typing import Any, NamedTuple

from prometheus_client import Counter

from relay.core.errors import Unpaid
from relay.core.ingest_batch import NOBODY, Counts, IngestBatch, MetricKey
from relay.store.sql import Database, Transaction

log = logging.getLogger(__name__)

EVICTED = Counter(
    "relay_evicted_entries_total",
    "Buffered entries dropped to bound the buffer, for any reason (a key's own room included)",
)
EVICTED_EVALUATIONS = Counter(
    "relay_evicted_evaluations_total",
    "Evaluations (yes + no + variant counts) the evicted entries held",
)
OWN_EVICTED = Counter(
    "relay_evicted_own_entries_total",
    "Of those, counts evicted to make room for the same key's new counts in a full buffer,"
    " by the key's kind (browser: a public key's)",
    ["kind"],
)
OWN_EVICTED_EVALUATIONS = Counter(
    "relay_evicted_own_evaluations_total",
    "Evaluations (yes + no + variant counts) those counts held",
    ["kind"],
)

ROW_BYTES = 24
"""What a row costs beyond its names, in the estimates of the data held (``written_size``,
``relay.store.buffer_space``)."""

Key = tuple[Any, ...]
"""A count's row key, (feature_name, app_name, environment, hour), and in ``choose``'s
answer the counts it held (yes, no)."""
_KEY = "feature_name, app_name, environment, hour"
_CHUNK = 500  # row keys per statement: 2,000 parameters
STEP_BYTES = 64 * 1024
"""About the most one transaction deletes, without a bound of the caller's."""
_PAGE = 256  # candidate counts read at a time
_AGE = "hour, touched, feature_name, app_name, environment"
"""The order counts are chosen in, oldest first: the index metrics_owner_age holds it (the
key's columns end each entry of a WITHOUT ROWID table's index), so a page is read from
where the last one ended, not counted again from the start."""
_ROW = f"length(feature_name) + length(app_name) + length(environment) + {ROW_BYTES}"
_VARIANT = f"{_ROW} + length(variant)"
"""A variant row's bytes: it repeats its count's names (``relay.store.buffer_space``)."""
COUNT_BYTES = (
    f"{_ROW} + (SELECT coalesce(sum({_VARIANT}), 0) FROM metric_variants v WHERE"
    " (v.feature_name, v.app_name, v.environment, v.hour)"
    " = (m.feature_name, m.app_name, m.environment, m.hour))"
)
"""A buffered count's bytes (its row aliased ``m``), in ``count_size``'s units."""


PAY_ROUNDS = 4
LOG_EVERY = 10.0  # seconds: these evictions are logged summed, at most this often


class Payments:
    def __init__(self, db: Database, step_bytes: int) -> None:
        """``step_bytes``: about the most one transaction deletes (the WAL's bound)."""
        self._db = db
        self._step_bytes = step_bytes
        self._paying: weakref.WeakValueDictionary[int, asyncio.Lock] = (
            weakref.WeakValueDictionary()
        )  # owner: its lock, while a request holds or waits for it
        self._unlogged: Tally[str] = Tally()
        self._logged_at = 0.0

    async def make_room(self, batch: IngestBatch) -> None:
        """Delete as many bytes of the oldest counts of ``batch``'s key as its new counts
        take, or raise ``Unpaid``. Done before the write, in transactions of about
        ``step_bytes`` each. A key's requests pay one at a time in this worker (at once,
        they would choose the same oldest counts); another worker's may still choose the
        same, so what one did not free is chosen again, ``PAY_ROUNDS`` times at most.
        Should the write then fail, its key has lost counts for room it did not take, and
        its SDK retries into that room."""
        owner = batch.origin.owner
        if owner == NOBODY:
            return
        lock = self._paying.get(owner)
        if lock is None:
            lock = self._paying[owner] = asyncio.Lock()
        async with lock:
            await self._pay(batch)

    async def _pay(self, batch: IngestBatch) -> None:
        need = await self._db.run(partial(needed, batch=batch))
        owner, kind = batch.origin.owner, "browser" if batch.origin.browser else "client"
        spared = {row_key(key) for key in batch.counts}
        for _ in range(PAY_ROUNDS if need > 0 else 0):
            chosen = await self._db.run(partial(choose, owner=owner, need=need, spared=spared))
            if chosen is None:
                break
            for step in steps(chosen, self._step_bytes):
                freed = await self._db.run(partial(evict, keys=step, owner=owner))
                self._evicted(kind, freed)
                need -= freed.bytes
            if need <= 0:
                return
        if need > 0:
            raise Unpaid(
                "The buffer is full, and this key's buffered counts cannot make room for its"
                " new ones: retry later"
            )

    def _evicted(self, kind: str, freed: Freed) -> None:
        """Counted at once, logged summed: a full buffer takes room at every write."""
        EVICTED.inc(freed.entries)
        EVICTED_EVALUATIONS.inc(freed.evaluations)
        OWN_EVICTED.labels(kind).inc(freed.entries)
        OWN_EVICTED_EVALUATIONS.labels(kind).inc(freed.evaluations)
        self._unlogged[kind] += freed.entries
        if time.monotonic() - self._logged_at < LOG_EVERY:
            return
        self._logged_at = time.monotonic()
        log.warning(
            "buffer full: new counts took the room of their own key's oldest",
            extra={f"{kind}_entries": count for kind, count in sorted(self._unlogged.items())},
        )
        self._unlogged.clear()


def count_size(key: MetricKey, counts: Counts) -> int:
    """The estimate of a count's bytes, its variants' included: each variant's row repeats
    the count's names and adds its own (a flat price per variant let 100 variants of 250
    characters each write ten times their estimate, past the bound)."""
    row = len(key.feature_name) + len(key.app_name) + len(key.environment) + ROW_BYTES
    return row + sum(row + len(variant) for variant in counts.variants)


def row_key(key: MetricKey) -> Key:
    return (key.feature_name, key.app_name, key.environment, key.hour)


async def needed(tx: Transaction, batch: IngestBatch) -> int:
    """The bytes of ``batch``'s new counts: those not buffered yet."""
    keys = {row_key(key): count_size(key, counts) for key, counts in batch.counts.items()}
    held = await _present(tx, sorted(keys))
    return sum(size for key, size in keys.items() if key not in held)


async def choose(
    tx: Transaction, owner: int, need: int, spared: Set[Key]
) -> list[tuple[Key, int]] | None:
    """The oldest counts of ``owner`` that add up to ``need`` bytes, none of ``spared``,
    each as its row key with the counts it held then (``evict`` deletes it only if they
    still are), and its bytes; None when the key holds too little."""
    chosen: list[tuple[Key, int]] = []
    freed, after = 0, (-1, -1.0, "", "", "")  # (hour, touched, names): before every count
    while freed < need:
        rows = await tx.fetch_all(
            f"SELECT {_KEY}, yes, no, {COUNT_BYTES}, touched FROM metrics m WHERE owner = ?"
            f" AND ({_AGE}) > (?, ?, ?, ?, ?) ORDER BY {_AGE} LIMIT ?",
            (owner, *after, _PAGE),
        )
        if not rows:
            return None
        last = rows[-1]
        after = (last[3], last[7], last[0], last[1], last[2])
        for row in rows:
            if (row[0], row[1], row[2], row[3]) in spared:
                continue
            chosen.append(((row[0], row[1], row[2], row[3], row[4], row[5]), int(row[6])))
            freed += int(row[6])
            if freed >= need:
                break
    return chosen


def steps(chosen: Sequence[tuple[Key, int]], step_bytes: int) -> Iterable[list[Key]]:
    """``chosen`` in parts of about ``step_bytes`` each: one transaction each."""
    part: list[Key] = []
    held = 0
    for key, size in chosen:
        part.append(key)
        held += size
        if held >= step_bytes or len(part) == _CHUNK:
            yield part
            part, held = [], 0
    if part:
        yield part


async def evict(tx: Transaction, keys: Sequence[Key], owner: int) -> Freed:
    """Delete the counts ``choose`` chose and their variants, those still ``owner``'s and
    as they were (a request adding to one meanwhile was answered 202 for it)."""
    rows = await tx.fetch_all(
        f"DELETE FROM metrics WHERE ({_KEY}, yes, no) IN"
        f" (VALUES {', '.join(['(?, ?, ?, ?, ?, ?)'] * len(keys))})"
        f" AND owner = ? RETURNING {_KEY}, yes + no, {_ROW}",
        [*(value for key in keys for value in key), owner],
    )
    if not rows:
        return Freed(0, 0, 0)
    gone = [(row[0], row[1], row[2], row[3]) for row in rows]
    variants = await tx.fetch_all(
        f"DELETE FROM metric_variants WHERE ({_KEY}) IN"
        f" (VALUES {', '.join(['(?, ?, ?, ?)'] * len(gone))}) RETURNING count, {_VARIANT}",
        [value for key in gone for value in key],
    )
    evaluations = sum(int(row[4]) for row in rows) + sum(int(row[0]) for row in variants)
    freed = sum(int(row[5]) for row in rows) + sum(int(row[1]) for row in variants)
    return Freed(len(rows), evaluations, freed)


class Freed(NamedTuple):
    entries: int
    evaluations: int  # yes + no + variant counts
    bytes: int  # in ``count_size``'s units


async def _present(tx: Transaction, keys: Sequence[Key]) -> set[Key]:
    held: set[Key] = set()
    for chunk in _chunks(keys):
        rows = await tx.fetch_all(
            f"SELECT {_KEY} FROM metrics WHERE ({_KEY}) IN"
            f" (VALUES {', '.join(['(?, ?, ?, ?)'] * len(chunk))})",
            [value for key in chunk for value in key],
        )
        held.update((row[0], row[1], row[2], row[3]) for row in rows)
    return held


def _chunks(keys: Sequence[Key]) -> Iterable[Sequence[Key]]:
    return (keys[start : start + _CHUNK] for start in range(0, len(keys), _CHUNK))
