"""Environments: created, listed, changed (type and order) and deleted, each change with its
event in its transaction. Their rows are ``EnvironmentRecords``'
(``relay.central.environment_records`` on either backend).

An environment's name is its identity: client and frontend keys carry it
(``project:environment.secret``), so it is never renamed. One is not deleted while a key is
bound to it (revoke those first: an SDK would otherwise be left with a key that reads
nothing), nor when it is the last; deleting it takes every flag's state and strategies
there with it, a flag write (SDKs of other environments see no change but a new revision).
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

from relay.core.audit import Actor, EventType
from relay.core.errors import Conflict, InvalidOperation, NotFound
from relay.wire import admin as wire

SORT_STEP = 100
"""An environment created without a sort order comes this far after the last one."""
MAX_SORT_ORDER = 2**31 - 1
"""The highest order the API takes (a PostgreSQL integer): an environment made after one
there takes it too (then ordered by name), never one past it."""


class EnvironmentChange(Protocol):
    """One transaction over the environments, made by one actor."""

    async def find(self, name: str) -> wire.EnvironmentOut | None: ...

    async def last_sort_order(self) -> int:
        """The highest sort order (0 when there is no environment)."""
        ...

    async def insert(self, environment: wire.EnvironmentOut) -> bool:
        """False (and nothing stored) when one with its name exists."""
        ...

    async def update(self, environment: wire.EnvironmentOut) -> None:
        """Its type and sort order as given."""
        ...

    async def hold(self, name: str) -> None:
        """Its row held until the change ends: a key being made for it waits, or is seen."""
        ...

    async def keys_bound(self, name: str) -> int: ...

    async def others(self, name: str) -> int:
        """How many environments there are besides this one."""
        ...

    async def event(
        self, type: EventType, environment: str, *, before: Any = None, after: Any = None
    ) -> None: ...


class EnvironmentFlagChange(EnvironmentChange, Protocol):
    """A change that flags see: a flag write (its revision, its change log)."""

    async def delete(self, name: str) -> None:
        """Gone with every flag's state and strategies there (each such flag a change of
        this write, for the SDKs)."""
        ...


class EnvironmentRecords(Protocol):
    async def listed(self) -> list[wire.EnvironmentOut]:
        """Every environment by sort order, then name."""
        ...

    def change(self, actor: Actor) -> AbstractAsyncContextManager[EnvironmentChange]:
        """A change of environments alone."""
        ...

    def flag_change(self, actor: Actor) -> AbstractAsyncContextManager[EnvironmentFlagChange]: ...


class EnvironmentStore:
    def __init__(self, records: EnvironmentRecords) -> None:
        self._records = records

    async def listed(self) -> list[wire.EnvironmentOut]:
        return await self._records.listed()

    async def create(self, actor: Actor, body: wire.CreateEnvironment) -> wire.EnvironmentOut:
        async with self._records.change(actor) as change:
            sort_order = body.sortOrder
            if sort_order is None:
                sort_order = min(await change.last_sort_order() + SORT_STEP, MAX_SORT_ORDER)
            made = wire.EnvironmentOut(
                name=body.name, type=body.type, enabled=body.enabled, sortOrder=sort_order
            )
            if not await change.insert(made):
                raise Conflict(f"Environment {body.name} already exists")
            after = await _environment(change, body.name)
            await change.event(
                EventType.ENVIRONMENT_CREATED, body.name, after=after.model_dump(mode="json")
            )
        return after

    async def update(
        self, actor: Actor, name: str, body: wire.UpdateEnvironment
    ) -> wire.EnvironmentOut:
        """The fields the body gives change; the others keep their values."""
        async with self._records.change(actor) as change:
            before = await _environment(change, name)
            changed = before.model_copy(
                update={
                    "type": before.type if body.type is None else body.type,
                    "sortOrder": before.sortOrder if body.sortOrder is None else body.sortOrder,
                }
            )
            await change.update(changed)
            after = await _environment(change, name)
            await change.event(
                EventType.ENVIRONMENT_UPDATED,
                name,
                before=before.model_dump(mode="json"),
                after=after.model_dump(mode="json"),
            )
        return after

    async def delete(self, actor: Actor, name: str) -> None:
        async with self._records.flag_change(actor) as change:
            before = await _environment(change, name)
            await change.hold(name)  # before its keys are counted
            keys = await change.keys_bound(name)
            if keys:
                raise Conflict(
                    f"Environment {name} is the environment of {keys} API key(s): revoke them first"
                )
            if not await change.others(name):
                raise InvalidOperation("You can not delete the last environment")
            await change.delete(name)
            await change.event(
                EventType.ENVIRONMENT_DELETED, name, before=before.model_dump(mode="json")
            )


async def _environment(change: EnvironmentChange, name: str) -> wire.EnvironmentOut:
    found = await change.find(name)
    if found is None:
        raise NotFound(f"Could not find environment {name}")
    return found
