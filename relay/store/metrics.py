"""Ingested counts, registrations and impact metrics, written by group commit: the central
service's records (SQLite or PostgreSQL) and the relay's hour-window buffer (same tables, same
code). What the central service reads of them is ``relay.central.usage`` and
``relay.central.impact``.

Each ``write`` is one request's aggregated batch. Requests that arrive together share one
transaction: their batches are summed in memory first, so a hot key costs one upsert per
commit rather than one per request. Idempotency keys are claimed in that transaction
(``relay.store.idempotency``).

The central service (``logged``) appends each group's merged batch to the ingest log
(``relay.store.ingest_log``) instead, and ``relay.store.fold`` sums the log into the tables
with the same writes as here: instances on one PostgreSQL then never wait on each other's
row locks to answer. Every multi-row write touches its rows in sorted key order: two
transactions that lock shared rows lock them in the same order and cannot deadlock.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from relay.core.ingest_batch import NOBODY, IdempotencyKey, IngestBatch, MetricKey, epoch
from relay.store import idempotency, impact, ingest_log, own_room
from relay.store.groupcommit import GroupCommitter
from relay.store.own_room import ROW_BYTES, count_size
from relay.store.sql import Database, Transaction, upsert


class IngestItem(NamedTuple):
    batch: IngestBatch
    idempotency_key: IdempotencyKey | None


class MetricsStore:
    def __init__(
        self,
        db: Database,
        max_group: int,
        idempotency_ttl: float,
        clock: Callable[[], float] = time.time,
        *,
        touched: bool = False,
        arrived: bool = False,
        instances_kept: int | None = None,
        logged: bool = False,
        linger: float = 0.0,
        group_bytes: int | None = None,
    ) -> None:
        """``clock`` is the time idempotency keys are seen and expire by (tests move it).
        ``touched``: keep when each count was written (the relay's buffer, whose eviction
        keeps the newest; a trigger of the buffer's schema refreshes it on updates), and
        when first (``written``: the age of the oldest unsent write).
        ``arrived``: keep when each count last arrived, refreshed by every write (the
        central service's, whose page says when a flag's counts last arrived).
        ``group_bytes``: a group of requests stops growing at about that many bytes (a
        relay's buffer counts what a request writes before it writes it:
        ``relay.edge.metrics.admitted.Admitted``). ``instances_kept``: the instances each
        (application, environment) keeps, the least recently seen replaced (the central
        service's ``INSTANCES_KEPT``; a relay passes every registration on, its buffer
        bounded by bytes). ``logged``: each group appended to the ingest log, for the fold to
        write (the central service); else written into the tables at once. ``linger``:
        ``GroupCommitter``'s."""
        self._db = db
        self._ttl = idempotency_ttl
        self._clock = clock
        self._stamp = "touched" if touched else "arrived" if arrived else ""
        self._kept = instances_kept
        self._logged = logged
        self._payments = own_room.Payments(db, group_bytes or own_room.STEP_BYTES)
        self._committer: GroupCommitter[Transaction, IngestItem, bool] = GroupCommitter(
            db.run, self._plan, max_group, linger, _item_size, group_bytes
        )

    def start(self) -> None:
        self._committer.start()

    async def stop(self) -> None:
        await self._committer.stop()

    async def write(self, batch: IngestBatch, idempotency_key: IdempotencyKey | None) -> bool:
        """Durably add a batch; False when the idempotency key marks it as a replay.
        Raises ``KeyReused`` for a key its caller used for a different request."""
        if batch.is_empty() and idempotency_key is None:
            return True
        return await self._committer.submit(IngestItem(batch, idempotency_key))

    async def make_room(self, batch: IngestBatch) -> None:
        """Room for ``batch``'s new counts in a relay's full buffer, paid by its own key
        (``relay.store.own_room.Payments``), or ``Unpaid``."""
        await self._payments.make_room(batch)

    def _plan(
        self, items: Sequence[IngestItem]
    ) -> Callable[[Transaction], Awaitable[list[idempotency.Outcome]]]:
        """Merge the group and build its rows now, on the event loop, assuming its idempotency
        keys are all fresh, as they nearly always are; the transaction only claims the keys
        and writes, and merges again should a claim find a key taken."""
        keys = [i.idempotency_key for i in items if i.idempotency_key is not None]
        now = time.time()
        plan_of = _Logged.of if self._logged else _Planned.of
        planned = plan_of(items, {}, self._stamp, now)

        async def work(tx: Transaction) -> list[idempotency.Outcome]:
            now = self._clock()
            taken = await idempotency.claim(tx, keys, now, now - self._ttl)
            plan = plan_of(items, taken, self._stamp, now) if taken else planned
            await plan.write(tx, self._kept)
            return plan.outcomes

        return work

    async def prune_idempotency(self) -> int:
        async with self._db.transaction() as tx:
            return await idempotency.prune(tx, self._clock() - self._ttl)

    async def prune_registrations(self) -> int:
        """Forget instances not seen for ``INSTANCE_MAX_AGE`` (along ``registrations_seen``);
        the instances deleted. The bound per application is kept by writes alone: a pass
        over every registration here held the writer for seconds with a million of them.
        Rows written before the bound existed go with their age."""
        async with self._db.transaction() as tx:
            old = self._clock() - INSTANCE_MAX_AGE
            if self._stamp == "arrived":
                await tx.execute("DELETE FROM application_counts WHERE arrived < ?", (old,))
            return await tx.execute("DELETE FROM registrations WHERE last_seen < ?", (old,))


def _item_size(item: IngestItem) -> int:
    return written_size(item.batch, item.idempotency_key)


def written_size(batch: IngestBatch, idempotency_key: IdempotencyKey | None) -> int:
    """An estimate of what a request writes, in the units ``relay.store.buffer_space``
    estimates data: what bounds a group (``group_bytes``), and what a relay's buffer counts
    before it writes."""
    counts = sum(count_size(k, c) for k, c in batch.counts.items())
    key = 0 if idempotency_key is None else _key_size(idempotency_key)
    series = sum(sum(map(len, k)) + impact.SERIES_BYTES for k in batch.impact)
    return counts + len(batch.registrations) * REGISTRATION_BYTES + series + key


def _key_size(key: IdempotencyKey) -> int:
    """An estimate of the bytes a claimed key writes, as ``relay.store.buffer_space`` does."""
    return len(key.scoped) + len(key.fingerprint) + ROW_BYTES


def merge_group(
    items: Sequence[IngestItem], taken: dict[str, str | None]
) -> tuple[IngestBatch, list[idempotency.Outcome]]:
    """Sum the batches of a group's requests that apply, given the idempotency keys already
    ``taken``. Pure, so both backends and the tests share it."""
    outcomes = idempotency.outcomes([item.idempotency_key for item in items], taken)
    merged = IngestBatch()
    for item, outcome in zip(items, outcomes, strict=True):
        if outcome is True:
            merged.merge(item.batch)
    return merged, outcomes


def owners(items: Sequence[IngestItem], outcomes: Sequence[object]) -> dict[MetricKey, int]:
    """Whose each count of a group is: its key's, or ``NOBODY``'s when keys share it."""
    found: dict[MetricKey, int] = {}
    for item, outcome in zip(items, outcomes, strict=True):
        if outcome is not True:
            continue
        owner = item.batch.origin.owner
        for key in item.batch.counts:
            if found.setdefault(key, owner) != owner:
                found[key] = NOBODY
    return found


class _Planned(NamedTuple):
    """A group's rows, each table's in sorted key order, and which of its items apply."""

    metrics: list[tuple[Any, ...]]
    variants: list[tuple[Any, ...]]
    registrations: list[tuple[Any, ...]]
    impact: list[impact.SeriesRow]
    outcomes: list[idempotency.Outcome]
    stamp: str
    """The column stamped with the time of the write ("touched", "arrived"), if any."""
    seen: list[tuple[Any, ...]]
    applications: list[tuple[Any, ...]]
    """(application, environment, now) of the counts, when their arrival is kept."""

    @classmethod
    def of(
        cls, items: Sequence[IngestItem], taken: dict[str, str | None], stamp: str, now: float
    ) -> _Planned:
        batch, outcomes = merge_group(items, taken)
        owned = owners(items, outcomes) if stamp == "touched" else {}
        return cls.of_batch(batch, outcomes, stamp, lambda _: now, owned)

    @classmethod
    def of_batch(
        cls,
        batch: IngestBatch,
        outcomes: list[idempotency.Outcome],
        stamp: str,
        arrived: Callable[[MetricKey], float],
        owned: Mapping[MetricKey, int] | None = None,
    ) -> _Planned:
        """``arrived``: when each count arrived, the time stamped; ``owned``: whose each
        count is (the relay's buffer, ``stamp`` "touched")."""
        owner = (owned or {}).get
        counts = sorted(
            ((k.feature_name, k.app_name, k.environment, k.hour), c, arrived(k), owner(k, NOBODY))
            for k, c in batch.counts.items()
        )
        variants = sorted(
            (*key, name, count) for key, c, _, _ in counts for name, count in c.variants.items()
        )
        registrations = list(_registration_rows(batch))
        applications: dict[tuple[str, str], float] = {}
        if stamp == "arrived":
            for (_, app_name, environment, _), _, at, _ in counts:
                applications[app_name, environment] = max(
                    at, applications.get((app_name, environment), at)
                )
        return cls(
            metrics=[(*key, c.yes, c.no, *_when(stamp, at, o)) for key, c, at, o in counts],
            variants=variants,
            registrations=registrations,
            impact=impact.rows(batch.impact),
            outcomes=outcomes,
            stamp=stamp,
            # instances heard from by their own metrics posts (never a bulk body's): the
            # central service's page reads it, and a relay's buffer evicts registrations
            # by it while they wait for the upstream
            seen=[(epoch(at), *key, epoch(at)) for key, at in sorted(batch.seen.items())],
            applications=sorted((*app, at) for app, at in applications.items()),
        )

    async def write(self, tx: Transaction, instances_kept: int | None) -> None:
        """Add the counts, store the registrations, fold the impact metrics."""
        # the relay's buffer: last written (eviction), first written (the oldest unsent),
        # and whose (``relay.store.own_room``: nobody's once two keys add to it)
        stamp = {"": "", "arrived": ", arrived", "touched": ", touched, written, owner"}[self.stamp]
        arrived = {
            "": "",
            "arrived": ", arrived = excluded.arrived",
            "touched": ", owner = CASE WHEN metrics.owner = excluded.owner THEN metrics.owner"
            f" ELSE {NOBODY} END",
        }[self.stamp]
        await upsert(
            tx,
            f"INSERT INTO metrics (feature_name, app_name, environment, hour, yes, no{stamp})",
            "ON CONFLICT (feature_name, app_name, environment, hour) DO UPDATE SET"
            f" yes = {_sum('metrics.yes', 'excluded.yes')},"
            f" no = {_sum('metrics.no', 'excluded.no')}{arrived}",
            self.metrics,
        )
        await upsert(
            tx,
            "INSERT INTO metric_variants"
            " (feature_name, app_name, environment, hour, variant, count)",
            "ON CONFLICT (feature_name, app_name, environment, hour, variant) DO UPDATE"
            f" SET count = {_sum('metric_variants.count', 'excluded.count')}",
            self.variants,
        )
        await upsert(
            tx,
            "INSERT INTO registrations (app_name, environment, instance_id, connect_via,"
            ' sdk_version, strategies, "interval", started, first_seen, last_seen)',
            "ON CONFLICT (app_name, environment, instance_id) DO UPDATE SET"
            " connect_via = excluded.connect_via, sdk_version = excluded.sdk_version,"
            ' strategies = excluded.strategies, "interval" = excluded."interval",'
            " started = coalesce(excluded.started, registrations.started),"
            " last_seen = excluded.last_seen",
            self.registrations,
        )
        await upsert(
            tx,
            "INSERT INTO application_counts (app_name, environment, arrived)",
            "ON CONFLICT (app_name, environment) DO UPDATE SET arrived = excluded.arrived",
            self.applications,
        )
        for row in self.seen:  # few: one per instance posting metrics in this group
            await tx.execute(
                "UPDATE registrations SET last_seen = ? WHERE app_name = ?"
                " AND environment = ? AND instance_id = ? AND last_seen < ?",
                row,
            )
        if instances_kept is not None:
            await _bound_registrations(tx, self.registrations, instances_kept)
        await impact.write(tx, self.impact, time.time())


def _when(stamp: str, at: float, owner: int) -> tuple[float, ...]:
    """The values of the stamped columns of a count written at ``at`` (per count: no dict),
    ``owner``'s in the relay's buffer."""
    return () if not stamp else (at,) if stamp == "arrived" else (at, at, owner)


class _Logged(NamedTuple):
    """A group's batch as one row of the ingest log, and which of its items apply."""

    text: str
    arrived: float
    outcomes: list[idempotency.Outcome]

    @classmethod
    def of(
        cls, items: Sequence[IngestItem], taken: dict[str, str | None], stamp: str, now: float
    ) -> _Logged:
        batch, outcomes = merge_group(items, taken)
        return cls("" if batch.is_empty() else ingest_log.encode(batch), now, outcomes)

    @property
    def size(self) -> int:
        return len(self.text)

    async def write(self, tx: Transaction, instances_kept: int | None) -> None:
        if self.text:  # nothing but replays
            await ingest_log.append(tx, self.text, self.arrived)


async def write_folded(
    tx: Transaction,
    batch: IngestBatch,
    arrived: Mapping[MetricKey, float],
    instances_kept: int | None,
) -> None:
    """The fold's write of batches summed from the ingest log: the central service's
    tables, as its group commits wrote them before the log, each count stamped with when
    it ``arrived``."""
    await _Planned.of_batch(batch, [], "arrived", arrived.__getitem__).write(tx, instances_kept)


INSTANCES_KEPT = 1_000
"""Instances kept per (application, environment): a new one replaces the least recently
seen, so one key registering without end costs a bounded table, and what is kept is what
is running now. By environment, so a key cannot push out another environment's."""
INSTANCE_MAX_AGE = 7 * 24 * 3600.0
"""Seconds after which an instance not seen is forgotten (by the leader's hourly prune).
Unleash forgets after one day; here as there an instance is seen again by its metrics posts
(``IngestBatch.seen``), but counts through a relay arrive in bulk, naming no instance: those
instances are refreshed by their registrations only, and SDKs register when they start;
their application is seen by its counts (``application_counts``, forgotten as they are)."""
_RECENT = "last_seen DESC, instance_id DESC"  # the order of the (app, env, last_seen) index


async def _bound_registrations(tx: Transaction, rows: Sequence[tuple[Any, ...]], kept: int) -> None:
    """Each (application, environment) written keeps its ``kept`` most recently seen. Kept
    on every write, so at most as many rows as were written go past it: the delete reads
    along the index, its cost that of the write."""
    written = Counter((row[0], row[1]) for row in rows)
    for (app_name, environment), count in sorted(written.items()):
        await tx.execute(
            "DELETE FROM registrations WHERE app_name = ? AND environment = ? AND instance_id IN"
            " (SELECT instance_id FROM registrations WHERE app_name = ? AND environment = ?"
            f" ORDER BY {_RECENT} LIMIT ? OFFSET ?)",
            (app_name, environment, app_name, environment, count, kept),
        )


MAX_TOTAL = 2**63 - 1
REGISTRATION_BYTES = 64
"""A registration's estimated bytes (``ROW_BYTES``'s units)."""


def _sum(stored: str, added: str) -> str:
    """``stored + added``, staying at ``MAX_TOTAL`` rather than overflowing: PostgreSQL
    refuses a BIGINT overflow and SQLite turns the sum into a float. That total is 2^32
    times the largest count one entry may carry."""
    return (
        f"CASE WHEN {added} > {MAX_TOTAL} - {stored} THEN {MAX_TOTAL} ELSE {stored} + {added} END"
    )


def _registration_rows(batch: IngestBatch) -> Iterable[tuple[Any, ...]]:
    for key in sorted(batch.registrations):
        r = batch.registrations[key]
        yield (
            r.key.app_name,
            r.key.environment,
            r.key.instance_id,
            json.dumps([list(hop) for hop in r.connect_via]),
            r.sdk_version,
            json.dumps(list(r.strategies)),
            None if r.interval is None else float(r.interval),
            epoch(r.started) if r.started else None,
            epoch(r.seen_at),
            epoch(r.seen_at),
        )
