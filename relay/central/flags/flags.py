"""Flags of a project: create, read, change, archive, revive, and turn on or off per
environment. The admin API, the command line and the web page all go through here.

Each change is one transaction (``writes.Writer``); a flag name is taken by the database's
primary key (``ON CONFLICT DO NOTHING``), so two instances creating one name at once get
one 201 and one 409.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Protocol

from pydantic import ValidationError

from relay.central.flags.records import Reads
from relay.central.flags.writes import FlagWrite, Stored, shown
from relay.core import jsonpatch
from relay.core.audit import Actor, EventType
from relay.core.errors import Conflict, InvalidInput, InvalidOperation, NotFound
from relay.core.flags import FlagRecord, StrategyRecord, strategy_on
from relay.store.sql import Transaction
from relay.wire import flags as wire
from relay.wire.client_features import ClientDependency
from relay.wire.strategies import SAVED, Strategy, StrategyOut, Variant

Environments = list[tuple[str, str, int]]
"""(name, type, sort order) of the environments enabled in a project, in order."""


class FlagStorage(Protocol):
    """Flags as stored (``flag_records.FlagRecords``); one flag, whole, is read through the
    writer's ``WriteStorage``. ``db``: where a read looks, ``tx``: the write a change is
    made in."""

    async def create(
        self, tx: Transaction, project: str, body: wire.CreateFlag, revision: int
    ) -> bool:
        """False when the name is taken (by an archived flag too)."""
        ...

    async def archived(self, db: Reads, name: str) -> bool:
        """Whether a flag of that name is there, archived."""
        ...

    async def project_of(self, db: Reads, name: str) -> str | None: ...

    async def of_project(self, db: Reads, project: str) -> list[FlagRecord]:
        """The project's flags that are not archived, by name."""
        ...

    async def page(
        self, db: Reads, after: tuple[str, str] | None, limit: int, contains: str
    ) -> list[FlagRecord]:
        """Up to ``limit`` flags that are not archived, after ``after`` in the order of
        (project, name), whose name holds ``contains`` (ASCII letters in any case)."""
        ...

    async def archive_page(
        self, db: Reads, project: str | None, offset: int, limit: int
    ) -> list[FlagRecord]:
        """Up to ``limit`` archived flags (of ``project``, else all) after the first
        ``offset``, the most recently archived first: their own fields only."""
        ...

    async def environments(self, db: Reads, project: str) -> Environments: ...

    async def update(
        self, tx: Transaction, name: str, changed: Mapping[str, object], revision: int
    ) -> None:
        """``changed``: new values of ``description``, ``type``, ``stale`` or
        ``impression_data``."""
        ...

    async def archive(self, tx: Transaction, name: str, revision: int) -> None:
        """Archived now, its own dependency removed."""
        ...

    async def revive(self, tx: Transaction, name: str, revision: int) -> None:
        """Out of the archive, off in every environment."""
        ...

    async def delete(self, tx: Transaction, name: str) -> None:
        """The flag, its environments and strategies, for good."""
        ...


class FlagService(Stored[FlagStorage]):
    async def create(self, actor: Actor, project: str, body: wire.CreateFlag) -> wire.FlagOut:
        async with self._write(actor) as w:
            await w.project_exists(project)
            if not await self._records.create(w.tx, project, body, w.revision):
                raise Conflict(
                    "An archived flag with that name already exists"
                    if await self._records.archived(w.tx, body.name)
                    else "A flag with that name already exists"
                )
            flag = await self._out(w.tx, await w.flag(project, body.name))
            await _flag_event(w, EventType.FEATURE_CREATED, None, flag)
            return flag

    async def get(self, project: str, name: str, archived: bool = True) -> wire.FlagOut:
        """A flag of the project; an archived one (``archived`` says it is) only when
        ``archived``: the admin API's read answers it 404, as Unleash does."""
        found = await self._write.records.flag(self._db, name)
        if found is None or found.project != project:
            raise NotFound(f'There\'s no feature named "{name}" in project "{project}"')
        if found.archived_at is not None and not archived:
            raise NotFound(f"Could not find feature flag with name {name}")
        return await self._out(self._db, found)

    async def of_project(self, project: str, known: bool = False) -> list[wire.FlagOut]:
        """The project's flags that are not archived, by name: none for a project that is
        not there, as Unleash answers, or with ``known`` a 404 (the command line's)."""
        if known and not await self._write.records.project_exists(self._db, project):
            raise NotFound("No project found")
        flags = await self._records.of_project(self._db, project)
        environments = await self._records.environments(self._db, project)
        return [_flag_out(flag, environments) for flag in flags]

    async def page(
        self,
        after: tuple[str, str] | None,
        limit: int,
        contains: str = "",
    ) -> list[wire.FlagOut]:
        """Up to ``limit`` flags that are not archived, after ``after`` in the order of
        (project, name) (the ``features_project`` index), whose name holds ``contains``
        (ASCII letters in any case): a page of the web page's lists, whatever the count."""
        flags = await self._records.page(self._db, after, limit, contains)
        environments = {
            p: await self._records.environments(self._db, p) for p in {f.project for f in flags}
        }
        ordered = sorted(flags, key=lambda f: (f.project, f.name))
        return [_flag_out(flag, environments[flag.project]) for flag in ordered]

    async def environment(
        self, project: str, name: str, environment: str
    ) -> wire.FlagEnvironmentOut:
        flag = await self.get(project, name)
        for found in flag.environments:
            if found.name == environment:
                return found
        raise NotFound(f"Feature {name} does not have environment {environment}")

    async def project_of(self, name: str) -> str:
        project = await self._records.project_of(self._db, name)
        if project is None:
            raise NotFound(f"Feature {name} does not exist")
        return project

    async def update(
        self, actor: Actor, project: str, name: str, body: wire.UpdateFlag
    ) -> wire.FlagOut:
        """Changes the fields the body names; the others keep their values."""
        async with self._write(actor) as w:
            flag = await w.flag(project, name)
            return await self._update(w, flag, body, body.model_fields_set)

    async def patch(
        self, actor: Actor, project: str, name: str, operations: Sequence[wire.PatchOperation]
    ) -> wire.FlagOut:
        """A JSON Patch of the flag as GET shows it; the result is read as a PUT body."""
        async with self._write(actor) as w:
            flag = await w.flag(project, name)
            document = (await self._out(w.tx, flag)).model_dump(mode="json")
            body = jsonpatch.patched(wire.UpdateFlag, document, operations)
            fields = {"description", "type", "stale", "impressionData"}
            return await self._update(w, flag, body, fields)

    async def _update(
        self, w: FlagWrite, flag: FlagRecord, body: wire.UpdateFlag, fields: set[str]
    ) -> wire.FlagOut:
        if body.name is not None and body.name != flag.name:
            raise InvalidInput("Cannot change name of feature flag")
        values = {
            "description": body.description,
            "type": body.type.value,
            "stale": body.stale,
            "impression_data": body.impressionData,
        }
        names = {"impression_data": "impressionData"}
        changed = {k: v for k, v in values.items() if names.get(k, k) in fields}
        before = await self._out(w.tx, flag)
        await self._records.update(w.tx, flag.name, changed, w.revision)
        after = await self._out(w.tx, await w.flag(flag.project, flag.name))
        await _flag_event(w, EventType.FEATURE_METADATA_UPDATED, before, after)
        return after

    async def archive(self, actor: Actor, project: str, name: str) -> None:
        """Archived flags are not served to SDKs and keep their name taken. A flag other
        flags depend on cannot be archived; an archived flag's own dependency is removed
        (as Unleash does: revived, it depends on nothing)."""
        async with self._write(actor) as w:
            flag = await w.flag(project, name, writable=False)
            if flag.archived_at is not None:
                return  # archived already: nothing changes, nothing to log
            if flag.children:
                raise InvalidOperation(
                    "You can not archive/delete this feature since other features depend on it."
                )
            await self._records.archive(w.tx, name, w.revision)
            after = await self._out(w.tx, await w.flag(project, name, writable=False))
            await _flag_event(w, EventType.FEATURE_ARCHIVED, await self._out(w.tx, flag), after)

    async def revive(self, actor: Actor, name: str) -> None:
        """Back from the archive, off in every environment (as Unleash revives)."""
        async with self._write(actor) as w:
            found = await w.records.flag(w.tx, name)
            if found is None:
                raise NotFound(f"Feature {name} does not exist")
            if found.archived_at is None:
                return
            before = await self._out(w.tx, found)
            await self._records.revive(w.tx, name, w.revision)
            after = await self._out(w.tx, await w.flag(found.project, name))
            await _flag_event(w, EventType.FEATURE_REVIVED, before, after)

    async def archived(self, project: str | None, offset: int, limit: int) -> list[wire.FlagOut]:
        """Up to ``limit`` archived flags (of ``project``, else of every project) after the
        first ``offset``, the most recently archived first; as Unleash's archive answers
        them, without environments or strategies (never read: up to 256 KB each)."""
        if project is not None and not await self._write.records.project_exists(self._db, project):
            raise NotFound("No project found")
        flags = await self._records.archive_page(self._db, project, offset, limit)
        flags.sort(key=lambda f: (-(f.archived_at or 0.0), f.name))
        return [_flag_out(flag, []) for flag in flags]

    async def delete(self, actor: Actor, name: str) -> None:
        """Delete an archived flag for good (Unleash's ``DELETE /api/admin/archive/{name}``):
        its environments and strategies go with it and its name is free again. A flag that
        is not archived, or does not exist, is left alone (200 all the same, as Unleash)."""
        async with self._write(actor) as w:
            found = await w.records.flag(w.tx, name)
            if found is None or found.archived_at is None:
                return
            before = await self._out(w.tx, found)
            await self._records.delete(w.tx, name)
            await _flag_event(w, EventType.FEATURE_DELETED, before, None)

    async def set_enabled(
        self, actor: Actor, project: str, name: str, environment: str, on: bool
    ) -> None:
        """Turning on a flag with no strategy there (or only disabled ones) first adds the
        project environment's default strategy, else ``flexibleRollout`` at 100 %."""
        async with self._write(actor) as w:
            flag = await w.flag(project, name)
            record = await w.project_environment(project, environment)
            if record is None:
                raise NotFound(f"Could not find environment {environment} for feature: {name}")
            if on and not _serving(flag.environment(environment).strategies):
                stored = _default(project, environment, record.default_strategy)
                await w.add_strategy(flag, environment, strategy_on(name, stored))
            await w.set_enabled(name, environment, on)
            await w.touch(name)
            before = await self._out(w.tx, flag)
            after = await self._out(w.tx, await w.flag(project, name))
            if after != before:
                type = EventType.FEATURE_ENVIRONMENT_ENABLED
                if not on:
                    type = EventType.FEATURE_ENVIRONMENT_DISABLED
                await _flag_event(w, type, before, after, environment)

    async def _out(self, db: Reads, flag: FlagRecord) -> wire.FlagOut:
        return _flag_out(flag, await self._records.environments(db, flag.project))


async def _flag_event(
    w: FlagWrite,
    type: EventType,
    before: wire.FlagOut | None,
    after: wire.FlagOut | None,
    environment: str | None = None,
) -> None:
    """A flag's event, with the flag before and after as the admin API shows it."""
    flag = after or before
    assert flag is not None
    await w.event(
        type,
        project=flag.project,
        feature=flag.name,
        environment=environment,
        before=shown(before),
        after=shown(after),
    )


def _default(project: str, environment: str, saved: str | None) -> Strategy | None:
    """A saved default strategy; one an older version saved that today's checks refuse
    (a fractional sortOrder, an expression RE2 refuses) is the operator's 400 to fix."""
    if not saved:
        return None
    try:
        return Strategy.model_validate_json(saved)
    except ValidationError as exc:
        problem = exc.errors(include_url=False, include_input=False)[0]["msg"]
        raise InvalidInput(
            f"The default strategy of {project}/{environment} is no longer valid ({problem});"
            " set it again with default-strategy"
        ) from None


def _serving(strategies: Sequence[StrategyRecord]) -> bool:
    return any(not s.disabled for s in strategies)


def _flag_out(flag: FlagRecord, environments: Environments) -> wire.FlagOut:
    return wire.FlagOut(
        name=flag.name,
        type=flag.type,
        description=flag.description,
        project=flag.project,
        stale=flag.stale,
        impressionData=flag.impression_data,
        archived=flag.archived_at is not None,
        createdAt=datetime.fromtimestamp(flag.created_at, UTC),
        archivedAt=(
            None if flag.archived_at is None else datetime.fromtimestamp(flag.archived_at, UTC)
        ),
        environments=[
            environment_out(flag, name, kind, order) for name, kind, order in environments
        ],
        dependencies=[
            ClientDependency(feature=d.parent, enabled=d.enabled, variants=list(d.variants))
            for d in flag.dependencies
        ],
        children=list(flag.children),
    )


def environment_out(flag: FlagRecord, name: str, kind: str, order: int) -> wire.FlagEnvironmentOut:
    state = flag.environment(name)
    return wire.FlagEnvironmentOut(
        name=name,
        environment=name,
        type=kind,
        enabled=state.enabled,
        sortOrder=order,
        strategies=[strategy_out(flag.name, s) for s in state.strategies],
        hasStrategies=bool(state.strategies),
        hasEnabledStrategies=_serving(state.strategies),
        variants=[Variant.model_validate(v, context=SAVED) for v in state.variants],
    )


def strategy_out(flag: str, strategy: StrategyRecord) -> StrategyOut:
    values: dict[str, Any] = {
        "id": strategy.id,
        "name": strategy.name,
        "title": strategy.title,
        "disabled": strategy.disabled,
        "featureName": flag,
        "sortOrder": strategy.sort_order,
        "constraints": list(strategy.constraints),
        "variants": list(strategy.variants),
        "parameters": dict(strategy.parameters),
        "segments": list(strategy.segments),
    }
    return StrategyOut.model_validate(values, context=SAVED)
