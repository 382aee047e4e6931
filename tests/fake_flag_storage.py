"""The flags' storage in memory, for unit tests of the flags' services: each class is one
service's storage protocol (``flags.FlagStorage``, ``tags.TagStorage``...) read and
written over the state of one ``FakeFlags``, so a flag one service creates is the flag
the others see, and a write that raises is undone whole (``FakeWriter``)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Any

from fake_flag_write import FakeFlags

from relay.core.flags import Dependency, FlagRecord, SegmentRecord
from relay.wire import flags as wire
from relay.wire.flags import UpsertSegment


class FakeFlagRecords:
    """Flags kept in ``flags``, where a flag write reads them."""

    def __init__(self, flags: FakeFlags) -> None:
        self.flags = flags

    async def create(self, tx: Any, project: str, body: wire.CreateFlag, revision: int) -> bool:
        if body.name in self.flags.flags:
            return False
        self.flags.add_flag(
            body.name,
            project,
            type=body.type.value,
            description=body.description,
            impression_data=body.impressionData,
            revision=revision,
        )
        return True

    async def archived(self, db: Any, name: str) -> bool:
        found = self.flags.flags.get(name)
        return found is not None and found.archived_at is not None

    async def project_of(self, db: Any, name: str) -> str | None:
        found = self.flags.flags.get(name)
        return None if found is None else found.project

    async def of_project(self, db: Any, project: str) -> list[FlagRecord]:
        return [f for f in self._sorted() if f.project == project and f.archived_at is None]

    async def page(
        self, db: Any, after: tuple[str, str] | None, limit: int, contains: str
    ) -> list[FlagRecord]:
        chosen = [
            f
            for f in self._sorted()
            if f.archived_at is None
            and (after is None or (f.project, f.name) > after)
            and contains.lower() in f.name.lower()
        ]
        return chosen[:limit]

    async def archive_page(
        self, db: Any, project: str | None, offset: int, limit: int
    ) -> list[FlagRecord]:
        chosen = [
            f
            for f in self.flags.flags.values()
            if f.archived_at is not None and project in (None, f.project)
        ]
        chosen.sort(key=lambda f: (-(f.archived_at or 0.0), f.name))
        return chosen[offset : offset + limit]

    async def environments(self, db: Any, project: str) -> list[tuple[str, str, int]]:
        return [(e, "production", i) for i, e in enumerate(self.flags.projects[project])]

    async def update(
        self, tx: Any, name: str, changed: Mapping[str, object], revision: int
    ) -> None:
        self._set(name, revision=revision, **changed)

    async def archive(self, tx: Any, name: str, revision: int) -> None:
        self._set(name, archived_at=1000.0 + revision, revision=revision, dependencies=())

    async def revive(self, tx: Any, name: str, revision: int) -> None:
        for environment in self.flags.flags[name].environments:
            await self.flags.set_enabled(tx, name, environment, False)
        self._set(name, archived_at=None, revision=revision)

    async def delete(self, tx: Any, name: str) -> None:
        del self.flags.flags[name]
        self.flags.tags.pop(name, None)

    def _sorted(self) -> list[FlagRecord]:
        return sorted(self.flags.flags.values(), key=lambda f: (f.project, f.name))

    def _set(self, name: str, **fields: Any) -> None:
        self.flags.flags[name] = dataclasses.replace(self.flags.flags[name], **fields)


class FakeTags:
    """Tags and tag types kept in ``flags``."""

    def __init__(self, flags: FakeFlags) -> None:
        self.flags = flags

    async def project_of(self, db: Any, flag: str) -> str | None:
        found = self.flags.flags.get(flag)
        return None if found is None else found.project

    async def of_flag(self, db: Any, flag: str) -> list[wire.Tag]:
        return [wire.Tag(type=t, value=v) for t, v in sorted(self.flags.tags.get(flag, ()))]

    async def count(self, tx: Any, flag: str) -> int:
        return len(self.flags.tags.get(flag, ()))

    async def add(self, tx: Any, flag: str, tag: wire.Tag, at: float) -> bool:
        held = self.flags.tags.setdefault(flag, set())
        had = len(held)
        held.add((tag.type, tag.value))
        return len(held) > had

    async def remove(self, tx: Any, flag: str, type: str, value: str) -> bool:
        held = self.flags.tags.get(flag, set())
        if (type, value) not in held:
            return False
        held.discard((type, value))
        return True

    async def types(self, db: Any) -> list[wire.TagType]:
        return [self.flags.kinds[name] for name in sorted(self.flags.kinds)]

    async def type_exists(self, db: Any, name: str) -> bool:
        return name in self.flags.kinds

    async def type_count(self, db: Any) -> int:
        return len(self.flags.kinds)

    async def create_type(self, tx: Any, body: wire.TagType) -> bool:
        if body.name in self.flags.kinds:
            return False
        self.flags.kinds[body.name] = body
        return True

    async def delete_type(self, tx: Any, name: str) -> bool:
        if self.flags.kinds.pop(name, None) is None:
            return False
        for held in self.flags.tags.values():
            held -= {tag for tag in held if tag[0] == name}
        return True


class FakeSegments:
    """Segments kept in ``flags.segments``, where a flag write's checks read them."""

    def __init__(self, flags: FakeFlags) -> None:
        self.flags = flags

    async def all(self, db: Any) -> list[SegmentRecord]:
        return [self.flags.segments[id] for id in sorted(self.flags.segments)]

    async def get(self, db: Any, id: int) -> SegmentRecord | None:
        return self.flags.segments.get(id)

    async def usage(self, db: Any, id: int) -> tuple[int, int]:
        users = await self.users(db, id)
        return len(users), len({f.project for f in users})

    async def users(self, db: Any, id: int) -> list[FlagRecord]:
        return [
            flag
            for flag in self.flags.flags.values()
            if any(
                id in s.segments for state in flag.environments.values() for s in state.strategies
            )
        ]

    async def used_in_other_project(self, db: Any, id: int, project: str) -> str | None:
        others = [f.project for f in await self.users(db, id) if f.project != project]
        return others[0] if others else None

    async def name_taken(self, db: Any, name: str, id: int) -> bool:
        return any(s.name == name and s.id != id for s in self.flags.segments.values())

    async def create(self, tx: Any, body: UpsertSegment, revision: int) -> int | None:
        if any(s.name == body.name for s in self.flags.segments.values()):
            return None
        id = max(self.flags.segments, default=0) + 1
        self.flags.segments[id] = _record(id, body, revision, 0.0)
        return id

    async def update(self, tx: Any, id: int, body: UpsertSegment, revision: int) -> None:
        created = self.flags.segments[id].created_at
        self.flags.segments[id] = _record(id, body, revision, created)

    async def delete_unused(self, tx: Any, id: int) -> bool:
        if id not in self.flags.segments or await self.users(tx, id):
            return False
        del self.flags.segments[id]
        return True


def _record(id: int, body: UpsertSegment, revision: int, created: float) -> SegmentRecord:
    constraints = [c.model_dump(mode="json", exclude_none=True) for c in body.constraints]
    # stored as JSON and read back, as the database does
    return SegmentRecord(
        id,
        body.name,
        body.description,
        body.project,
        tuple(json.loads(json.dumps(constraints))),
        created,
        revision,
    )


class FakeDependencies:
    """Dependencies kept on the flags of ``flags``, where a flag write reads them."""

    def __init__(self, flags: FakeFlags) -> None:
        self.flags = flags

    async def flag(self, db: Any, name: str) -> FlagRecord | None:
        return await self.flags.flag(db, name)

    async def set_parent(
        self, tx: Any, child: str, parent: str, enabled: bool, variants: Sequence[str]
    ) -> None:
        dependency = Dependency(parent, enabled, tuple(variants))
        self._set(child, (dependency,))

    async def remove(self, tx: Any, child: str, parent: str | None) -> bool:
        had = self.flags.flags[child].dependencies
        if not had or parent not in (None, had[0].parent):
            return False
        self._set(child, ())
        return True

    async def possible_parents(self, db: Any, project: str, child: str, most: int) -> list[str]:
        found = self.flags.flags.get(child)
        if found is None or found.project != project:
            return []
        return sorted(
            f.name
            for f in self.flags.flags.values()
            if f.project == project
            and f.name != child
            and not f.dependencies
            and f.archived_at is None
        )[:most]

    async def any(self, db: Any) -> bool:
        return any(f.dependencies for f in self.flags.flags.values())

    def _set(self, child: str, dependencies: tuple[Dependency, ...]) -> None:
        flag = self.flags.flags[child]
        self.flags.flags[child] = dataclasses.replace(flag, dependencies=dependencies)


class FakeTransfer:
    """What an import is checked against, read from ``flags`` (an export is not faked: it
    logs in a transaction of its own)."""

    def __init__(self, flags: FakeFlags) -> None:
        self.flags = flags

    async def flags_named(self, db: Any, names: Sequence[str]) -> list[FlagRecord]:
        return [self.flags.flags[n] for n in sorted(set(names)) if n in self.flags.flags]

    async def active(self, db: Any, names: Sequence[str]) -> set[str]:
        return {f.name for f in await self.flags_named(db, names) if f.archived_at is None}

    async def segments_for(self, db: Any, project: str) -> list[tuple[int, str]]:
        return [
            (s.id, s.name)
            for s in sorted(self.flags.segments.values(), key=lambda s: s.id)
            if s.project in (None, project)
        ]

    async def tag_type_names(self, db: Any) -> set[str]:
        return set(self.flags.kinds)
