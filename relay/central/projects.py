"""Projects, environments and which environments each project has enabled (any backend).

Each change is one write transaction whose conflict is decided by the database
(``ON CONFLICT DO NOTHING`` and the rows it reports), never by a read before the write: two
instances on one PostgreSQL database enabling the same environment at once get one 200 and
one 409, as one instance would. Each records its event (``relay.central.event_records``)
in that transaction, as made by the actor it is given.

Deletes follow Unleash 8: the default project cannot be deleted, nor one with flags that are
not archived (its archived flags, its segments and the keys of it alone go with it).
Environments themselves are ``relay.central.environments``'s. The rows are
``ProjectRecords``' (``relay.central.project_records`` on either backend)."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

from typing_extensions import Unpack

from relay.central.key_store import shown
from relay.core.audit import About, Actor, EventType
from relay.core.errors import Conflict, InvalidInput, InvalidOperation, NotFound
from relay.core.flags import FLEXIBLE_ROLLOUT
from relay.core.keys import Principal
from relay.wire import admin as wire
from relay.wire.strategies import Strategy

DEFAULT_PROJECT = "default"


class ProjectChange(Protocol):
    """One transaction over projects, made by one actor."""

    async def find(self, project_id: str) -> wire.ProjectOut | None:
        """The project with the environments it has enabled."""
        ...

    async def exists(self, project_id: str) -> bool: ...

    async def environment_exists(self, name: str) -> bool: ...

    async def insert(self, body: wire.CreateProject) -> bool:
        """False (and nothing stored) when one with its id exists."""
        ...

    async def update(self, project_id: str, name: str, description: str | None) -> None: ...

    async def hold(self, project_id: str) -> None:
        """Its row held until the change ends: a key being made for it waits, or is seen."""
        ...

    async def has_active_flags(self, project_id: str) -> bool:
        """Whether it has a flag that is not archived."""
        ...

    async def delete_flags(self, project_id: str) -> list[str]:
        """Its flags deleted for good; their names, in order."""
        ...

    async def keys_naming(self, project_id: str) -> list[tuple[str, Principal]]:
        """(id, principal) of the keys whose projects may include it: a superset (a name
        inside another project's id matches too)."""
        ...

    async def set_key_projects(self, key_id: str, projects: list[str]) -> None: ...

    async def delete_key(self, key_id: str) -> None: ...

    async def keys_changed(self) -> None:
        """The key revision moved: other workers and instances reload their keys."""
        ...

    async def delete(self, project_id: str) -> None: ...

    async def enable(
        self, project_id: str, environment: str, change_requests: bool, default_strategy: str | None
    ) -> bool:
        """The environment enabled in the project; False when it was already."""
        ...

    async def enabled_strategy(self, project_id: str, environment: str) -> tuple[bool, str | None]:
        """Whether the project has the environment, and its default strategy (JSON)."""
        ...

    async def set_default_strategy(self, project_id: str, environment: str, saved: str) -> None: ...

    async def event(self, type: EventType, project: str, **about: Unpack[About]) -> None:
        """Recorded in this change as made by its actor (``EventLog.record``)."""
        ...


class ProjectFlagChange(ProjectChange, Protocol):
    """A change that flags see: a flag write (its revision, its change log)."""

    async def delete_segments(self, project_id: str) -> None:
        """Its segments deleted (each a change of this write, for the SDKs)."""
        ...

    async def disable(self, project_id: str, environment: str) -> bool:
        """The environment no longer enabled in the project, its flags' state and
        strategies there gone; False when it was not enabled."""
        ...


class ProjectRecords(Protocol):
    async def find(self, project_id: str) -> wire.ProjectOut | None: ...

    async def listed(self) -> list[wire.ProjectListed]:
        """Every project by id, with how many flags it has that are not archived."""
        ...

    async def all(self) -> list[tuple[str, str]]:
        """(id, name) of every project, by id."""
        ...

    async def environment_names(self) -> list[str]: ...

    async def environment_exists(self, name: str) -> bool: ...

    def change(self, actor: Actor) -> AbstractAsyncContextManager[ProjectChange]: ...

    def flag_change(self, actor: Actor) -> AbstractAsyncContextManager[ProjectFlagChange]: ...


class ProjectStore:
    def __init__(
        self, records: ProjectRecords, keys_changed: Callable[[], Awaitable[None]] | None = None
    ) -> None:
        """``keys_changed``: told after a project's keys were revoked (the key store
        reloads, so they stop working here at once)."""
        self._records = records
        self._keys_changed = keys_changed

    async def get(self, project_id: str) -> wire.ProjectOut:
        return _found(await self._records.find(project_id))

    async def create(self, actor: Actor, body: wire.CreateProject) -> wire.ProjectOut:
        async with self._records.change(actor) as change:
            if not await change.insert(body):
                raise Conflict(f"A project with id {body.id} already exists")
            after = _found(await change.find(body.id))
            await change.event(EventType.PROJECT_CREATED, body.id, after=_json(after))
        return after

    async def update(
        self, actor: Actor, project_id: str, body: wire.UpdateProject
    ) -> wire.ProjectOut:
        """A new name and description (Unleash's PUT: a description left out is cleared)."""
        async with self._records.change(actor) as change:
            before = _found(await change.find(project_id))
            await change.update(project_id, body.name, body.description)
            after = _found(await change.find(project_id))
            await change.event(
                EventType.PROJECT_UPDATED,
                project_id,
                before=_json(before),
                after=_json(after),
            )
        return after

    async def delete(self, actor: Actor, project_id: str) -> None:
        """Unleash's rules (403 ``InvalidOperationError``): not the default project, not one
        with flags that are not archived. Its archived flags are deleted (each logged), its
        segments too (no flag is left to use them), and the keys of this project alone are
        revoked; a key of several projects loses this one."""
        if project_id == DEFAULT_PROJECT:
            raise InvalidOperation("You can not delete the default project!")
        async with self._records.flag_change(actor) as change:
            before = _found(await change.find(project_id))
            await change.hold(project_id)  # before its keys are looked for
            if await change.has_active_flags(project_id):
                raise InvalidOperation("You can not delete a project with active feature flags")
            for flag in await change.delete_flags(project_id):
                await change.event(EventType.FEATURE_DELETED, project_id, feature=flag)
            await change.delete_segments(project_id)
            dropped = await _drop_keys(change, project_id)
            await change.delete(project_id)
            await change.event(EventType.PROJECT_DELETED, project_id, before=_json(before))
        if dropped and self._keys_changed is not None:
            await self._keys_changed()

    async def add_environment(
        self, actor: Actor, project_id: str, body: wire.ProjectEnvironment
    ) -> None:
        """Enable an environment in a project, in Unleash's order of checks:
        unknown project (404), unknown environment (400), already enabled (409)."""
        strategy = (
            body.defaultStrategy.model_dump_json(exclude_none=True)
            if body.defaultStrategy is not None
            else None
        )
        # a flag write: it waits for a deletion of either in flight
        async with self._records.flag_change(actor) as change:
            if not await change.exists(project_id):
                raise NotFound("No project found")
            if not await change.environment_exists(body.environment):
                raise InvalidInput(f"Environment {body.environment} does not exist")
            requests = bool(body.changeRequestsEnabled)
            if not await change.enable(project_id, body.environment, requests, strategy):
                raise Conflict(
                    f"{project_id} already has the environment {body.environment} enabled"
                )
            await change.event(
                EventType.PROJECT_ENVIRONMENT_ADDED,
                project_id,
                environment=body.environment,
                after=body.model_dump(mode="json", exclude_none=True),
            )

    async def remove_environment(self, actor: Actor, project_id: str, environment: str) -> None:
        """The project's flags lose their state and strategies there, as in Unleash; an
        environment the project does not have is removed already (200, as Unleash answers)."""
        async with self._records.flag_change(actor) as change:
            if not await change.exists(project_id):
                raise NotFound("No project found")
            if await change.disable(project_id, environment):
                await change.event(
                    EventType.PROJECT_ENVIRONMENT_REMOVED,
                    project_id,
                    environment=environment,
                )

    async def set_default_strategy(
        self, actor: Actor, project_id: str, environment: str, strategy: Strategy
    ) -> str:
        """Unleash's ``default-strategy``: the same record as add-environment's
        ``defaultStrategy``; only ``flexibleRollout`` is accepted here, as in Unleash. Returns
        the record as saved (JSON)."""
        if strategy.name != FLEXIBLE_ROLLOUT:
            raise InvalidInput(
                'Only "flexibleRollout" strategy can be used as a default strategy for an'
                " environment"
            )
        # a flag write: it waits for a deletion of the project in flight
        async with self._records.flag_change(actor) as change:
            if not await change.exists(project_id):
                raise NotFound("No project found")
            enabled, current = await change.enabled_strategy(project_id, environment)
            if not enabled:
                raise NotFound(f"{project_id} does not have the environment {environment}")
            saved = strategy.model_dump_json(exclude_none=True)
            await change.set_default_strategy(project_id, environment, saved)
            await change.event(
                EventType.DEFAULT_STRATEGY_UPDATED,
                project_id,
                environment=environment,
                before=json.loads(current) if current else None,
                after=json.loads(saved),
            )
        return saved

    async def listed(self) -> list[wire.ProjectListed]:
        """Every project by id, with how many flags it has that are not archived."""
        return await self._records.listed()

    async def all(self) -> list[tuple[str, str]]:
        """(id, name) of every project, by id."""
        return await self._records.all()

    async def environment_names(self) -> list[str]:
        return await self._records.environment_names()

    async def environment_exists(self, name: str) -> bool:
        return await self._records.environment_exists(name)


async def _drop_keys(change: ProjectChange, project_id: str) -> bool:
    """The keys of a deleted project: revoked when it was their only project (logged, as
    Unleash deletes them), else left with their other projects; other workers and
    instances see it at their next poll of the key revision. True when any changed."""
    changed = False
    for key_id, principal in await change.keys_naming(project_id):
        projects = [p for p in principal.projects if p != project_id]
        if len(projects) == len(principal.projects):
            continue  # the name only appeared inside another project's id
        changed = True
        if projects:
            await change.set_key_projects(key_id, projects)
            continue
        await change.delete_key(key_id)
        await change.event(
            EventType.API_TOKEN_DELETED,
            project_id,
            environment=principal.environment,
            before=shown(key_id, principal),
        )
    if changed:
        await change.keys_changed()
    return changed


def _found(project: wire.ProjectOut | None) -> wire.ProjectOut:
    if project is None:
        raise NotFound("No project found")
    return project


def _json(project: wire.ProjectOut) -> Any:
    return project.model_dump(mode="json")
