"""Segments: named lists of constraints that strategies share by id.

A segment's name is unique (the database's ``UNIQUE``), and one that a strategy uses cannot
be deleted (409): the delete is refused inside the write that takes the flag revision, so
no strategy can start using it meanwhile, and the foreign key stands behind that.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Protocol

from relay.central.flags.records import Reads
from relay.central.flags.writes import FlagWrite, Stored, shown
from relay.core.audit import Actor, EventType
from relay.core.errors import Conflict, InvalidInput, NotFound
from relay.core.flags import FlagRecord, SegmentRecord
from relay.core.ingest_batch import whole_number
from relay.store.sql import Transaction
from relay.wire.flags import SegmentOut, UpsertSegment
from relay.wire.strategies import SAVED

MAX_ID = 2**31 - 1


def segment_id(text: str) -> int:
    """A segment id from a path; anything that cannot be one is an unknown segment."""
    number = whole_number(text, MAX_ID)
    if not number:
        raise NotFound(f"Could not find segment with id {text}")
    return number


class SegmentStorage(Protocol):
    """Segments as stored (``segment_records.SegmentRecords``); ``db``: where a read looks,
    ``tx``: the write a change is made in."""

    async def all(self, db: Reads) -> list[SegmentRecord]:
        """Every segment, by id."""
        ...

    async def get(self, db: Reads, id: int) -> SegmentRecord | None: ...

    async def usage(self, db: Reads, id: int) -> tuple[int, int]:
        """How many flags use the segment, in how many projects."""
        ...

    async def users(self, db: Reads, id: int) -> list[FlagRecord]:
        """The flags whose strategies name the segment."""
        ...

    async def used_in_other_project(self, db: Reads, id: int, project: str) -> str | None:
        """A project other than ``project`` whose flags use the segment, if any."""
        ...

    async def name_taken(self, db: Reads, name: str, id: int) -> bool:
        """Whether a segment other than ``id`` has the name."""
        ...

    async def create(self, tx: Transaction, body: UpsertSegment, revision: int) -> int | None:
        """The new segment's id; None when the name is taken."""
        ...

    async def update(
        self, tx: Transaction, id: int, body: UpsertSegment, revision: int
    ) -> None: ...

    async def delete_unused(self, tx: Transaction, id: int) -> bool:
        """The segment, unless a strategy uses it (then False, as when there is none)."""
        ...


class SegmentService(Stored[SegmentStorage]):
    async def all(self) -> list[SegmentOut]:
        return [await self._out(self._db, s) for s in await self._records.all(self._db)]

    async def get(self, id: int) -> SegmentOut:
        found = await self._records.get(self._db, id)
        if found is None:
            raise NotFound(f"Could not find segment with id {id}")
        return await self._out(self._db, found)

    async def create(self, actor: Actor, body: UpsertSegment) -> SegmentOut:
        async with self._write(actor) as w:
            await _check_project(w, body.project)
            id = await self._records.create(w.tx, body, w.revision)
            if id is None:
                raise Conflict("Segment name already exists")
            created = await self._saved(w, id)
            await _event(w, EventType.SEGMENT_CREATED, None, created)
            return created

    async def update(self, actor: Actor, id: int, body: UpsertSegment) -> None:
        async with self._write(actor) as w:
            await _check_project(w, body.project)
            found = await self._records.get(w.tx, id)
            if found is None:
                raise NotFound(f"Could not find segment with id {id}")
            before = await self._out(w.tx, found)
            if body.project is not None:
                elsewhere = await self._records.used_in_other_project(w.tx, id, body.project)
                if elsewhere is not None:
                    raise InvalidInput(
                        f"is {body.project}, but flags of project {elsewhere} use this segment",
                        "/body/project",
                    )
            if await self._records.name_taken(w.tx, body.name, id):
                raise Conflict("Segment name already exists")
            await self._records.update(w.tx, id, body, w.revision)
            await self._check_users(w, id)
            await _event(w, EventType.SEGMENT_UPDATED, before, await self._saved(w, id))

    async def delete(self, actor: Actor, id: int) -> None:
        async with self._write(actor) as w:
            found = await self._records.get(w.tx, id)
            if found is None:
                raise NotFound(f"Could not find segment with id {id}")
            before = await self._out(w.tx, found)
            if not await self._records.delete_unused(w.tx, id):
                raise Conflict(f"Segment {id} is in use by a strategy and cannot be deleted")
            w.deleted_segments.append((id, found.project))
            await _event(w, EventType.SEGMENT_DELETED, before, None)

    async def _check_users(self, w: FlagWrite, id: int) -> None:
        """Every flag environment that names the segment stays within what a flag may hold
        with the segment's new constraints inlined."""
        for flag in await self._records.users(w.tx, id):
            for environment, state in sorted(flag.environments.items()):
                if any(id in strategy.segments for strategy in state.strategies):
                    await w.check_room(flag, environment, path="/body/constraints")

    async def _saved(self, w: FlagWrite, id: int) -> SegmentOut:
        segment = await self._records.get(w.tx, id)
        assert segment is not None  # written in this write
        return await self._out(w.tx, segment)

    async def _out(self, db: Reads, segment: SegmentRecord) -> SegmentOut:
        flags, projects = await self._records.usage(db, segment.id)
        out = {
            "id": segment.id,
            "name": segment.name,
            "description": segment.description,
            "project": segment.project,
            "constraints": list(segment.constraints),
            "usedInFeatures": flags,
            "usedInProjects": projects,
            "createdAt": datetime.fromtimestamp(segment.created_at, UTC),
        }
        return SegmentOut.model_validate(out, context=SAVED)


async def _event(
    w: FlagWrite, type: EventType, before: SegmentOut | None, after: SegmentOut | None
) -> None:
    segment = after or before
    assert segment is not None
    await w.event(type, project=segment.project, before=shown(before), after=shown(after))


async def _check_project(w: FlagWrite, project: str | None) -> None:
    if project is not None:
        await w.project_exists(project)
