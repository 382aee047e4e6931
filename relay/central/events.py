"""The event log of admin changes: recorded in the change's own transaction, read a page at
a time, newest first, in Unleash's shape.

``EventLog.record`` is the one way an event is written: flag writes reach it through
``FlagWrite.event``, projects, environments and keys through their stores, each inside
the transaction of the change it describes, so a change that rolls back logs nothing and
none that commits goes unlogged. Each write prunes the oldest past ``kept``.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from relay.core.audit import Actor, EventType, bounded
from relay.core.domain import from_epoch
from relay.store.sql import Database, Row, Transaction
from relay.wire.events import EventOut

EVENTS_KEPT = 50_000
"""Default of ``event_log_kept``."""

MAX_PAGE = 1000
"""Most events one read answers (Unleash's event search allows as many)."""

MAX_PAGE_CHARS = 512 * 1024
"""Most characters of before and after one read answers (always at least one event): a page
of ``MAX_PAGE`` events at ``MAX_DATA_BYTES`` twice each would be a 64 MB answer and several
times that in memory; this keeps a page under a megabyte, which aiohttp sends without
holding the event loop (it warns past 1 MiB). A page cut short says so only by holding fewer
than ``limit`` events: the next is at ``offset`` plus the events it held, up to
``totalEvents``."""


@dataclass(frozen=True, slots=True)
class EventFilter:
    """Which events a read selects (None: any)."""

    feature: str | None = None
    project: str | None = None


class EventLog:
    def __init__(self, db: Database, kept: int = EVENTS_KEPT) -> None:
        self._db = db
        self._kept = kept

    async def record(
        self,
        tx: Transaction,
        actor: Actor,
        type: EventType,
        *,
        project: str | None = None,
        feature: str | None = None,
        environment: str | None = None,
        before: Any = None,
        after: Any = None,
    ) -> None:
        """One event in ``tx``; ``before``/``after``: the thing as the admin API shows it
        (JSON-able), kept up to ``relay.core.audit.MAX_DATA_BYTES`` each."""
        [row] = await tx.fetch_all(
            "INSERT INTO events (created_at, type, created_by, project, feature_name,"
            " environment, data, pre_data) VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
            (
                time.time(),
                type.value,
                actor.name,
                project,
                feature,
                environment,
                bounded(after),
                bounded(before),
            ),
        )
        oldest = int(row[0]) - self._kept  # ids only grow: at most ``kept`` are left
        if oldest > 0:
            await tx.execute("DELETE FROM events WHERE id <= ?", (oldest,))

    async def page(self, where: EventFilter, offset: int, limit: int) -> tuple[list[EventOut], int]:
        """Up to ``limit`` events after the newest ``offset`` that ``where`` selects, newest
        first, as many as fit in ``MAX_PAGE_CHARS``, and how many it selects in all.

        The sizes are read first, so an event past the budget is never loaded; the events
        are then read by the range of ids chosen, which later events do not shift."""
        clauses, params = _where(where)
        sizes = await self._db.fetch_all(
            "SELECT id, COALESCE(length(data), 0) + COALESCE(length(pre_data), 0)"
            f" FROM events{clauses} ORDER BY id DESC LIMIT ? OFFSET ?",
            [*params, limit, offset],
        )
        [total] = await self._db.fetch_all(f"SELECT count(*) FROM events{clauses}", params)
        kept, chars = 0, 0
        for row in sizes:
            chars += int(row[1])
            if kept and chars > MAX_PAGE_CHARS:
                break
            kept += 1
        if not kept:
            return [], int(total[0])
        ranged = f"{clauses} AND" if clauses else " WHERE"
        rows = await self._db.fetch_all(
            "SELECT id, created_at, type, created_by, project, feature_name, environment,"
            f" data, pre_data FROM events{ranged} id <= ? AND id >= ? ORDER BY id DESC",
            [*params, int(sizes[0][0]), int(sizes[kept - 1][0])],
        )
        return [_out(row) for row in rows], int(total[0])


def _where(where: EventFilter) -> tuple[str, list[object]]:
    columns = {"feature_name": where.feature, "project": where.project}
    chosen = {column: value for column, value in columns.items() if value is not None}
    if not chosen:
        return "", []
    return " WHERE " + " AND ".join(f"{c} = ?" for c in chosen), list(chosen.values())


def _out(row: Row) -> EventOut:
    return EventOut(
        id=int(row["id"]),
        createdAt=from_epoch(float(row["created_at"])),
        type=row["type"],
        createdBy=row["created_by"],
        project=row["project"],
        featureName=row["feature_name"],
        environment=row["environment"],
        data=None if row["data"] is None else json.loads(row["data"]),
        preData=None if row["pre_data"] is None else json.loads(row["pre_data"]),
    )
