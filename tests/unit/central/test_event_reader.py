"""``EventReader``'s page (its character budget, the range of ids it then reads) over
in-memory event records; the SQL records are proven by the event tests on both backends."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

from relay.central.events import MAX_PAGE_CHARS, EventFilter, EventReader, within_budget
from relay.wire.events import EventOut


def event(id: int) -> EventOut:
    return EventOut(
        id=id,
        createdAt=datetime(2026, 1, 1, tzinfo=UTC),
        type="feature-created",
        createdBy="admin",
    )


@dataclass
class MemoryEvents:
    """Events by id with their sizes; what was read, in order."""

    sized: dict[int, int] = field(default_factory=dict)
    reads: list[tuple[object, ...]] = field(default_factory=list)

    async def sizes(self, where: EventFilter, offset: int, limit: int) -> list[tuple[int, int]]:
        newest_first = sorted(self.sized.items(), reverse=True)
        return newest_first[offset : offset + limit]

    async def count(self, where: EventFilter) -> int:
        return len(self.sized)

    async def between(self, where: EventFilter, newest: int, oldest: int) -> list[EventOut]:
        self.reads.append((newest, oldest))
        return [event(id) for id in sorted(self.sized, reverse=True) if oldest <= id <= newest]


def test_a_page_holds_what_fits_and_always_one_event() -> None:
    assert within_budget([]) == 0
    assert within_budget([MAX_PAGE_CHARS * 2]) == 1
    assert within_budget([MAX_PAGE_CHARS // 2, MAX_PAGE_CHARS // 2, 1]) == 2
    assert within_budget([10, 10, 10]) == 3


async def test_only_the_events_within_the_budget_are_read() -> None:
    records = MemoryEvents({id: MAX_PAGE_CHARS // 3 for id in range(1, 11)})
    found, total = await EventReader(records).page(EventFilter(), 2, 5)
    assert total == 10
    assert [e.id for e in found] == [8, 7, 6]
    assert records.reads == [(8, 6)]


async def test_a_page_past_the_end_reads_no_events() -> None:
    records = MemoryEvents({1: 10})
    assert await EventReader(records).page(EventFilter(), 5, 5) == ([], 1)
    assert records.reads == []
