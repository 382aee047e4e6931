"""Flag writes without a database, for unit tests of the flags' services: the services
are given in-memory storage, and any SQL that still reached the database would fail here.

``FakeWriter`` numbers its writes as the revision does, records their events and, as a
transaction would, undoes what a write changed in the in-memory stores it was given when
the write raises."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from relay.central.events import EventLog
from relay.central.flags.writes import FlagWrite, Writer
from relay.core.audit import Actor, EventType

ACTOR = Actor("admin@example.com")


class NoDatabase:
    """The database and the transaction of a fake write: storage is faked, so nothing
    may reach them."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the service used the database directly ({name})")


class RecordedEvents(EventLog):
    def __init__(self) -> None:
        self.recorded: list[tuple[EventType, dict[str, Any]]] = []

    async def record(self, tx: Any, actor: Actor, type: EventType, **fields: Any) -> None:
        self.recorded.append((type, fields))

    def types(self) -> list[EventType]:
        return [type for type, _ in self.recorded]


class FakeWriter(Writer):
    def __init__(self, *stores: object) -> None:
        self.log = RecordedEvents()
        super().__init__(NoDatabase(), events=self.log)  # type: ignore[arg-type]
        self.revision = 0
        self._stores = stores

    @asynccontextmanager
    async def __call__(self, actor: Actor) -> AsyncIterator[FlagWrite]:
        kept = [copy.deepcopy(vars(store)) for store in (*self._stores, self.log)]
        self.revision += 1
        try:
            yield FlagWrite(NoDatabase(), self.revision, actor, self.log)  # type: ignore[arg-type]
        except BaseException:
            for store, state in zip((*self._stores, self.log), kept, strict=True):
                vars(store).update(state)
            raise
