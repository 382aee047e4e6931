"""The event log's rows in the central database (table ``events``), on either backend.

``EventLog.record`` is the one way an event is written: flag writes reach it through
``FlagWrite.event``, projects, environments and keys through their records, each inside
the transaction of the change it describes, so a change that rolls back logs nothing and
none that commits goes unlogged. Each write prunes the oldest past ``kept``. Its reads are
the ``EventRecords`` of ``relay.central.events``.
"""

from __future__ import annotations

import json
import time

from typing_extensions import Unpack

from relay.central.events import EVENTS_KEPT, EventFilter
from relay.core.audit import Actor, EventType, Subject, bounded
from relay.core.ingest_batch import from_epoch
from relay.store.sql import Database, Row, Transaction
from relay.wire.events import EventOut


class EventLog:
    def __init__(self, db: Database, kept: int = EVENTS_KEPT) -> None:
        self._db = db
        self._kept = kept

    async def record(
        self,
        tx: Transaction,
        actor: Actor,
        type: EventType,
        **subject: Unpack[Subject],
    ) -> None:
        """One event in ``tx``; ``before``/``after`` kept up to
        ``relay.core.audit.MAX_DATA_BYTES`` each."""
        [row] = await tx.fetch_all(
            "INSERT INTO events (created_at, type, created_by, project, feature_name,"
            " environment, data, pre_data) VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
            (
                time.time(),
                type.value,
                actor.name,
                subject.get("project"),
                subject.get("feature"),
                subject.get("environment"),
                bounded(subject.get("after")),
                bounded(subject.get("before")),
            ),
        )
        oldest = int(row[0]) - self._kept  # ids only grow: at most ``kept`` are left
        if oldest > 0:
            await tx.execute("DELETE FROM events WHERE id <= ?", (oldest,))

    async def sizes(self, where: EventFilter, offset: int, limit: int) -> list[tuple[int, int]]:
        clauses, params = _where(where)
        rows = await self._db.fetch_all(
            "SELECT id, COALESCE(length(data), 0) + COALESCE(length(pre_data), 0)"
            f" FROM events{clauses} ORDER BY id DESC LIMIT ? OFFSET ?",
            [*params, limit, offset],
        )
        return [(int(row[0]), int(row[1])) for row in rows]

    async def count(self, where: EventFilter) -> int:
        clauses, params = _where(where)
        [total] = await self._db.fetch_all(f"SELECT count(*) FROM events{clauses}", params)
        return int(total[0])

    async def between(self, where: EventFilter, newest: int, oldest: int) -> list[EventOut]:
        clauses, params = _where(where)
        ranged = f"{clauses} AND" if clauses else " WHERE"
        rows = await self._db.fetch_all(
            "SELECT id, created_at, type, created_by, project, feature_name, environment,"
            f" data, pre_data FROM events{ranged} id <= ? AND id >= ? ORDER BY id DESC",
            [*params, newest, oldest],
        )
        return [_out(row) for row in rows]


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
