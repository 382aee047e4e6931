"""Flag writes without a database, for unit tests of the flags' services: the services
are given in-memory storage, and any SQL that still reached the database would fail here.

``FakeWriter`` numbers its writes as the revision does, records their events and, as a
transaction would, undoes what a write changed in its ``FakeFlags`` and its events when
the write raises; ``deleted_segments`` gathers what committed writes tell the change log."""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

from typing_extensions import Unpack

from relay.central.event_records import EventLog
from relay.central.flags.write_records import ProjectEnvironment
from relay.central.flags.writes import FlagWrite, Writer
from relay.core.audit import Actor, EventType, Subject
from relay.core.flags import FlagRecord, SegmentRecord, StrategyRecord
from relay.wire import flags as wire

ACTOR = Actor("admin@example.com")


class NoDatabase:
    """The database and the transaction of a fake write: storage is faked, so nothing
    may reach them."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the service used the database directly ({name})")


class RecordedEvents(EventLog):
    def __init__(self) -> None:
        self.recorded: list[tuple[EventType, dict[str, Any]]] = []

    async def record(
        self, tx: Any, actor: Actor, type: EventType, **subject: Unpack[Subject]
    ) -> None:
        """Each field of ``Subject`` kept, None for one not given (as the log stores it)."""
        given: dict[str, Any] = dict(subject)
        self.recorded.append((type, {name: given.get(name) for name in Subject.__annotations__}))

    def types(self) -> list[EventType]:
        return [type for type, _ in self.recorded]


class FakeFlags:
    """Flags, project environments, segments and tags in memory, and ``WriteStorage``
    over them (the other services' storage reads and writes them too:
    ``fake_flag_storage``)."""

    def __init__(self) -> None:
        self.flags: dict[str, FlagRecord] = {}
        self.projects: dict[str, dict[str, str | None]] = {}
        self.segments: dict[int, SegmentRecord] = {}
        self.tags: dict[str, set[tuple[str, str]]] = {}
        self.kinds: dict[str, wire.TagType] = {"simple": wire.TagType(name="simple")}

    def add_project(self, project: str, *environments: str) -> None:
        self.projects[project] = dict.fromkeys(environments)

    def add_flag(self, name: str, project: str = "default", **fields: Any) -> FlagRecord:
        plain: dict[str, Any] = {
            "type": "release",
            "description": None,
            "stale": False,
            "impression_data": False,
            "created_at": 0.0,
            "archived_at": None,
            "revision": 0,
        }
        self.flags[name] = FlagRecord(name=name, project=project, **{**plain, **fields})
        return self.flags[name]

    def add_segment(
        self, id: int, project: str | None = None, constraints: Sequence[Any] = ()
    ) -> None:
        self.segments[id] = SegmentRecord(
            id, f"segment-{id}", None, project, tuple(constraints), 0.0, 0
        )

    async def project_exists(self, db: Any, project: str) -> bool:
        return project in self.projects

    async def flag(self, db: Any, name: str) -> FlagRecord | None:
        found = self.flags.get(name)
        if found is None:
            return None
        children = sorted(
            f.name for f in self.flags.values() if any(d.parent == name for d in f.dependencies)
        )
        return dataclasses.replace(found, children=tuple(children))

    async def project_environment(
        self, db: Any, project: str, environment: str
    ) -> ProjectEnvironment | None:
        environments = self.projects.get(project, {})
        if environment not in environments:
            return None
        return ProjectEnvironment(environments[environment])

    async def touch(self, tx: Any, name: str, revision: int) -> None:
        self.flags[name] = dataclasses.replace(self.flags[name], revision=revision)

    async def set_enabled(self, tx: Any, name: str, environment: str, enabled: bool) -> None:
        self._change(name, environment, enabled=enabled)

    async def set_variants(self, tx: Any, name: str, environment: str, variants: str) -> None:
        self._change(name, environment, variants=tuple(json.loads(variants)))

    async def last_sort_order(self, db: Any, name: str, environment: str) -> int | None:
        orders = [s.sort_order for s in self.flags[name].environment(environment).strategies]
        return max(orders, default=None)

    async def add_strategy(
        self, tx: Any, name: str, environment: str, strategy: StrategyRecord
    ) -> None:
        strategies = self.flags[name].environment(environment).strategies
        self._change(name, environment, strategies=(*strategies, _linked(strategy)))

    async def replace_strategy(self, tx: Any, strategy: StrategyRecord) -> None:
        for flag, environment, _ in self._strategies(strategy.id):
            strategies = flag.environment(environment).strategies
            self._change(flag.name, environment, strategies=_put(strategies, _linked(strategy)))

    async def set_sort_order(self, tx: Any, id: str, sort_order: int) -> None:
        for flag, environment, found in self._strategies(id):
            strategies = flag.environment(environment).strategies
            moved = dataclasses.replace(found, sort_order=sort_order)
            self._change(flag.name, environment, strategies=_put(strategies, moved))

    async def delete_strategy(self, tx: Any, id: str) -> None:
        for flag, environment, _ in self._strategies(id):
            kept = tuple(s for s in flag.environment(environment).strategies if s.id != id)
            self._change(flag.name, environment, strategies=kept)

    async def serves(self, db: Any, name: str, environment: str) -> bool:
        return any(not s.disabled for s in self.flags[name].environment(environment).strategies)

    async def turn_off(self, tx: Any, name: str, environment: str) -> bool:
        if not self.flags[name].environment(environment).enabled:
            return False
        self._change(name, environment, enabled=False)
        return True

    async def segment_constraints(self, db: Any, ids: Sequence[int]) -> dict[int, str]:
        return {
            id: json.dumps(list(self.segments[id].constraints)) for id in ids if id in self.segments
        }

    async def segment_projects(self, db: Any, ids: Sequence[int]) -> dict[int, str | None]:
        return {id: self.segments[id].project for id in ids if id in self.segments}

    def _strategies(self, id: str) -> list[tuple[FlagRecord, str, StrategyRecord]]:
        """The strategy of ``id``, with its flag and environment (none or one)."""
        return [
            (flag, environment, strategy)
            for flag in self.flags.values()
            for environment, state in flag.environments.items()
            for strategy in state.strategies
            if strategy.id == id
        ]

    def _change(self, name: str, environment: str, **fields: Any) -> None:
        flag = self.flags[name]
        state = dataclasses.replace(flag.environment(environment), **fields)
        ordered = tuple(sorted(state.strategies, key=StrategyRecord.order))
        state = dataclasses.replace(state, strategies=ordered)
        environments = {**flag.environments, environment: state}
        self.flags[name] = dataclasses.replace(flag, environments=environments)


def _put(strategies: Sequence[StrategyRecord], put: StrategyRecord) -> tuple[StrategyRecord, ...]:
    return tuple(put if s.id == put.id else s for s in strategies)


def _linked(strategy: StrategyRecord) -> StrategyRecord:
    """As read back: its segments once each, by id."""
    return dataclasses.replace(strategy, segments=tuple(sorted(set(strategy.segments))))


class FakeWriter(Writer):
    """Writes over ``flags``, empty ones to start with."""

    def __init__(self) -> None:
        self.log = RecordedEvents()
        self.flags = FakeFlags()
        super().__init__(NoDatabase(), events=self.log, records=self.flags)
        self.revision = 0
        self.deleted_segments: list[tuple[int, str | None]] = []
        self._stores = (self.flags, self.log)

    @asynccontextmanager
    async def __call__(self, actor: Actor) -> AsyncIterator[FlagWrite]:
        kept = [copy.deepcopy(vars(store)) for store in self._stores]
        self.revision += 1
        try:
            write = FlagWrite(NoDatabase(), self.revision, actor, self.log, self.flags)
            yield write
        except BaseException:
            for store, state in zip(self._stores, kept, strict=True):
                vars(store).update(state)
            raise
        self.deleted_segments += write.deleted_segments
