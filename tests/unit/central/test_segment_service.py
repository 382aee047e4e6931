"""SegmentService's rules over in-memory segments: unique names, projects that exist and
agree with the flags using a segment, none deleted while in use, what a flag may hold
with a segment's constraints inlined, the change log told of a deletion. The SQL of
``segment_records`` is proven by tests/test_segments.py on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest
from fake_flag_storage import FakeSegments
from fake_flag_write import ACTOR, FakeWriter

from relay.central.flags.segments import SegmentService
from relay.core.audit import EventType
from relay.core.errors import Conflict, InvalidInput, NotFound
from relay.wire.flags import UpsertSegment
from relay.wire.strategies import Strategy


def service() -> tuple[SegmentService, FakeWriter]:
    writer = FakeWriter()
    writer.flags.add_project("default", "production")
    writer.flags.add_project("shop", "production")
    return SegmentService(writer, FakeSegments(writer.flags)), writer


def segment(name: str = "beta", project: str | None = None, big: int = 0) -> UpsertSegment:
    """A segment of one small constraint and ``big`` constraints of 100 KB each."""
    small = {"contextName": "userId", "operator": "IN", "values": ["u" * 100]}
    large = {**small, "values": ["u" * 100] * 1000}
    return UpsertSegment.model_validate(
        {"name": name, "project": project, "constraints": [small] + [large] * big}
    )


async def use(writer: FakeWriter, flag: str, project: str, id: int) -> None:
    """``flag`` of ``project`` gets a strategy in production that names segment ``id``."""
    writer.flags.add_flag(flag, project)
    async with writer(ACTOR) as w:
        record = await w.flag(project, flag)
        await w.add_strategy(record, "production", Strategy(name="default", segments=[id]))


async def test_names_are_unique_and_projects_must_exist() -> None:
    segments, writer = service()
    created = await segments.create(ACTOR, segment())
    assert (created.id, created.usedInFeatures, created.usedInProjects) == (1, 0, 0)
    assert writer.flags.segments[1].revision == writer.revision
    with pytest.raises(Conflict, match="Segment name already exists"):
        await segments.create(ACTOR, segment())
    await segments.create(ACTOR, segment("gamma"))
    with pytest.raises(Conflict, match="Segment name already exists"):
        await segments.update(ACTOR, 2, segment("beta"))
    with pytest.raises(NotFound, match="Active project with id nope does not exist"):
        await segments.create(ACTOR, segment("delta", "nope"))
    with pytest.raises(NotFound, match="Could not find segment with id 7"):
        await segments.update(ACTOR, 7, segment("delta"))
    with pytest.raises(NotFound, match="Could not find segment with id 7"):
        await segments.get(7)
    assert [s.name for s in await segments.all()] == ["beta", "gamma"]
    assert writer.log.types() == [EventType.SEGMENT_CREATED, EventType.SEGMENT_CREATED]


async def test_a_segment_used_by_flags_cannot_move_to_another_project_or_be_deleted() -> None:
    segments, writer = service()
    await segments.create(ACTOR, segment())
    await use(writer, "checkout", "default", 1)
    assert (await segments.get(1)).usedInFeatures == 1
    with pytest.raises(InvalidInput, match="flags of project default use this segment") as e:
        await segments.update(ACTOR, 1, segment(project="shop"))
    assert e.value.path == "/body/project"
    await segments.update(ACTOR, 1, segment(project="default"))
    with pytest.raises(Conflict, match="Segment 1 is in use by a strategy"):
        await segments.delete(ACTOR, 1)
    with pytest.raises(NotFound):
        await segments.delete(ACTOR, 9)
    assert writer.log.types()[-1] == EventType.SEGMENT_UPDATED


async def test_constraints_that_would_overfill_a_flag_using_the_segment_are_refused() -> None:
    segments, writer = service()
    await segments.create(ACTOR, segment())
    await use(writer, "checkout", "default", 1)
    with pytest.raises(InvalidInput, match="over the 262144 a flag may hold") as e:
        await segments.update(ACTOR, 1, segment(big=3))
    assert e.value.path == "/body/constraints"
    assert len(writer.flags.segments[1].constraints) == 1
    await segments.update(ACTOR, 1, segment(big=2))  # 200 KB: room enough


async def test_a_deleted_segment_is_told_to_the_change_log_with_its_project() -> None:
    segments, writer = service()
    await segments.create(ACTOR, segment(project="shop"))
    await segments.delete(ACTOR, 1)
    assert writer.flags.segments == {}
    assert writer.deleted_segments == [(1, "shop")]
    kind, fields = writer.log.recorded[-1]
    assert kind == EventType.SEGMENT_DELETED
    assert fields["project"] == "shop"
    assert fields["before"]["name"] == "beta"
