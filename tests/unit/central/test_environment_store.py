"""``EnvironmentStore``'s rules (sort order, fields kept, what refuses a delete, the events
of each change) over in-memory environment records; the SQL records are proven by the
environment tests on both backends."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest

from relay.central.environments import SORT_STEP, EnvironmentStore
from relay.core.audit import Actor, EventType
from relay.core.errors import Conflict, InvalidOperation, NotFound
from relay.wire import admin as wire

ACTOR = Actor("admin")


@dataclass
class MemoryEnvironments:
    """Environments by name, keys bound to each, and the events and flag writes made; a
    change that raises leaves them as they were."""

    rows: dict[str, wire.EnvironmentOut] = field(default_factory=dict)
    keys: dict[str, int] = field(default_factory=dict)
    events: list[tuple[EventType, str, Any, Any]] = field(default_factory=list)
    flag_writes: int = 0

    async def listed(self) -> list[wire.EnvironmentOut]:
        return sorted(self.rows.values(), key=lambda e: (e.sortOrder, e.name))

    @asynccontextmanager
    async def change(self, actor: Actor) -> AsyncIterator[MemoryEnvironments]:
        rows, events = dict(self.rows), list(self.events)
        try:
            yield self
        except BaseException:
            self.rows, self.events = rows, events
            raise

    @asynccontextmanager
    async def flag_change(self, actor: Actor) -> AsyncIterator[MemoryEnvironments]:
        async with self.change(actor) as change:
            yield change
        self.flag_writes += 1

    async def find(self, name: str) -> wire.EnvironmentOut | None:
        return self.rows.get(name)

    async def last_sort_order(self) -> int:
        return max((e.sortOrder for e in self.rows.values()), default=0)

    async def insert(self, environment: wire.EnvironmentOut) -> bool:
        if environment.name in self.rows:
            return False
        self.rows[environment.name] = environment
        return True

    async def update(self, environment: wire.EnvironmentOut) -> None:
        self.rows[environment.name] = environment

    async def hold(self, name: str) -> None:
        pass

    async def keys_bound(self, name: str) -> int:
        return self.keys.get(name, 0)

    async def others(self, name: str) -> int:
        return len(self.rows.keys() - {name})

    async def delete(self, name: str) -> None:
        del self.rows[name]

    async def event(
        self, type: EventType, environment: str, *, before: Any = None, after: Any = None
    ) -> None:
        self.events.append((type, environment, before, after))


def create(name: str, sort_order: int | None = None) -> wire.CreateEnvironment:
    return wire.CreateEnvironment(name=name, type="test", sortOrder=sort_order)


async def test_an_environment_without_a_sort_order_comes_after_the_last() -> None:
    records = MemoryEnvironments()
    store = EnvironmentStore(records)
    first = await store.create(ACTOR, create("dev"))
    assert first.sortOrder == SORT_STEP
    await store.create(ACTOR, create("prod", 50))
    second = await store.create(ACTOR, create("stage"))
    assert second.sortOrder == 2 * SORT_STEP
    assert [e.name for e in await store.listed()] == ["prod", "dev", "stage"]
    assert records.events[0] == (
        EventType.ENVIRONMENT_CREATED,
        "dev",
        None,
        first.model_dump(mode="json"),
    )


async def test_a_name_taken_is_a_conflict_and_logs_nothing() -> None:
    records = MemoryEnvironments()
    store = EnvironmentStore(records)
    await store.create(ACTOR, create("dev"))
    with pytest.raises(Conflict):
        await store.create(ACTOR, create("dev", 7))
    assert len(records.events) == 1
    assert records.rows["dev"].sortOrder == SORT_STEP


async def test_an_update_changes_only_the_fields_it_gives() -> None:
    records = MemoryEnvironments()
    store = EnvironmentStore(records)
    before = await store.create(ACTOR, create("dev", 10))
    after = await store.update(ACTOR, "dev", wire.UpdateEnvironment(sortOrder=20))
    assert (after.type, after.sortOrder) == ("test", 20)
    after = await store.update(ACTOR, "dev", wire.UpdateEnvironment(type="production"))
    assert (after.type, after.sortOrder) == ("production", 20)
    assert records.events[1] == (
        EventType.ENVIRONMENT_UPDATED,
        "dev",
        before.model_dump(mode="json"),
        {**before.model_dump(mode="json"), "sortOrder": 20},
    )
    with pytest.raises(NotFound):
        await store.update(ACTOR, "nowhere", wire.UpdateEnvironment(sortOrder=1))


async def test_a_delete_is_refused_while_keys_are_bound_or_for_the_last() -> None:
    records = MemoryEnvironments()
    store = EnvironmentStore(records)
    await store.create(ACTOR, create("dev"))
    await store.create(ACTOR, create("prod"))
    records.keys["dev"] = 2
    with pytest.raises(Conflict, match="2 API key"):
        await store.delete(ACTOR, "dev")
    records.keys.clear()
    await store.delete(ACTOR, "dev")
    with pytest.raises(InvalidOperation):
        await store.delete(ACTOR, "prod")
    with pytest.raises(NotFound):
        await store.delete(ACTOR, "dev")
    assert list(records.rows) == ["prod"]
    assert records.flag_writes == 1  # the deletion only: refusals write nothing
    assert records.events[-1][:2] == (EventType.ENVIRONMENT_DELETED, "dev")
