"""The event log of admin changes read a page at a time, newest first, in Unleash's shape.
Events are written by ``relay.central.event_records.EventLog``, each in the transaction of
the change it describes; this is what the admin API and the web page read of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

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


class EventRecords(Protocol):
    async def sizes(self, where: EventFilter, offset: int, limit: int) -> list[tuple[int, int]]:
        """(id, characters of before and after) of up to ``limit`` events after the newest
        ``offset`` that ``where`` selects, newest first."""
        ...

    async def count(self, where: EventFilter) -> int: ...

    async def between(self, where: EventFilter, newest: int, oldest: int) -> list[EventOut]:
        """The events ``where`` selects from id ``newest`` down to id ``oldest``."""
        ...


class EventReader:
    def __init__(self, records: EventRecords) -> None:
        self._records = records

    async def page(self, where: EventFilter, offset: int, limit: int) -> tuple[list[EventOut], int]:
        """Up to ``limit`` events after the newest ``offset`` that ``where`` selects, newest
        first, as many as fit in ``MAX_PAGE_CHARS``, and how many it selects in all.

        The sizes are read first, so an event past the budget is never loaded; the events
        are then read by the range of ids chosen, which later events do not shift."""
        sizes = await self._records.sizes(where, offset, limit)
        total = await self._records.count(where)
        kept = within_budget([chars for _, chars in sizes])
        if not kept:
            return [], total
        return await self._records.between(where, sizes[0][0], sizes[kept - 1][0]), total


def within_budget(sizes: list[int]) -> int:
    """How many of the events of these sizes (newest first) one page holds: as many as fit
    in ``MAX_PAGE_CHARS``, and always the first."""
    kept, chars = 0, 0
    for size in sizes:
        chars += size
        if kept and chars > MAX_PAGE_CHARS:
            break
        kept += 1
    return kept
