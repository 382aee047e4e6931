"""The relay's outbox: buffered counts cut into upstream batches, and batches' fates.

Counts move from the buffer tables (``metrics``, ``metric_variants``, ``registrations``,
``impact_metrics``) into outbox rows in one transaction, under the same write lock as
ingest, so a count is always in exactly one place: the buffer (where new counts for its key
are added to it) or one outbox batch (whose body is fixed). Each batch says whether it
holds counts: eviction takes those holding only registrations and impact samples first
(``relay.store.buffer_space``). A batch leaves the outbox only when the upstream has taken it
(``ack``) or refused it for good (``dead_letter``), or when eviction deletes it to bound the
buffer, which it never does while the batch is being sent (``sending``): a batch is counted
either delivered or evicted, never both.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator, Collection, Iterable, Iterator, Set
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Protocol

from relay.core.impact import ImpactState
from relay.core.ingest_batch import from_epoch
from relay.store import batching
from relay.store.batching import Entry
from relay.store.sql import Row, Transaction
from relay.store.sqlite import SqliteDatabase

# Work units of whoever drains an outbox (the flusher, the leader's shard merge): counts cut
# into batches per claim transaction, which bounds its memory and lock time, and batches
# read per page.
CLAIM_ENTRIES = 20_000
MIN_CLAIM = 100
PENDING_PAGE = 32


@dataclass(frozen=True, slots=True)
class OutboxBatch:
    id: int
    environment: str
    idempotency_key: str
    body: bytes
    entries: int
    attempts: int = 0


def claim_entries(wal_bytes: int) -> int:
    """Entries one claim moves: ``CLAIM_ENTRIES``, fewer for a small buffer, whose WAL bound
    one claim's transaction (it deletes the counts and writes their batches) must not pass
    far (about 64 bytes of WAL an entry)."""
    return max(MIN_CLAIM, min(CLAIM_ENTRIES, wal_bytes // 64))


class Outbox(Protocol):
    """The verbs the flusher sends batches with (``relay.edge.metrics.flusher``)."""

    def sending(self, batch: OutboxBatch) -> AbstractAsyncContextManager[bool]: ...

    async def claim(self, environments: Collection[str], max_entries: int) -> bool: ...

    async def pending(self, environments: Collection[str], limit: int) -> list[OutboxBatch]: ...

    async def ack(self, batch: OutboxBatch) -> None: ...

    async def record_failure(self, batch: OutboxBatch, error: str) -> None: ...

    async def split(self, batch: OutboxBatch) -> bool: ...

    async def dead_letter(self, batch: OutboxBatch, status: int | None, reason: str) -> None: ...

    async def environments(self) -> set[str]: ...


class SqliteOutbox:
    def __init__(self, db: SqliteDatabase, max_batch_bytes: int) -> None:
        self._db = db
        self._max_batch_bytes = max_batch_bytes
        self._in_flight: set[int] = set()

    @property
    def in_flight(self) -> Set[int]:
        """Ids of the batches being sent, live: what eviction leaves alone."""
        return self._in_flight

    @asynccontextmanager
    async def sending(self, batch: OutboxBatch) -> AsyncIterator[bool]:
        """Hold ``batch`` in flight while it is sent and its fate recorded; yields whether
        it is still there to send. It is marked first, then looked for in a write
        transaction: an eviction step (which reads ``in_flight`` in its own) either
        deleted it before, and it is not sent, or sees the mark and leaves it."""
        self._in_flight.add(batch.id)
        try:
            async with self._db.transaction() as tx:
                rows = await tx.fetch_all("SELECT 1 FROM outbox WHERE id = ?", (batch.id,))
            yield bool(rows)
        finally:
            self._in_flight.discard(batch.id)

    async def claim(self, environments: Collection[str], max_entries: int) -> bool:
        """Move up to ``max_entries`` buffered entries (oldest hours first) per environment,
        registrations included, into new batches. True when an environment had more: a
        backlog is left in the buffer."""
        backlog = False
        async with self._db.transaction() as tx:
            for environment in sorted(environments):
                left = await self._claim_environment(tx, environment, max_entries)
                backlog = backlog or left
        return backlog

    async def _claim_environment(self, tx: Transaction, environment: str, budget: int) -> bool:
        """Returns whether anything was left for a later claim. A key whose sum needs more
        entries than the budget leaves with part of its counts; the rest stays buffered."""
        registrations = await tx.fetch_all(
            "SELECT app_name, instance_id, connect_via, sdk_version, strategies, interval,"
            " started, first_seen FROM registrations WHERE environment = ?"
            " ORDER BY app_name, instance_id LIMIT ?",
            (environment, budget),
        )
        rows = await tx.fetch_all(
            "SELECT m.feature_name, m.app_name, m.hour, m.yes, m.no, m.written,"
            " (SELECT json_group_object(v.variant, v.count) FROM metric_variants v"
            "  WHERE v.feature_name = m.feature_name AND v.app_name = m.app_name"
            "  AND v.environment = m.environment AND v.hour = m.hour) AS variants"
            " FROM metrics m WHERE m.environment = ?"
            " ORDER BY m.hour, m.app_name, m.feature_name LIMIT ?",
            (environment, max(0, budget - len(registrations))),
        )
        series = await tx.fetch_all(
            "SELECT series, name, kind, labels, help, state FROM impact_metrics"
            " WHERE environment = ? ORDER BY updated_at, series LIMIT ?",
            (environment, max(0, budget - len(registrations) - len(rows))),
        )
        if not rows and not registrations and not series:
            return False
        left = len(registrations) + len(rows) + len(series) >= budget
        metrics: list[Entry] = []
        claimed: list[tuple[str, str, str, int]] = []
        written: list[float] = []  # when each claimed count was first written
        rest: batching.Piece = _NOTHING
        for row in rows:
            room = budget - len(registrations) - len(metrics)
            if room <= 0:  # keys split into several entries have used the budget up
                left = True
                break
            key = (row["feature_name"], row["app_name"], environment, row["hour"])
            variants = json.loads(row["variants"]) if row["variants"] else {}
            parts, rest = batching.pieces(row["yes"], row["no"], variants, room)
            metrics += [_metric(key, piece) for piece in parts]
            claimed.append(key)
            written.append(row["hour"] if row["written"] is None else row["written"])
            if rest != _NOTHING:
                left = True
                break
        for table in ("metrics", "metric_variants"):
            await tx.executemany(
                f"DELETE FROM {table} WHERE feature_name = ? AND app_name = ?"
                " AND environment = ? AND hour = ?",
                claimed,
            )
        if rest != _NOTHING:
            await _leave(tx, claimed[-1], rest, written[-1])
        await tx.executemany(
            "DELETE FROM impact_metrics WHERE series = ?", [(row["series"],) for row in series]
        )
        applications = [_application(environment, row) for row in registrations]
        impact = [_impact(row) for row in series]
        now = time.time()
        oldest = min(written, default=None)  # of the claim: each of its batches says so
        bodies = batching.cut(applications, metrics, self._max_batch_bytes, impact)
        await tx.executemany(
            "INSERT INTO outbox (environment, idempotency_key, body, entries, created_at,"
            " counts, oldest_write) VALUES (?, ?, ?, ?, ?, ?, ?)",
            [
                (environment, str(uuid.uuid4()), payload, entries, now, counts, oldest)
                for payload, entries, counts in _marked(bodies, len(applications), len(metrics))
            ],
        )
        await tx.executemany(
            "DELETE FROM registrations WHERE environment = ? AND app_name = ? AND instance_id = ?",
            [(environment, row["app_name"], row["instance_id"]) for row in registrations],
        )
        return left

    async def pending(self, environments: Collection[str], limit: int) -> list[OutboxBatch]:
        """Batches waiting, those tried fewest times first (one that keeps failing waits
        behind the others)."""
        if not environments:
            return []
        marks = ",".join("?" * len(environments))
        rows = await self._db.fetch_all(
            "SELECT id, environment, idempotency_key, body, entries, attempts FROM outbox"
            f" WHERE environment IN ({marks}) ORDER BY attempts, id LIMIT ?",
            (*environments, limit),
        )
        return [
            OutboxBatch(
                r["id"],
                r["environment"],
                r["idempotency_key"],
                r["body"],
                r["entries"],
                r["attempts"],
            )
            for r in rows
        ]

    async def ack(self, batch: OutboxBatch) -> None:
        async with self._db.transaction() as tx:
            await tx.execute("DELETE FROM outbox WHERE id = ?", (batch.id,))

    async def record_failure(self, batch: OutboxBatch, error: str) -> None:
        async with self._db.transaction() as tx:
            await tx.execute(
                "UPDATE outbox SET attempts = attempts + 1, last_error = ? WHERE id = ?",
                (error[:500], batch.id),
            )

    async def split(self, batch: OutboxBatch) -> bool:
        """Replace a batch by its two halves (new keys: the upstream applied none of it);
        False when it holds a single entry and cannot be split."""
        parts = batching.halves(batch.body)
        if parts is None:
            return False
        now = time.time()
        async with self._db.transaction() as tx:
            found = await tx.fetch_all(
                "SELECT counts, oldest_write FROM outbox WHERE id = ?", (batch.id,)
            )
            if not found:  # evicted meanwhile
                return True
            await tx.execute("DELETE FROM outbox WHERE id = ?", (batch.id,))
            await tx.executemany(
                "INSERT INTO outbox (environment, idempotency_key, body, entries, created_at,"
                " counts, oldest_write) VALUES (?, ?, ?, ?, ?, ?, ?)",
                [
                    (batch.environment, str(uuid.uuid4()), body, n, now, found[0][0], found[0][1])
                    for body, n in parts
                ],
            )
        return True

    async def dead_letter(self, batch: OutboxBatch, status: int | None, reason: str) -> None:
        async with self._db.transaction() as tx:
            await tx.execute("DELETE FROM outbox WHERE id = ?", (batch.id,))
            await tx.execute(
                "INSERT INTO dead_letters (environment, idempotency_key, body, entries, status,"
                " reason, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    batch.environment,
                    batch.idempotency_key,
                    batch.body,
                    batch.entries,
                    status,
                    reason[:1000],
                    time.time(),
                ),
            )

    async def empty(self) -> bool:
        """Nothing left to send or to look at (a dead letter keeps the file for an operator)."""
        tables = ("metrics", "registrations", "impact_metrics", "outbox", "dead_letters")
        counts = " + ".join(f"(SELECT count(*) FROM {t})" for t in tables)
        row = await self._db.fetch_one("SELECT " + counts)
        return row is not None and row[0] == 0

    async def environments(self) -> set[str]:
        """Environments with anything buffered or waiting."""
        # the recursive walk reads one index entry per environment, not every buffered row
        rows = await self._db.fetch_all(
            "WITH RECURSIVE envs(e) AS (SELECT min(environment) FROM metrics UNION ALL"
            " SELECT (SELECT min(environment) FROM metrics WHERE environment > e)"
            " FROM envs WHERE e IS NOT NULL)"
            " SELECT e FROM envs WHERE e IS NOT NULL"
            " UNION SELECT environment FROM registrations UNION SELECT environment FROM outbox"
            " UNION SELECT environment FROM impact_metrics"
        )
        return {row[0] for row in rows}


_NOTHING: batching.Piece = (0, 0, {})


def _marked(
    bodies: Iterable[tuple[bytes, int]], applications: int, metrics: int
) -> Iterator[tuple[bytes, int, int]]:
    """Each body with 1 if it holds counts, else 0. ``batching.cut`` takes registrations,
    then counts, then impact samples, in order: a body holds counts when the entries it took
    overlap the counts' (after the ``applications``, ``metrics`` of them). Only a body at
    the border of registrations and counts holds both."""
    start = 0
    for payload, entries in bodies:
        end = start + entries
        yield payload, entries, int(start < applications + metrics and end > applications)
        start = end


async def _leave(
    tx: Transaction, key: tuple[str, str, str, int], rest: batching.Piece, written: float
) -> None:
    """Put back what is left of a key claimed in part (its rows were just deleted), with
    when it was first written."""
    yes, no, variants = rest
    await tx.execute(
        "INSERT INTO metrics (feature_name, app_name, environment, hour, yes, no, written)"
        " VALUES (?, ?, ?, ?, ?, ?, ?)",
        (*key, yes, no, written),
    )
    await tx.executemany(
        "INSERT INTO metric_variants (feature_name, app_name, environment, hour, variant, count)"
        " VALUES (?, ?, ?, ?, ?, ?)",
        [(*key, name, count) for name, count in variants.items()],
    )


def _metric(key: tuple[str, str, str, int], piece: batching.Piece) -> Entry:
    feature, app, environment, hour = key
    yes, no, variants = piece
    return {
        "featureName": feature,
        "appName": app,
        "environment": environment,
        "timestamp": from_epoch(hour).isoformat().replace("+00:00", "Z"),
        "yes": yes,
        "no": no,
        "variants": variants,
    }


def _impact(row: Row) -> Entry:
    """A buffered series as a metric of one sample (``batching.body`` groups them)."""
    state = ImpactState.loads(row["help"], row["state"])
    entry: Entry = {
        "name": row["name"],
        "help": row["help"],
        "type": row["kind"],
        "samples": [state.sample(row["kind"], json.loads(row["labels"]))],
    }
    if row["kind"] == "histogram":
        entry["buckets"] = [le for le, _ in state.buckets if le != float("inf")]
    return entry


def _application(environment: str, row: Row) -> Entry:
    entry: Entry = {
        "appName": row["app_name"],
        "environment": environment,
        "instanceId": row["instance_id"],
        "connectVia": [{"appName": a, "instanceId": i} for a, i in json.loads(row["connect_via"])],
        "strategies": json.loads(row["strategies"]),
        "interval": row["interval"] if row["interval"] is not None else 0,
        "started": from_epoch(row["started"] or row["first_seen"]).isoformat(),
    }
    if row["sdk_version"] is not None:
        entry["sdkVersion"] = row["sdk_version"]
    return entry
