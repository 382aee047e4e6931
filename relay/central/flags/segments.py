"""Segments: named lists of constraints that strategies share by id.

A segment's name is unique (the database's ``UNIQUE``), and one that a strategy uses cannot
be deleted (409): the delete is refused inside the write that takes the flag revision, so
no strategy can start using it meanwhile, and the foreign key stands behind that.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime

from relay.central.flags.records import Reads, load_flags, load_segments
from relay.central.flags.writes import FlagWrite, Writer
from relay.core.audit import Actor, EventType
from relay.core.domain import whole_number
from relay.core.errors import Conflict, InvalidInput, NotFound
from relay.core.flags import SegmentRecord
from relay.wire.flags import SegmentOut, UpsertSegment
from relay.wire.strategies import SAVED

MAX_ID = 2**31 - 1


def segment_id(text: str) -> int:
    """A segment id from a path; anything that cannot be one is an unknown segment."""
    number = whole_number(text, MAX_ID)
    if not number:
        raise NotFound(f"Could not find segment with id {text}")
    return number


class SegmentService:
    def __init__(self, writer: Writer) -> None:
        self._write = writer
        self._db = writer.db

    async def all(self) -> list[SegmentOut]:
        return [await _out(self._db, s) for s in await load_segments(self._db)]

    async def get(self, id: int) -> SegmentOut:
        found = await load_segments(self._db, "id = ?", (id,))
        if not found:
            raise NotFound(f"Could not find segment with id {id}")
        return await _out(self._db, found[0])

    async def create(self, actor: Actor, body: UpsertSegment) -> SegmentOut:
        async with self._write(actor) as w:
            await _check_project(w, body.project)
            rows = await w.tx.fetch_all(
                "INSERT INTO segments (name, description, project_id, constraints, created_at,"
                " revision) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (name) DO NOTHING"
                " RETURNING id",
                (*_columns(body), time.time(), w.revision),
            )
            if not rows:
                raise Conflict("Segment name already exists")
            [segment] = await load_segments(w.tx, "id = ?", (int(rows[0][0]),))
            created = await _out(w.tx, segment)
            await _event(w, EventType.SEGMENT_CREATED, None, created)
            return created

    async def update(self, actor: Actor, id: int, body: UpsertSegment) -> None:
        async with self._write(actor) as w:
            await _check_project(w, body.project)
            found = await load_segments(w.tx, "id = ?", (id,))
            if not found:
                raise NotFound(f"Could not find segment with id {id}")
            before = await _out(w.tx, found[0])
            if body.project is not None:
                elsewhere = await w.tx.fetch_all(
                    "SELECT f.project_id FROM feature_strategy_segments l"
                    " JOIN feature_strategies s ON s.id = l.strategy_id"
                    " JOIN features f ON f.name = s.feature_name"
                    " WHERE l.segment_id = ? AND f.project_id <> ?",
                    (id, body.project),
                )
                if elsewhere:
                    raise InvalidInput(
                        f"is {body.project}, but flags of project {elsewhere[0][0]} use"
                        " this segment",
                        "/body/project",
                    )
            taken = await w.tx.fetch_all(
                "SELECT 1 FROM segments WHERE name = ? AND id <> ?", (body.name, id)
            )
            if taken:
                raise Conflict("Segment name already exists")
            await w.tx.execute(
                "UPDATE segments SET name = ?, description = ?, project_id = ?,"
                " constraints = ?, revision = ? WHERE id = ?",
                (*_columns(body), w.revision, id),
            )
            await _check_users(w, id)
            [segment] = await load_segments(w.tx, "id = ?", (id,))
            await _event(w, EventType.SEGMENT_UPDATED, before, await _out(w.tx, segment))

    async def delete(self, actor: Actor, id: int) -> None:
        async with self._write(actor) as w:
            found = await load_segments(w.tx, "id = ?", (id,))
            before = await _out(w.tx, found[0]) if found else None
            deleted = await w.tx.execute(
                "DELETE FROM segments WHERE id = ? AND NOT EXISTS"
                " (SELECT 1 FROM feature_strategy_segments WHERE segment_id = ?)",
                (id, id),
            )
            if deleted:
                w.deleted_segments.append((id, found[0].project))
                await _event(w, EventType.SEGMENT_DELETED, before, None)
                return
            if await w.tx.fetch_all("SELECT 1 FROM segments WHERE id = ?", (id,)):
                raise Conflict(f"Segment {id} is in use by a strategy and cannot be deleted")
            raise NotFound(f"Could not find segment with id {id}")


async def _event(
    w: FlagWrite, type: EventType, before: SegmentOut | None, after: SegmentOut | None
) -> None:
    segment = after or before
    assert segment is not None
    await w.event(
        type,
        project=segment.project,
        before=None if before is None else before.model_dump(mode="json"),
        after=None if after is None else after.model_dump(mode="json"),
    )


async def _check_project(w: FlagWrite, project: str | None) -> None:
    if project is not None:
        await w.project_exists(project)


async def _check_users(w: FlagWrite, id: int) -> None:
    """Every flag environment that names the segment stays within what a flag may hold
    with the segment's new constraints inlined."""
    users = await load_flags(
        w.tx,
        "name IN (SELECT s.feature_name FROM feature_strategy_segments l"
        " JOIN feature_strategies s ON s.id = l.strategy_id WHERE l.segment_id = ?)",
        (id,),
    )
    for flag in users:
        for environment, state in sorted(flag.environments.items()):
            if any(id in strategy.segments for strategy in state.strategies):
                await w.check_room(flag, environment, path="/body/constraints")


def _columns(body: UpsertSegment) -> tuple[object, ...]:
    constraints = [c.model_dump(mode="json", exclude_none=True) for c in body.constraints]
    return body.name, body.description, body.project, json.dumps(constraints)


async def _out(db: Reads, segment: SegmentRecord) -> SegmentOut:
    [row] = await db.fetch_all(
        "SELECT count(DISTINCT f.name), count(DISTINCT f.project_id)"
        " FROM feature_strategy_segments l"
        " JOIN feature_strategies s ON s.id = l.strategy_id"
        " JOIN features f ON f.name = s.feature_name WHERE l.segment_id = ?",
        (segment.id,),
    )
    out = {
        "id": segment.id,
        "name": segment.name,
        "description": segment.description,
        "project": segment.project,
        "constraints": list(segment.constraints),
        "usedInFeatures": int(row[0]),
        "usedInProjects": int(row[1]),
        "createdAt": datetime.fromtimestamp(segment.created_at, UTC),
    }
    return SegmentOut.model_validate(out, context=SAVED)
