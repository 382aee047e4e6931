"""Segments as stored (``SegmentStorage`` of ``segments``), in the SQL both backends speak,
with what the flags' strategies say of them: which flags use one, in which projects."""

from __future__ import annotations

import json
import time

from relay.central.flags.records import Reads, load_flags, load_segments
from relay.core.flags import FlagRecord, SegmentRecord
from relay.store.sql import Transaction
from relay.wire.flags import UpsertSegment

_USERS = (
    " FROM feature_strategy_segments l JOIN feature_strategies s ON s.id = l.strategy_id"
    " JOIN features f ON f.name = s.feature_name WHERE l.segment_id = ?"
)


class SegmentRecords:
    async def all(self, db: Reads) -> list[SegmentRecord]:
        return await load_segments(db)

    async def get(self, db: Reads, id: int) -> SegmentRecord | None:
        found = await load_segments(db, "id = ?", (id,))
        return found[0] if found else None

    async def usage(self, db: Reads, id: int) -> tuple[int, int]:
        [row] = await db.fetch_all(
            f"SELECT count(DISTINCT f.name), count(DISTINCT f.project_id){_USERS}", (id,)
        )
        return int(row[0]), int(row[1])

    async def users(self, db: Reads, id: int) -> list[FlagRecord]:
        return await load_flags(db, f"name IN (SELECT f.name{_USERS})", (id,))

    async def used_in_other_project(self, db: Reads, id: int, project: str) -> str | None:
        rows = await db.fetch_all(
            f"SELECT f.project_id{_USERS} AND f.project_id <> ?", (id, project)
        )
        return str(rows[0][0]) if rows else None

    async def name_taken(self, db: Reads, name: str, id: int) -> bool:
        rows = await db.fetch_all("SELECT 1 FROM segments WHERE name = ? AND id <> ?", (name, id))
        return bool(rows)

    async def create(self, tx: Transaction, body: UpsertSegment, revision: int) -> int | None:
        rows = await tx.fetch_all(
            "INSERT INTO segments (name, description, project_id, constraints, created_at,"
            " revision) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (name) DO NOTHING RETURNING id",
            (*_columns(body), time.time(), revision),
        )
        return int(rows[0][0]) if rows else None

    async def update(self, tx: Transaction, id: int, body: UpsertSegment, revision: int) -> None:
        await tx.execute(
            "UPDATE segments SET name = ?, description = ?, project_id = ?,"
            " constraints = ?, revision = ? WHERE id = ?",
            (*_columns(body), revision, id),
        )

    async def delete_unused(self, tx: Transaction, id: int) -> bool:
        deleted = await tx.execute(
            "DELETE FROM segments WHERE id = ? AND NOT EXISTS"
            " (SELECT 1 FROM feature_strategy_segments WHERE segment_id = ?)",
            (id, id),
        )
        return bool(deleted)


def _columns(body: UpsertSegment) -> tuple[object, ...]:
    constraints = [c.model_dump(mode="json", exclude_none=True) for c in body.constraints]
    return body.name, body.description, body.project, json.dumps(constraints)
