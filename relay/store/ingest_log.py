"""The ingest log of the central service: a group commit's batch as one appended row.

A group commit of the central service claims its idempotency keys and appends its merged
batch (counts, registrations, instances seen, impact metrics) to ``ingest_log`` as one JSON
row, in one transaction: the 202 is as durable as before, and the transaction touches no row
another transaction touches (a fresh row, fresh idempotency keys). Instances on one
PostgreSQL that receive the same flags and applications then no longer wait on each other's
row locks, held through each commit's WAL flush. ``relay.store.fold`` sums the
log into the tables the reads use.

The encoding keeps what ``IngestBatch.merge`` needs and nothing of the wire: short keys,
names as lists, times as epoch seconds (as the tables keep them).
"""

from __future__ import annotations

import json
from typing import Any

from relay.core.impact import ImpactKey, ImpactState
from relay.core.ingest_batch import (
    Counts,
    Hop,
    IngestBatch,
    MetricKey,
    Registration,
    RegistrationKey,
    epoch,
    from_epoch,
)
from relay.store.sql import Transaction


def encode(batch: IngestBatch) -> str:
    data: dict[str, list[Any]] = {}
    if batch.counts:
        data["c"] = [
            [*key, counts.yes, counts.no, counts.variants] for key, counts in batch.counts.items()
        ]
    if batch.registrations:
        data["r"] = [
            [
                *r.key,
                [list(hop) for hop in r.connect_via],
                r.sdk_version,
                list(r.strategies),
                r.interval,
                None if r.started is None else epoch(r.started),
                epoch(r.seen_at),
            ]
            for r in batch.registrations.values()
        ]
    if batch.seen:
        data["s"] = [[*key, epoch(at)] for key, at in batch.seen.items()]
    if batch.impact:
        data["i"] = [[*key, state.help, state.dumps()] for key, state in batch.impact.items()]
    return json.dumps(data, separators=(",", ":"))


def decode(text: str) -> IngestBatch:
    """Raises ``ValueError`` for a row this version cannot read."""
    summed = Summed()
    summed.add(text, 0.0)
    return summed.result()[0]


_PARTS = {"c", "r", "s", "i"}  # counts, registrations, instances seen, impact series


class Summed:
    """Log rows summed in the order added, as ``IngestBatch.merge`` sums batches, with when
    each count last arrived. Counts, the bulk of a row, are summed as the lists they decode
    to, a domain value made per key only at the end: what the fold spends most on."""

    def __init__(self) -> None:
        self._counts: dict[tuple[str, str, str, int], list[Any]] = {}
        self._rest = IngestBatch()

    def add(self, text: str, arrived: float) -> None:
        """Raises ``ValueError`` for a row this version cannot read."""
        try:
            data = json.loads(text)
            if data.keys() - _PARTS:  # a later version's: set aside, never half folded
                raise ValueError(f"unknown parts {sorted(data.keys() - _PARTS)}")
            self._add_counts(data.get("c", ()), arrived)
            if data.keys() - {"c"}:
                self._rest.merge(_rest(data))
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise ValueError(f"unreadable ingest log row: {type(exc).__name__}: {exc}") from exc

    def _add_counts(self, rows: list[list[Any]], arrived: float) -> None:
        counts = self._counts
        for app, environment, feature, hour, yes, no, variants in rows:
            key = (app, environment, feature, hour)
            found = counts.get(key)
            if found is None:
                counts[key] = [yes, no, dict(variants), arrived]
                continue
            found[0] += yes
            found[1] += no
            into = found[2]
            for name, count in variants.items():
                into[name] = into.get(name, 0) + count
            if arrived > found[3]:
                found[3] = arrived

    def result(self) -> tuple[IngestBatch, dict[MetricKey, float]]:
        """The sums, and when each count last arrived."""
        batch, arrived = self._rest, {}
        for (app, environment, feature, hour), (yes, no, variants, at) in self._counts.items():
            key = MetricKey(app, environment, feature, hour)
            batch.counts[key] = Counts(yes, no, variants)
            arrived[key] = at
        return batch, arrived


def _rest(data: dict[str, Any]) -> IngestBatch:
    """A row's registrations, instances seen and impact series."""
    batch = IngestBatch()
    for app, environment, instance, via, sdk, strategies, interval, started, seen in data.get(
        "r", ()
    ):
        key = RegistrationKey(app, environment, instance)
        batch.registrations[key] = Registration(
            key,
            tuple(Hop(*hop) for hop in via),
            sdk,
            tuple(strategies),
            interval,
            None if started is None else from_epoch(started),
            from_epoch(seen),
        )
    for app, environment, instance, at in data.get("s", ()):
        batch.seen[RegistrationKey(app, environment, instance)] = from_epoch(at)
    for environment, app, name, kind, labels, help_, state in data.get("i", ()):
        series = ImpactKey(environment, app, name, kind, labels)
        batch.impact[series] = ImpactState.loads(help_, state)
    return batch


async def append(tx: Transaction, text: str, arrived: float) -> int:
    """The row's id."""
    [row] = await tx.fetch_all(
        "INSERT INTO ingest_log (arrived, bytes, batch) VALUES (?, ?, ?) RETURNING id",
        (arrived, len(text), text),
    )
    return int(row[0])


def halves(batch: IngestBatch) -> tuple[IngestBatch, IngestBatch] | None:
    """The batch cut in two (its counts, registrations, instances seen and series, in
    order), or None when it holds one of them only: the fold's way to the one element the
    database refuses."""
    parts: list[tuple[str, Any, Any]] = [
        *(("c", key, value) for key, value in batch.counts.items()),
        *(("r", key, value) for key, value in batch.registrations.items()),
        *(("s", key, value) for key, value in batch.seen.items()),
        *(("i", key, value) for key, value in batch.impact.items()),
    ]
    if len(parts) < 2:
        return None
    middle = len(parts) // 2
    return _batch_of(parts[:middle]), _batch_of(parts[middle:])


def _batch_of(parts: list[tuple[str, Any, Any]]) -> IngestBatch:
    batch = IngestBatch()
    tables: dict[str, dict[Any, Any]] = {
        "c": batch.counts,
        "r": batch.registrations,
        "s": batch.seen,
        "i": batch.impact,
    }
    for table, key, value in parts:
        tables[table][key] = value
    return batch
