"""``ProjectStore``'s rules (Unleash's order of checks, what a deletion refuses and takes,
which keys lose a deleted project, the event of each change) over in-memory project
records; the SQL records are proven by the project tests on both backends."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest

from relay.central.projects import DEFAULT_PROJECT, ProjectStore
from relay.core.audit import Actor, EventType
from relay.core.errors import Conflict, InvalidInput, InvalidOperation, NotFound
from relay.core.keys import Principal
from relay.wire import admin as wire
from relay.wire.common import KeyType
from relay.wire.strategies import Strategy

ACTOR = Actor("admin")
CREATED = datetime(2026, 1, 1, tzinfo=UTC)


@dataclass
class MemoryProjects:
    """Projects, their enabled environments, flags (name -> archived), segments and keys;
    a change that raises leaves everything as it was."""

    projects: dict[str, tuple[str, str | None]] = field(default_factory=dict)
    environments: list[str] = field(default_factory=lambda: ["development", "production"])
    enabled: dict[tuple[str, str], str | None] = field(default_factory=dict)
    flags: dict[str, tuple[str, bool]] = field(default_factory=dict)
    segments: dict[int, str] = field(default_factory=dict)
    keys: dict[str, Principal] = field(default_factory=dict)
    key_revision: int = 0
    events: list[dict[str, Any]] = field(default_factory=list)
    flag_writes: int = 0
    deleted_segments: list[int] = field(default_factory=list)

    async def find(self, project_id: str) -> wire.ProjectOut | None:
        if project_id not in self.projects:
            return None
        name, description = self.projects[project_id]
        return wire.ProjectOut(
            id=project_id,
            name=name,
            description=description,
            createdAt=CREATED,
            environments=[
                wire.ProjectEnvironmentOut(
                    environment=env,
                    enabled=True,
                    changeRequestsEnabled=False,
                    defaultStrategy=None,
                )
                for env in self.environments
                if (project_id, env) in self.enabled
            ],
        )

    async def listed(self) -> list[wire.ProjectListed]:
        return [
            wire.ProjectListed(
                id=project_id,
                name=name,
                description=description,
                createdAt=CREATED,
                featureCount=sum(p == project_id and not a for p, a in self.flags.values()),
            )
            for project_id, (name, description) in sorted(self.projects.items())
        ]

    async def all(self) -> list[tuple[str, str]]:
        return [(project_id, name) for project_id, (name, _) in sorted(self.projects.items())]

    async def environment_names(self) -> list[str]:
        return list(self.environments)

    async def environment_exists(self, name: str) -> bool:
        return name in self.environments

    @asynccontextmanager
    async def change(self, actor: Actor) -> AsyncIterator[MemoryProjects]:
        saved = copy.deepcopy(self.__dict__)
        try:
            yield self
        except BaseException:
            self.__dict__.update(saved)
            raise

    @asynccontextmanager
    async def flag_change(self, actor: Actor) -> AsyncIterator[MemoryProjects]:
        async with self.change(actor) as change:
            yield change
        self.flag_writes += 1

    async def exists(self, project_id: str) -> bool:
        return project_id in self.projects

    async def insert(self, body: wire.CreateProject) -> bool:
        if body.id in self.projects:
            return False
        self.projects[body.id] = (body.name, body.description)
        return True

    async def update(self, project_id: str, name: str, description: str | None) -> None:
        self.projects[project_id] = (name, description)

    async def hold(self, project_id: str) -> None:
        pass

    async def has_active_flags(self, project_id: str) -> bool:
        return any(p == project_id and not archived for p, archived in self.flags.values())

    async def delete_flags(self, project_id: str) -> list[str]:
        names = sorted(name for name, (p, _) in self.flags.items() if p == project_id)
        for name in names:
            del self.flags[name]
        return names

    async def delete_segments(self, project_id: str) -> None:
        for id in [id for id, p in self.segments.items() if p == project_id]:
            del self.segments[id]
            self.deleted_segments.append(id)

    async def keys_naming(self, project_id: str) -> list[tuple[str, Principal]]:
        return [(id, p) for id, p in self.keys.items() if project_id in ",".join(p.projects)]

    async def set_key_projects(self, key_id: str, projects: list[str]) -> None:
        key = self.keys[key_id]
        self.keys[key_id] = Principal(key.type, key.environment, tuple(projects), key.display)

    async def delete_key(self, key_id: str) -> None:
        del self.keys[key_id]

    async def keys_changed(self) -> None:
        self.key_revision += 1

    async def delete(self, project_id: str) -> None:
        del self.projects[project_id]

    async def enable(
        self, project_id: str, environment: str, change_requests: bool, default_strategy: str | None
    ) -> bool:
        if (project_id, environment) in self.enabled:
            return False
        self.enabled[(project_id, environment)] = default_strategy
        return True

    async def disable(self, project_id: str, environment: str) -> bool:
        return self.enabled.pop((project_id, environment), False) is not False

    async def enabled_strategy(self, project_id: str, environment: str) -> tuple[bool, str | None]:
        if (project_id, environment) not in self.enabled:
            return False, None
        return True, self.enabled[(project_id, environment)]

    async def set_default_strategy(self, project_id: str, environment: str, saved: str) -> None:
        self.enabled[(project_id, environment)] = saved

    async def event(self, type: EventType, project: str, **fields: Any) -> None:
        self.events.append({"type": type, "project": project, **fields})


def key(*projects: str) -> Principal:
    return Principal(KeyType.CLIENT, "development", projects, "x:development.****")


async def with_project(records: MemoryProjects, project_id: str = "shop") -> ProjectStore:
    store = ProjectStore(records)
    await store.create(ACTOR, wire.CreateProject(id=project_id, name=project_id.title()))
    return store


async def test_a_project_id_taken_is_a_conflict_and_logs_nothing() -> None:
    records = MemoryProjects()
    store = await with_project(records)
    assert [e["type"] for e in records.events] == [EventType.PROJECT_CREATED]
    with pytest.raises(Conflict):
        await store.create(ACTOR, wire.CreateProject(id="shop", name="Other"))
    assert len(records.events) == 1
    assert (await store.get("shop")).name == "Shop"


async def test_an_update_logs_the_project_before_and_after() -> None:
    records = MemoryProjects()
    store = await with_project(records)
    after = await store.update(ACTOR, "shop", wire.UpdateProject(name="Store"))
    event = records.events[-1]
    assert event["type"] is EventType.PROJECT_UPDATED
    assert (event["before"]["name"], event["after"]["name"]) == ("Shop", "Store")
    assert after.name == "Store"
    with pytest.raises(NotFound):
        await store.update(ACTOR, "nowhere", wire.UpdateProject(name="x"))


async def test_the_default_project_and_one_with_active_flags_are_not_deleted() -> None:
    records = MemoryProjects()
    store = await with_project(records)
    records.flags["live"] = ("shop", False)
    with pytest.raises(InvalidOperation, match="default"):
        await store.delete(ACTOR, DEFAULT_PROJECT)
    with pytest.raises(InvalidOperation, match="active"):
        await store.delete(ACTOR, "shop")
    with pytest.raises(NotFound):
        await store.delete(ACTOR, "nowhere")
    assert "shop" in records.projects and records.flag_writes == 0


async def test_a_deletion_takes_archived_flags_segments_and_the_keys_of_it_alone() -> None:
    records = MemoryProjects()
    store = await with_project(records)
    await store.create(ACTOR, wire.CreateProject(id="shop-eu", name="EU"))
    records.flags.update(
        {"old-b": ("shop", True), "old-a": ("shop", True), "x": ("shop-eu", False)}
    )
    records.segments.update({1: "shop", 2: "shop-eu"})
    records.keys.update(
        {"own": key("shop"), "shared": key("shop", "shop-eu"), "other": key("shop-eu")}
    )
    told: list[str] = []

    async def keys_changed() -> None:
        told.append("keys")

    await ProjectStore(records, keys_changed).delete(ACTOR, "shop")
    assert "shop" not in records.projects and list(records.flags) == ["x"]
    assert records.deleted_segments == [1]
    assert set(records.keys) == {"shared", "other"}
    assert records.keys["shared"].projects == ("shop-eu",)
    assert records.keys["other"].projects == ("shop-eu",)  # "shop" only inside its id
    assert records.key_revision == 1 and told == ["keys"]
    deleted = [(e["type"], e.get("feature")) for e in records.events[2:]]
    assert deleted == [
        (EventType.FEATURE_DELETED, "old-a"),
        (EventType.FEATURE_DELETED, "old-b"),
        (EventType.API_TOKEN_DELETED, None),
        (EventType.PROJECT_DELETED, None),
    ]
    assert records.events[4]["before"]["id"] == "own"


async def test_a_deletion_without_keys_leaves_the_key_revision() -> None:
    records = MemoryProjects()
    store = await with_project(records)
    records.keys["other"] = key("shop-eu")
    await store.delete(ACTOR, "shop")
    assert records.key_revision == 0 and records.keys["other"].projects == ("shop-eu",)


async def test_enabling_an_environment_checks_in_unleashs_order() -> None:
    records = MemoryProjects()
    store = await with_project(records)
    body = wire.ProjectEnvironment(environment="nowhere")
    with pytest.raises(NotFound):
        await store.add_environment(ACTOR, "missing", body)
    with pytest.raises(InvalidInput):
        await store.add_environment(ACTOR, "shop", body)
    await store.add_environment(ACTOR, "shop", wire.ProjectEnvironment(environment="production"))
    with pytest.raises(Conflict):
        await store.add_environment(
            ACTOR, "shop", wire.ProjectEnvironment(environment="production")
        )
    assert [e["type"] for e in records.events[1:]] == [EventType.PROJECT_ENVIRONMENT_ADDED]
    found = await store.get("shop")
    assert [e.environment for e in found.environments] == ["production"]


async def test_removing_an_environment_not_enabled_is_done_already() -> None:
    records = MemoryProjects()
    store = await with_project(records)
    await store.remove_environment(ACTOR, "shop", "production")
    assert len(records.events) == 1  # nothing removed, nothing logged
    await store.add_environment(ACTOR, "shop", wire.ProjectEnvironment(environment="production"))
    await store.remove_environment(ACTOR, "shop", "production")
    assert records.events[-1]["type"] is EventType.PROJECT_ENVIRONMENT_REMOVED
    with pytest.raises(NotFound):
        await store.remove_environment(ACTOR, "missing", "production")


async def test_a_default_strategy_is_a_flexible_rollout_of_an_enabled_environment() -> None:
    records = MemoryProjects()
    store = await with_project(records)
    rollout = Strategy(name="flexibleRollout", parameters={"rollout": "50"})
    with pytest.raises(InvalidInput):
        await store.set_default_strategy(ACTOR, "shop", "production", Strategy(name="default"))
    with pytest.raises(NotFound, match="does not have"):
        await store.set_default_strategy(ACTOR, "shop", "production", rollout)
    await store.add_environment(ACTOR, "shop", wire.ProjectEnvironment(environment="production"))
    saved = await store.set_default_strategy(ACTOR, "shop", "production", rollout)
    assert records.enabled[("shop", "production")] == saved
    again = await store.set_default_strategy(ACTOR, "shop", "production", rollout)
    assert again == saved
    first, second = records.events[-2:]
    assert first["before"] is None and second["before"] == second["after"]
