"""Projects, environments and which environments each project has enabled (any backend).

Each change is one write transaction whose conflict is decided by the database
(``ON CONFLICT DO NOTHING`` and the rows it reports), never by a read before the write: two
instances on one PostgreSQL database enabling the same environment at once get one 200 and
one 409, as one instance would. Each records its event (``relay.central.events``) in that
transaction, as made by the actor it is given.

Deletes follow Unleash 8: the default project cannot be deleted, nor one with flags that are
not archived (its archived flags, its segments and the keys of it alone go with it).
Environments themselves are ``relay.central.environments``'s."""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from relay.central.flags.records import Reads
from relay.central.flags.writes import FlagWrite, Writer
from relay.central.key_records import principal_of, shown
from relay.core.audit import Actor, EventType
from relay.core.errors import Conflict, InvalidInput, InvalidOperation, NotFound
from relay.core.flags import FLEXIBLE_ROLLOUT
from relay.store.sql import Database, Transaction
from relay.wire import admin as wire
from relay.wire.strategies import Strategy

DEFAULT_PROJECT = "default"


class ProjectStore:
    def __init__(
        self,
        db: Database,
        write: Writer | None = None,
        keys_changed: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        """``write``: the flag writer (removing an environment or a project is a flag write);
        its event log is this store's too. ``keys_changed``: told after a project's keys
        were revoked (the key store reloads, so they stop working here at once)."""
        self._db = db
        self._write = Writer(db) if write is None else write
        self._events = self._write.events
        self._keys_changed = keys_changed

    async def get(self, project_id: str) -> wire.ProjectOut:
        return await _project(self._db, project_id)

    async def create(self, actor: Actor, body: wire.CreateProject) -> wire.ProjectOut:
        async with self._db.transaction() as tx:
            created = await tx.execute(
                "INSERT INTO projects (id, name, description, created_at) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (id) DO NOTHING",
                (body.id, body.name, body.description, time.time()),
            )
            if created != 1:
                raise Conflict(f"A project with id {body.id} already exists")
            after = await _project(tx, body.id)
            await self._event(tx, actor, EventType.PROJECT_CREATED, body.id, after=_json(after))
        return after

    async def update(
        self, actor: Actor, project_id: str, body: wire.UpdateProject
    ) -> wire.ProjectOut:
        """A new name and description (Unleash's PUT: a description left out is cleared)."""
        async with self._db.transaction() as tx:
            before = await _project(tx, project_id)
            await tx.execute(
                "UPDATE projects SET name = ?, description = ? WHERE id = ?",
                (body.name, body.description, project_id),
            )
            after = await _project(tx, project_id)
            await self._event(
                tx, actor, EventType.PROJECT_UPDATED, project_id, _json(before), _json(after)
            )
        return after

    async def delete(self, actor: Actor, project_id: str) -> None:
        """Unleash's rules (403 ``InvalidOperationError``): not the default project, not one
        with flags that are not archived. Its archived flags are deleted (each logged), its
        segments too (no flag is left to use them), and the keys of this project alone are
        revoked; a key of several projects loses this one."""
        if project_id == DEFAULT_PROJECT:
            raise InvalidOperation("You can not delete the default project!")
        async with self._write(actor) as w:
            before = await _project(w.tx, project_id)
            # held before its keys are looked for: a key being made for it waits, or is seen
            await w.tx.execute("UPDATE projects SET name = name WHERE id = ?", (project_id,))
            active = await w.tx.fetch_all(
                "SELECT 1 FROM features WHERE project_id = ? AND archived_at IS NULL LIMIT 1",
                (project_id,),
            )
            if active:
                raise InvalidOperation("You can not delete a project with active feature flags")
            flags = await w.tx.fetch_all(
                "SELECT name FROM features WHERE project_id = ? ORDER BY name", (project_id,)
            )
            for flag in flags:
                await w.event(EventType.FEATURE_DELETED, project=project_id, feature=flag[0])
            await w.tx.execute("DELETE FROM features WHERE project_id = ?", (project_id,))
            segments = await w.tx.fetch_all(
                "DELETE FROM segments WHERE project_id = ? RETURNING id", (project_id,)
            )
            w.deleted_segments.extend((int(row[0]), project_id) for row in segments)
            dropped = await _drop_keys(w, project_id)
            await w.tx.execute("DELETE FROM projects WHERE id = ?", (project_id,))
            await w.event(EventType.PROJECT_DELETED, project=project_id, before=_json(before))
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
        async with self._write(actor) as w:  # waits for a deletion of either in flight
            tx = w.tx
            if not await _exists(tx, "SELECT 1 FROM projects WHERE id = ?", project_id):
                raise NotFound("No project found")
            if not await _exists(tx, "SELECT 1 FROM environments WHERE name = ?", body.environment):
                raise InvalidInput(f"Environment {body.environment} does not exist")
            created = await tx.execute(
                "INSERT INTO project_environments (project_id, environment,"
                " change_requests_enabled, default_strategy, created_at)"
                " VALUES (?, ?, ?, ?, ?) ON CONFLICT (project_id, environment) DO NOTHING",
                (
                    project_id,
                    body.environment,
                    int(bool(body.changeRequestsEnabled)),
                    strategy,
                    time.time(),
                ),
            )
            if created != 1:
                raise Conflict(
                    f"{project_id} already has the environment {body.environment} enabled"
                )
            await w.event(
                EventType.PROJECT_ENVIRONMENT_ADDED,
                project=project_id,
                environment=body.environment,
                after=body.model_dump(mode="json", exclude_none=True),
            )

    async def remove_environment(self, actor: Actor, project_id: str, environment: str) -> None:
        """The project's flags lose their state and strategies there, as in Unleash; an
        environment the project does not have is removed already (200, as Unleash answers)."""
        async with self._write(actor) as w:
            if not await _exists(w.tx, "SELECT 1 FROM projects WHERE id = ?", project_id):
                raise NotFound("No project found")
            removed = await w.tx.execute(
                "DELETE FROM project_environments WHERE project_id = ? AND environment = ?",
                (project_id, environment),
            )
            if removed != 1:
                return
            await w.tx.execute(
                "DELETE FROM feature_environments WHERE environment = ? AND feature_name IN"
                " (SELECT name FROM features WHERE project_id = ?)",
                (environment, project_id),
            )
            await w.tx.execute(
                "UPDATE features SET revision = ? WHERE project_id = ?", (w.revision, project_id)
            )
            await w.event(
                EventType.PROJECT_ENVIRONMENT_REMOVED, project=project_id, environment=environment
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
        async with self._write(actor) as w:  # waits for a deletion of the project in flight
            tx = w.tx
            if not await _exists(tx, "SELECT 1 FROM projects WHERE id = ?", project_id):
                raise NotFound("No project found")
            rows = await tx.fetch_all(
                "SELECT default_strategy FROM project_environments"
                " WHERE project_id = ? AND environment = ?",
                (project_id, environment),
            )
            if not rows:
                raise NotFound(f"{project_id} does not have the environment {environment}")
            saved = strategy.model_dump_json(exclude_none=True)
            await tx.execute(
                "UPDATE project_environments SET default_strategy = ?"
                " WHERE project_id = ? AND environment = ?",
                (saved, project_id, environment),
            )
            before = json.loads(rows[0][0]) if rows[0][0] else None
            await w.event(
                EventType.DEFAULT_STRATEGY_UPDATED,
                project=project_id,
                environment=environment,
                before=before,
                after=json.loads(saved),
            )
        return saved

    async def listed(self) -> list[wire.ProjectListed]:
        """Every project by id, with how many flags it has that are not archived."""
        rows = await self._db.fetch_all(
            "SELECT p.id, p.name, p.description, p.created_at, count(f.name) AS flags"
            " FROM projects p LEFT JOIN features f"
            " ON f.project_id = p.id AND f.archived_at IS NULL"
            " GROUP BY p.id, p.name, p.description, p.created_at ORDER BY p.id"
        )
        return [
            wire.ProjectListed(
                id=row["id"],
                name=row["name"],
                description=row["description"],
                createdAt=datetime.fromtimestamp(row["created_at"], UTC),
                featureCount=int(row["flags"]),
            )
            for row in rows
        ]

    async def all(self) -> list[tuple[str, str]]:
        """(id, name) of every project, by id."""
        rows = await self._db.fetch_all("SELECT id, name FROM projects ORDER BY id")
        return [(row[0], row[1]) for row in rows]

    async def environment_names(self) -> list[str]:
        rows = await self._db.fetch_all("SELECT name FROM environments ORDER BY sort_order, name")
        return [row[0] for row in rows]

    async def environment_exists(self, name: str) -> bool:
        row = await self._db.fetch_one("SELECT 1 FROM environments WHERE name = ?", (name,))
        return row is not None

    async def _event(
        self,
        tx: Transaction,
        actor: Actor,
        type: EventType,
        project: str | None,
        before: Any = None,
        after: Any = None,
        environment: str | None = None,
    ) -> None:
        await self._events.record(
            tx, actor, type, project=project, environment=environment, before=before, after=after
        )


async def _project(db: Reads, project_id: str) -> wire.ProjectOut:
    rows = await db.fetch_all(
        "SELECT id, name, description, created_at FROM projects WHERE id = ?", (project_id,)
    )
    if not rows:
        raise NotFound("No project found")
    row = rows[0]
    envs = await db.fetch_all(
        "SELECT pe.environment, e.enabled, pe.change_requests_enabled, pe.default_strategy"
        " FROM project_environments pe JOIN environments e ON e.name = pe.environment"
        " WHERE pe.project_id = ? ORDER BY e.sort_order, e.name",
        (project_id,),
    )
    return wire.ProjectOut(
        id=row["id"],
        name=row["name"],
        description=row["description"],
        createdAt=datetime.fromtimestamp(row["created_at"], UTC),
        environments=[
            wire.ProjectEnvironmentOut(
                environment=env["environment"],
                enabled=bool(env["enabled"]),
                changeRequestsEnabled=bool(env["change_requests_enabled"]),
                defaultStrategy=(
                    json.loads(env["default_strategy"]) if env["default_strategy"] else None
                ),
            )
            for env in envs
        ],
    )


async def _drop_keys(w: FlagWrite, project_id: str) -> bool:
    """The keys of a deleted project: revoked when it was their only project (logged, as
    Unleash deletes them), else left with their other projects; other workers and
    instances see it at their next poll of the key revision. True when any changed."""
    rows = await w.tx.fetch_all(
        "SELECT id, secret_hash, display, type, environment, projects, token_name"
        " FROM api_tokens WHERE projects LIKE ?",
        (f"%{json.dumps(project_id)}%",),
    )
    changed = False
    for row in rows:
        projects = [p for p in json.loads(row["projects"]) if p != project_id]
        if len(projects) == len(json.loads(row["projects"])):
            continue  # the name only appeared inside another project's id
        changed = True
        if projects:
            await w.tx.execute(
                "UPDATE api_tokens SET projects = ? WHERE id = ?",
                (json.dumps(projects), row["id"]),
            )
            continue
        await w.tx.execute("DELETE FROM api_tokens WHERE id = ?", (row["id"],))
        await w.event(
            EventType.API_TOKEN_DELETED,
            project=project_id,
            environment=row["environment"],
            before=shown(row["id"], principal_of(row)),
        )
    if changed:
        await w.tx.execute("UPDATE key_revision SET revision = revision + 1 WHERE id = 1")
    return changed


def _json(project: wire.ProjectOut) -> Any:
    return project.model_dump(mode="json")


async def _exists(tx: Transaction, sql: str, value: str) -> bool:
    return bool(await tx.fetch_all(sql, (value,)))
