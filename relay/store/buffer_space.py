"""What the relay's buffer file holds, measured and bounded: every table counts (buffered
counts, registrations, impact metric series, outbox batches, dead letters, idempotency keys)
and the WAL.

Eviction removes the oldest data first, in transactions of at most ``EVICT_STEP`` rows
(ingest goes on between them), in two parts measured apart, so neither can push the other
out. Idempotency keys are bounded by their own pages (``key_bytes``), oldest first, those
written just now included: a caller flooding keys only ever evicts keys. The rest is bounded
by its pages without the keys', and never loses what was written after its eviction began.
What is not a count goes first, for anyone's growth (``evict``): dead letters (refused for
good already), then outbox batches that hold only registrations and impact samples, then
impact metric series by when they were last updated (their number is what SDKs' labels make
it), then registrations by when they were last seen (a key can make up instances without
end). Counts, and outbox batches holding counts, are never evicted here: each count is one
key's, and only that key's growth takes its room (``relay.store.own_room``). Pages grown past
the bound even so (deleted rows leave pages part empty) are held by refusing new counts that
cannot pay (``Room.DRY``) until the flusher delivers: no key's counts go for that. An outbox
batch being sent is never evicted.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Awaitable, Callable, Set
from dataclasses import dataclass, field
from functools import partial

from relay.store.impact import SERIES_BYTES
from relay.store.metrics import REGISTRATION_BYTES
from relay.store.own_room import ROW_BYTES
from relay.store.sql import Transaction
from relay.store.sqlite import SqliteDatabase

Step = Callable[[float, int, "Evicted"], Awaitable[tuple[int, int]]]
"""One eviction step: (before, row limit, tally) -> (bytes estimated, rows deleted)."""
TxStep = Callable[..., Awaitable[tuple[int, int]]]

# Rows per eviction transaction, each run whole on the writer thread (a few ms): small
# enough not to hold ingest up, large enough to outpace a flood of new keys.
EVICT_STEP = 20_000
FIRST_STEP = 1_000
MIN_STEP = 100

# Estimates of each row's data (without indexes), in the units MetricsStore estimates what
# it writes: they bound how much one eviction deletes.
_REGISTRATION = (
    "length(app_name) + length(instance_id) + length(connect_via) + length(strategies)"
    f" + {REGISTRATION_BYTES}"
)
_SERIES = (
    "length(series) + length(environment) + length(app_name) + length(name) + length(kind)"
    f" + length(labels) + length(help) + {SERIES_BYTES}"
)
_BATCH = f"length(body) + {REGISTRATION_BYTES}"
_DEAD = f"length(body) + length(reason) + {REGISTRATION_BYTES}"
_KEY = f"length(key) + coalesce(length(fingerprint), 0) + {ROW_BYTES}"
# The b-trees of the keys (a table without rowid, and its index by age): dbstat reads only
# these, which their own bound keeps to a part of the file.
_KEY_TREES = ("idempotency_keys", "idempotency_keys_seen_at")


@dataclass(frozen=True, slots=True)
class BufferStats:
    entries: int
    registrations: int
    outbox_batches: int
    outbox_entries: int
    dead_letter_entries: int
    bytes: int


@dataclass(slots=True)
class Evicted:
    entries: int = 0  # counts, registrations, and the entries of outbox batches
    evaluations: int = 0  # what those counts held: yes + no + variant counts
    keys: int = 0
    dead_letters: int = 0  # entries
    bytes: int = 0
    tables: set[str] = field(default_factory=set)


class BufferSpace:
    def __init__(self, db: SqliteDatabase, step_bytes: int | None = None) -> None:
        """``step_bytes``: about the most one eviction transaction deletes (its pages go
        through the WAL: a small buffer's WAL bound), at most ``EVICT_STEP`` rows."""
        self._db = db
        self._step_bytes = step_bytes

    def wal_bytes(self) -> int:
        try:
            return os.stat(f"{self._db.path}-wal").st_size
        except FileNotFoundError:
            return 0

    async def pages_bytes(self) -> int:
        """Bytes of the file's pages in use (not on the free list): what the data takes on
        disk, indexes and b-tree overhead included. Cheap to read, and it shrinks as
        deleted rows free pages."""
        row = await self._db.fetch_one(
            "SELECT (SELECT page_count FROM pragma_page_count())"
            " - (SELECT freelist_count FROM pragma_freelist_count()),"
            " (SELECT page_size FROM pragma_page_size())"
        )
        return int(row[0] * row[1]) if row is not None else 0

    async def footprint(self) -> int:
        """The pages in use plus the WAL."""
        return await self.pages_bytes() + self.wal_bytes()

    async def stats(self) -> BufferStats:
        row = await self._db.fetch_one(
            "SELECT (SELECT count(*) FROM metrics) AS entries,"
            " (SELECT count(*) FROM registrations) AS registrations,"
            " (SELECT count(*) FROM outbox) AS batches,"
            " (SELECT coalesce(sum(entries), 0) FROM outbox) AS outbox_entries,"
            " (SELECT coalesce(sum(entries), 0) FROM dead_letters) AS dead"
        )
        assert row is not None  # an aggregate query always returns one row
        return BufferStats(
            row["entries"],
            row["registrations"],
            row["batches"],
            row["outbox_entries"],
            row["dead"],
            await self.footprint(),
        )

    async def oldest_write(self) -> float | None:
        """When the oldest write not yet sent upstream was made: of the counts buffered
        (their first write) and of the outbox's batches of counts (the oldest of the counts
        each was claimed from). It reads every buffered row (an index on ``written`` would
        cost an entry per count, room the bound would lose): 19 ms for 300,000 counts
        against 3 ms for ``stats``, so it is read less often than those figures."""
        row = await self._db.fetch_one(
            "SELECT (SELECT min(coalesce(written, hour)) FROM metrics),"
            " (SELECT min(coalesce(oldest_write, created_at)) FROM outbox WHERE counts = 1)"
        )
        assert row is not None  # an aggregate query always returns one row
        return min((t for t in (row[0], row[1]) if t is not None), default=None)

    async def key_bytes(self) -> int:
        """Bytes of the pages the idempotency keys take, indexes and b-tree overhead
        included."""
        row = await self._db.fetch_one(
            "SELECT total(pgsize) FROM dbstat WHERE name IN (?, ?) AND aggregate = 1",
            _KEY_TREES,
        )
        return int(row[0]) if row is not None else 0

    async def rest_bytes(self) -> int:
        """Bytes of the pages in use that do not hold idempotency keys."""
        return await self.pages_bytes() - await self.key_bytes()

    async def evict(
        self, target: int, keys_target: int, before: float, sending: Set[int]
    ) -> Evicted:
        """Delete the oldest keys until their pages are down to ``keys_target`` bytes, and
        the oldest of the rest, in the order of the module's docstring, until its pages are
        down to ``target`` bytes. Counts, series and registrations written at ``before`` or
        later stay (outbox batches and dead letters hold older data), and so do the outbox
        batches whose ids are in ``sending`` when a step runs (the flusher's, read in the
        step's transaction: ``SqliteOutbox.sending``)."""
        evicted = Evicted()
        keys = (("idempotency_keys", self._in_writer(self._keys)),)
        await self._trim(keys, self.key_bytes, keys_target, before, evicted)
        rest: tuple[tuple[str, Step], ...] = (
            ("dead_letters", self._in_writer(self._dead_letters)),
            ("outbox", self._in_writer(partial(self._batches, sending=sending))),
            ("impact_metrics", self._in_writer(self._series)),
            ("registrations", self._in_writer(self._registrations)),
        )
        await self._trim(rest, self.rest_bytes, target, before, evicted)
        return evicted

    async def _trim(
        self,
        steps: tuple[tuple[str, Step], ...],
        measure: Callable[[], Awaitable[int]],
        target: int,
        before: float,
        evicted: Evicted,
    ) -> None:
        """Run ``steps`` in order until ``measure`` is down to ``target``.

        Steps are sized by what the previous step of the same table freed per row (the
        first takes ``FIRST_STEP`` rows; at most ``EVICT_STEP``, and about ``step_bytes``),
        so eviction stops close to
        the target rather than a step past it; and no more data is deleted than the pages
        were over, so pages that do not empty (rows deleted here and there) cannot make it
        delete everything."""
        held = await measure()
        budget, spent = held - target, 0
        for table, step in steps:
            per_row = 0  # page bytes one row frees, as last seen
            while held > target and spent < budget:
                limit = FIRST_STEP if not per_row else (held - target) // per_row + 1
                if per_row and self._step_bytes is not None:
                    limit = min(limit, max(MIN_STEP, self._step_bytes // per_row))
                removed, rows = await step(before, min(limit, EVICT_STEP), evicted)
                if not rows:
                    break
                now = await measure()
                # ingest may fill freed pages at once: then the data's own size is the guide
                per_row = max(held - now, removed) // rows
                held = now
                spent += removed
                evicted.bytes += removed
                evicted.tables.add(table)

    async def prune_dead_letters(self, max_age: float, max_bytes: int) -> int:
        """Dead letters older than ``max_age`` seconds, then the oldest while they hold more
        than ``max_bytes``; returns the entries pruned."""
        pruned = Evicted()
        async with self._db.transaction() as tx:
            rows = await tx.fetch_all(
                "DELETE FROM dead_letters WHERE created_at < ? RETURNING entries",
                (time.time() - max_age,),
            )
        pruned.dead_letters = sum(row[0] for row in rows)
        row = await self._db.fetch_one(f"SELECT count(*), total({_DEAD}) FROM dead_letters")
        count, held = (int(row[0]), int(row[1])) if row is not None else (0, 0)
        excess = held - max_bytes
        while excess > 0 and count:
            limit = min(EVICT_STEP, -(-excess * count // held))  # rows of the average size
            work = partial(self._dead_letters, before=0.0, limit=limit, into=pruned)
            removed, deleted = await self._db.run(work)
            if not deleted:
                break
            excess -= removed
        return pruned.dead_letters

    @staticmethod
    async def _dead_letters(
        tx: Transaction, before: float, limit: int, into: Evicted
    ) -> tuple[int, int]:
        rows = await tx.fetch_all(
            "DELETE FROM dead_letters WHERE id IN (SELECT id FROM dead_letters"
            f" ORDER BY id LIMIT ?) RETURNING entries, {_DEAD}",
            (limit,),
        )
        into.dead_letters += sum(row[0] for row in rows)
        return sum(int(row[1]) for row in rows), len(rows)

    @staticmethod
    async def _keys(tx: Transaction, before: float, limit: int, into: Evicted) -> tuple[int, int]:
        """The oldest, whenever seen: keys are bounded on their own (the module's
        docstring)."""
        rows = await tx.fetch_all(
            "DELETE FROM idempotency_keys WHERE key IN (SELECT key FROM idempotency_keys"
            f" ORDER BY seen_at LIMIT ?) RETURNING {_KEY}",
            (limit,),
        )
        into.keys += len(rows)
        return sum(int(row[0]) for row in rows), len(rows)

    @staticmethod
    async def _batches(
        tx: Transaction,
        before: float,
        limit: int,
        into: Evicted,
        sending: Set[int],
    ) -> tuple[int, int]:
        """Batches of up to 10,000 entries that hold no counts (registrations and impact
        samples only): ``limit`` counts entries, one batch at least. ``sending`` is read
        here, in the transaction (copying a set of ints holds the GIL throughout, so the
        event loop's changes to it are seen whole or not at all)."""
        rows = await tx.fetch_all(
            "DELETE FROM outbox WHERE id IN (SELECT id FROM outbox WHERE counts = 0"
            " AND id NOT IN (SELECT value FROM json_each(?)) ORDER BY id"
            f" LIMIT max(1, ? / 1000)) RETURNING entries, {_BATCH}, body",
            (json.dumps(sorted(sending)), limit),
        )
        into.entries += sum(row[0] for row in rows)
        into.evaluations += sum(_evaluations(row[2]) for row in rows)
        return sum(int(row[1]) for row in rows), sum(int(row[0]) for row in rows)

    def _in_writer(self, step: TxStep) -> Step:
        async def run(before: float, limit: int, into: Evicted) -> tuple[int, int]:
            return await self._db.run(partial(step, before=before, limit=limit, into=into))

        return run

    @staticmethod
    async def _series(tx: Transaction, before: float, limit: int, into: Evicted) -> tuple[int, int]:
        rows = await tx.fetch_all(
            "DELETE FROM impact_metrics WHERE series IN (SELECT series FROM impact_metrics"
            f" WHERE updated_at < ? ORDER BY updated_at LIMIT ?) RETURNING {_SERIES}",
            (before, limit),
        )
        into.entries += len(rows)
        return sum(int(row[0]) for row in rows), len(rows)

    @staticmethod
    async def _registrations(
        tx: Transaction, before: float, limit: int, into: Evicted
    ) -> tuple[int, int]:
        rows = await tx.fetch_all(
            "DELETE FROM registrations WHERE (app_name, environment, instance_id) IN"
            " (SELECT app_name, environment, instance_id FROM registrations"
            f" WHERE last_seen < ? ORDER BY last_seen LIMIT ?) RETURNING {_REGISTRATION}",
            (before, limit),
        )
        into.entries += len(rows)
        return sum(int(row[0]) for row in rows), len(rows)


def _evaluations(body: bytes) -> int:
    """Evaluations a batch's bulk body carries (yes + no + variant counts); 0 for one that
    does not read as such (a batch is our own writing, so only damage can make it so)."""
    try:
        metrics = json.loads(body).get("metrics", [])
        return sum(
            m.get("yes", 0) + m.get("no", 0) + sum((m.get("variants") or {}).values())
            for m in metrics
        )
    except (ValueError, TypeError, AttributeError):
        return 0
