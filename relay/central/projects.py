"""Projects, environments and which environments each project has enabled (any backend).

Each change is one write transaction whose conflict is decided by the database
(``ON CONFLICT DO NOTHING`` and the rows it reports), never by a read before the write: two
instances on one PostgreSQL database enabling the same environment at once get one 200 and
one 409, as one instance would."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime

from relay.central.flags.writes import Writer
from relay.core.errors import Conflict, InvalidInput, NotFound
from relay.core.flags import FLEXIBLE_ROLLOUT
from relay.store.sql import Database, Transaction
from relay.wire import admin as wire
from relay.wire.strategies import Strategy


class ProjectStore:
    def __init__(self, db: Database, write: Writer | None = None) -> None:
        """``write``: the flag writer (the environment's removal is a flag write)."""
        self._db = db
        self._write = Writer(db) if write is None else write

    async def get(self, project_id: str) -> wire.ProjectOut:
        row = await self._db.fetch_one(
            "SELECT id, name, description, created_at FROM projects WHERE id = ?", (project_id,)
        )
        if row is None:
            raise NotFound("No project found")
        envs = await self._db.fetch_all(
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

    async def create(self, body: wire.CreateProject) -> wire.ProjectOut:
        async with self._db.transaction() as tx:
            created = await tx.execute(
                "INSERT INTO projects (id, name, description, created_at) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (id) DO NOTHING",
                (body.id, body.name, body.description, time.time()),
            )
            if created != 1:
                raise Conflict(f"A project with id {body.id} already exists")
        return await self.get(body.id)

    async def create_environment(self, body: wire.CreateEnvironment) -> wire.EnvironmentOut:
        async with self._db.transaction() as tx:
            if body.sortOrder is None:
                [row] = await tx.fetch_all(
                    "SELECT coalesce(max(sort_order), 0) + 100 FROM environments"
                )
                sort_order = int(row[0])
            else:
                sort_order = body.sortOrder
            created = await tx.execute(
                "INSERT INTO environments (name, type, enabled, sort_order, created_at)"
                " VALUES (?, ?, ?, ?, ?) ON CONFLICT (name) DO NOTHING",
                (body.name, body.type, int(body.enabled), sort_order, time.time()),
            )
            if created != 1:
                raise Conflict(f"Environment {body.name} already exists")
        return wire.EnvironmentOut(
            name=body.name, type=body.type, enabled=body.enabled, sortOrder=sort_order
        )

    async def add_environment(self, project_id: str, body: wire.ProjectEnvironment) -> None:
        """Enable an environment in a project, in Unleash's order of checks:
        unknown project (404), unknown environment (400), already enabled (409)."""
        strategy = (
            body.defaultStrategy.model_dump_json(exclude_none=True)
            if body.defaultStrategy is not None
            else None
        )
        async with self._db.transaction() as tx:
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

    async def remove_environment(self, project_id: str, environment: str) -> None:
        """The project's flags lose their state and strategies there, as in Unleash."""
        async with self._write() as w:
            if not await _exists(w.tx, "SELECT 1 FROM projects WHERE id = ?", project_id):
                raise NotFound("No project found")
            removed = await w.tx.execute(
                "DELETE FROM project_environments WHERE project_id = ? AND environment = ?",
                (project_id, environment),
            )
            if removed != 1:
                raise NotFound(f"{project_id} does not have the environment {environment}")
            await w.tx.execute(
                "DELETE FROM feature_environments WHERE environment = ? AND feature_name IN"
                " (SELECT name FROM features WHERE project_id = ?)",
                (environment, project_id),
            )
            await w.tx.execute(
                "UPDATE features SET revision = ? WHERE project_id = ?", (w.revision, project_id)
            )

    async def set_default_strategy(
        self, project_id: str, environment: str, strategy: Strategy
    ) -> str:
        """Unleash's ``default-strategy``: the same record as add-environment's
        ``defaultStrategy``; only ``flexibleRollout`` is accepted here, as in Unleash. Returns
        the record as saved (JSON)."""
        if strategy.name != FLEXIBLE_ROLLOUT:
            raise InvalidInput(
                'Only "flexibleRollout" strategy can be used as a default strategy for an'
                " environment"
            )
        async with self._db.transaction() as tx:
            if not await _exists(tx, "SELECT 1 FROM projects WHERE id = ?", project_id):
                raise NotFound("No project found")
            saved = strategy.model_dump_json(exclude_none=True)
            updated = await tx.execute(
                "UPDATE project_environments SET default_strategy = ?"
                " WHERE project_id = ? AND environment = ?",
                (saved, project_id, environment),
            )
            if updated != 1:
                raise NotFound(f"{project_id} does not have the environment {environment}")
        return saved

    async def all(self) -> list[tuple[str, str]]:
        """(id, name) of every project, by id."""
        rows = await self._db.fetch_all("SELECT id, name FROM projects ORDER BY id")
        return [(row[0], row[1]) for row in rows]

    async def environments(self) -> list[wire.EnvironmentOut]:
        """Every environment, in their sort order."""
        rows = await self._db.fetch_all(
            "SELECT name, type, enabled, sort_order FROM environments ORDER BY sort_order, name"
        )
        return [
            wire.EnvironmentOut(name=r[0], type=r[1], enabled=bool(r[2]), sortOrder=int(r[3]))
            for r in rows
        ]

    async def environment_names(self) -> list[str]:
        rows = await self._db.fetch_all("SELECT name FROM environments ORDER BY sort_order, name")
        return [row[0] for row in rows]

    async def environment_exists(self, name: str) -> bool:
        row = await self._db.fetch_one("SELECT 1 FROM environments WHERE name = ?", (name,))
        return row is not None

    async def project_exists(self, project_id: str) -> bool:
        row = await self._db.fetch_one("SELECT 1 FROM projects WHERE id = ?", (project_id,))
        return row is not None


async def _exists(tx: Transaction, sql: str, value: str) -> bool:
    return bool(await tx.fetch_all(sql, (value,)))
