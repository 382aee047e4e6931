"""Flags of a project: create, read, change, archive, revive, and turn on or off per
environment. The admin API, the command line and the web page all go through here.

Each change is one transaction (``writes.Writer``); a flag name is taken by the database's
primary key (``ON CONFLICT DO NOTHING``), so two instances creating one name at once get
one 201 and one 409.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from relay.central.flags.records import Reads, load_flags
from relay.central.flags.writes import FlagWrite, Writer
from relay.core import jsonpatch
from relay.core.audit import Actor, EventType
from relay.core.errors import Conflict, InvalidInput, InvalidOperation, NotFound
from relay.core.flags import FlagRecord, StrategyRecord, strategy_on
from relay.wire import flags as wire
from relay.wire.client_features import ClientDependency
from relay.wire.strategies import SAVED, Strategy, StrategyOut, Variant


class FlagService:
    def __init__(self, writer: Writer) -> None:
        self._write = writer
        self._db = writer.db

    async def create(self, actor: Actor, project: str, body: wire.CreateFlag) -> wire.FlagOut:
        async with self._write(actor) as w:
            await w.project_exists(project)
            created = await w.tx.execute(
                "INSERT INTO features (name, project_id, type, description, stale,"
                " impression_data, created_at, revision) VALUES (?, ?, ?, ?, 0, ?, ?, ?)"
                " ON CONFLICT (name) DO NOTHING",
                (
                    body.name,
                    project,
                    body.type.value,
                    body.description,
                    int(body.impressionData),
                    time.time(),
                    w.revision,
                ),
            )
            if created != 1:
                rows = await w.tx.fetch_all(
                    "SELECT archived_at FROM features WHERE name = ?", (body.name,)
                )
                archived = bool(rows) and rows[0][0] is not None
                raise Conflict(
                    "An archived flag with that name already exists"
                    if archived
                    else "A flag with that name already exists"
                )
            flag = await _out(w.tx, await w.flag(project, body.name))
            await _flag_event(w, EventType.FEATURE_CREATED, None, flag)
            return flag

    async def get(self, project: str, name: str, archived: bool = True) -> wire.FlagOut:
        """A flag of the project; an archived one (``archived`` says it is) only when
        ``archived``: the admin API's read answers it 404, as Unleash does."""
        found = await load_flags(self._db, "name = ? AND project_id = ?", (name, project))
        if not found:
            raise NotFound(f'There\'s no feature named "{name}" in project "{project}"')
        if found[0].archived_at is not None and not archived:
            raise NotFound(f"Could not find feature flag with name {name}")
        return await _out(self._db, found[0])

    async def of_project(self, project: str, known: bool = False) -> list[wire.FlagOut]:
        """The project's flags that are not archived, by name: none for a project that is
        not there, as Unleash answers, or with ``known`` a 404 (the command line's)."""
        if known and not await self._db.fetch_all(
            "SELECT 1 FROM projects WHERE id = ?", (project,)
        ):
            raise NotFound("No project found")
        flags = await load_flags(self._db, "project_id = ? AND archived_at IS NULL", (project,))
        environments = await _environments(self._db, project)
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
        where = ["archived_at IS NULL"]
        params = list[object]()
        if after is not None:
            where.append("(project_id, name) > (?, ?)")
            params += after
        if contains:
            escaped = contains.lower().translate({ord(c): f"\\{c}" for c in "\\%_"})
            where.append("lower(name) LIKE ? ESCAPE '\\'")
            params.append(f"%{escaped}%")
        chosen = (
            f"name IN (SELECT name FROM features WHERE {' AND '.join(where)}"
            " ORDER BY project_id, name LIMIT ?)"
        )
        flags = await load_flags(self._db, chosen, [*params, limit])
        environments = {p: await _environments(self._db, p) for p in {f.project for f in flags}}
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
        rows = await self._db.fetch_all("SELECT project_id FROM features WHERE name = ?", (name,))
        if not rows:
            raise NotFound(f"Feature {name} does not exist")
        return str(rows[0][0])

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
            document = (await _out(w.tx, flag)).model_dump(mode="json")
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
            "stale": int(body.stale),
            "impression_data": int(body.impressionData),
        }
        names = {"impression_data": "impressionData"}
        changed = {k: v for k, v in values.items() if names.get(k, k) in fields}
        sets = "".join(f"{column} = ?, " for column in changed)
        before = await _out(w.tx, flag)
        await w.tx.execute(
            f"UPDATE features SET {sets}revision = ? WHERE name = ?",
            (*changed.values(), w.revision, flag.name),
        )
        after = await _out(w.tx, await w.flag(flag.project, flag.name))
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
            await w.tx.execute("DELETE FROM feature_dependencies WHERE child = ?", (name,))
            await w.tx.execute(
                "UPDATE features SET archived_at = ?, revision = ? WHERE name = ?",
                (time.time(), w.revision, name),
            )
            after = await _out(w.tx, await w.flag(project, name, writable=False))
            await _flag_event(w, EventType.FEATURE_ARCHIVED, await _out(w.tx, flag), after)

    async def revive(self, actor: Actor, name: str) -> None:
        """Back from the archive, off in every environment (as Unleash revives)."""
        async with self._write(actor) as w:
            found = await load_flags(w.tx, "name = ?", (name,))
            if not found:
                raise NotFound(f"Feature {name} does not exist")
            if found[0].archived_at is None:
                return
            before = await _out(w.tx, found[0])
            await w.tx.execute(
                "UPDATE features SET archived_at = NULL, revision = ? WHERE name = ?",
                (w.revision, name),
            )
            await w.tx.execute(
                "UPDATE feature_environments SET enabled = 0 WHERE feature_name = ?", (name,)
            )
            after = await _out(w.tx, await w.flag(found[0].project, name))
            await _flag_event(w, EventType.FEATURE_REVIVED, before, after)

    async def archived(self, project: str | None, offset: int, limit: int) -> list[wire.FlagOut]:
        """Up to ``limit`` archived flags (of ``project``, else of every project) after the
        first ``offset``, the most recently archived first; as Unleash's archive answers
        them, without environments or strategies (never read: up to 256 KB each)."""
        where, params = "archived_at IS NOT NULL", list[object]()
        if project is not None:
            if not await self._db.fetch_all("SELECT 1 FROM projects WHERE id = ?", (project,)):
                raise NotFound("No project found")
            where, params = f"{where} AND project_id = ?", [project]
        chosen = (
            f"name IN (SELECT name FROM features WHERE {where}"
            " ORDER BY archived_at DESC, name LIMIT ? OFFSET ?)"
        )
        flags = await load_flags(self._db, chosen, [*params, limit, offset], whole=False)
        flags.sort(key=lambda f: (-(f.archived_at or 0.0), f.name))
        return [_flag_out(flag, []) for flag in flags]

    async def delete(self, actor: Actor, name: str) -> None:
        """Delete an archived flag for good (Unleash's ``DELETE /api/admin/archive/{name}``):
        its environments and strategies go with it and its name is free again. A flag that
        is not archived, or does not exist, is left alone (200 all the same, as Unleash)."""
        async with self._write(actor) as w:
            found = await load_flags(w.tx, "name = ? AND archived_at IS NOT NULL", (name,))
            if not found:
                return
            before = await _out(w.tx, found[0])
            await w.tx.execute("DELETE FROM features WHERE name = ?", (name,))
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
            before, after = await _out(w.tx, flag), await _out(w.tx, await w.flag(project, name))
            if after != before:
                type = EventType.FEATURE_ENVIRONMENT_ENABLED
                if not on:
                    type = EventType.FEATURE_ENVIRONMENT_DISABLED
                await _flag_event(w, type, before, after, environment)


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
        before=None if before is None else before.model_dump(mode="json"),
        after=None if after is None else after.model_dump(mode="json"),
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


async def _environments(db: Reads, project: str) -> list[tuple[str, str, int]]:
    """(name, type, sort order) of the environments enabled in the project, in order."""
    rows = await db.fetch_all(
        "SELECT e.name, e.type, e.sort_order FROM project_environments pe"
        " JOIN environments e ON e.name = pe.environment WHERE pe.project_id = ?"
        " ORDER BY e.sort_order, e.name",
        (project,),
    )
    return [(row[0], row[1], int(row[2])) for row in rows]


async def _out(db: Reads, flag: FlagRecord) -> wire.FlagOut:
    return _flag_out(flag, await _environments(db, flag.project))


def _flag_out(flag: FlagRecord, environments: list[tuple[str, str, int]]) -> wire.FlagOut:
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
