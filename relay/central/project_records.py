"""Projects' rows in the central database (``projects``, ``project_environments``, and
what a project's deletion takes: its flags, segments and keys), on either backend: the
``ProjectRecords`` of ``relay.central.projects``. A change is one transaction with its
events; one that flags see is a flag write (``relay.central.flags.writes``)."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime

from typing_extensions import Unpack

from relay.central.event_records import EventLog
from relay.central.flags.records import Reads
from relay.central.flags.writes import FlagWrite, Writer
from relay.central.key_records import principal_of
from relay.core.audit import About, Actor, EventType
from relay.core.keys import Principal
from relay.store.sql import Database, Transaction
from relay.wire import admin as wire


class SqlProjectRecords:
    def __init__(self, db: Database, write: Writer) -> None:
        """``write``: the flag writer; its event log is the projects' too."""
        self._db = db
        self._write = write

    async def find(self, project_id: str) -> wire.ProjectOut | None:
        return await _project(self._db, project_id)

    async def listed(self) -> list[wire.ProjectListed]:
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
        rows = await self._db.fetch_all("SELECT id, name FROM projects ORDER BY id")
        return [(row[0], row[1]) for row in rows]

    async def environment_names(self) -> list[str]:
        rows = await self._db.fetch_all("SELECT name FROM environments ORDER BY sort_order, name")
        return [row[0] for row in rows]

    async def environment_exists(self, name: str) -> bool:
        row = await self._db.fetch_one("SELECT 1 FROM environments WHERE name = ?", (name,))
        return row is not None

    @asynccontextmanager
    async def change(self, actor: Actor) -> AsyncIterator[SqlProjectChange]:
        async with self._db.transaction() as tx:
            yield SqlProjectChange(tx, actor, self._write.events)

    @asynccontextmanager
    async def flag_change(self, actor: Actor) -> AsyncIterator[SqlProjectFlagChange]:
        async with self._write(actor) as w:
            yield SqlProjectFlagChange(w)


class SqlProjectChange:
    def __init__(self, tx: Transaction, actor: Actor, events: EventLog) -> None:
        self._tx = tx
        self._actor = actor
        self._events = events

    async def find(self, project_id: str) -> wire.ProjectOut | None:
        return await _project(self._tx, project_id)

    async def exists(self, project_id: str) -> bool:
        return await self._any("SELECT 1 FROM projects WHERE id = ?", project_id)

    async def environment_exists(self, name: str) -> bool:
        return await self._any("SELECT 1 FROM environments WHERE name = ?", name)

    async def insert(self, body: wire.CreateProject) -> bool:
        created = await self._tx.execute(
            "INSERT INTO projects (id, name, description, created_at) VALUES (?, ?, ?, ?)"
            " ON CONFLICT (id) DO NOTHING",
            (body.id, body.name, body.description, time.time()),
        )
        return created == 1

    async def update(self, project_id: str, name: str, description: str | None) -> None:
        await self._tx.execute(
            "UPDATE projects SET name = ?, description = ? WHERE id = ?",
            (name, description, project_id),
        )

    async def hold(self, project_id: str) -> None:
        # an update that changes nothing locks the row on PostgreSQL
        await self._tx.execute("UPDATE projects SET name = name WHERE id = ?", (project_id,))

    async def has_active_flags(self, project_id: str) -> bool:
        return await self._any(
            "SELECT 1 FROM features WHERE project_id = ? AND archived_at IS NULL LIMIT 1",
            project_id,
        )

    async def delete_flags(self, project_id: str) -> list[str]:
        rows = await self._tx.fetch_all(
            "SELECT name FROM features WHERE project_id = ? ORDER BY name", (project_id,)
        )
        await self._tx.execute("DELETE FROM features WHERE project_id = ?", (project_id,))
        return [row[0] for row in rows]

    async def keys_naming(self, project_id: str) -> list[tuple[str, Principal]]:
        rows = await self._tx.fetch_all(
            "SELECT id, secret_hash, display, type, environment, projects, token_name"
            " FROM api_tokens WHERE projects LIKE ?",
            (f"%{json.dumps(project_id)}%",),
        )
        return [(row["id"], principal_of(row)) for row in rows]

    async def set_key_projects(self, key_id: str, projects: list[str]) -> None:
        await self._tx.execute(
            "UPDATE api_tokens SET projects = ? WHERE id = ?", (json.dumps(projects), key_id)
        )

    async def delete_key(self, key_id: str) -> None:
        await self._tx.execute("DELETE FROM api_tokens WHERE id = ?", (key_id,))

    async def keys_changed(self) -> None:
        await self._tx.execute("UPDATE key_revision SET revision = revision + 1 WHERE id = 1")

    async def delete(self, project_id: str) -> None:
        await self._tx.execute("DELETE FROM projects WHERE id = ?", (project_id,))

    async def enable(
        self,
        project_id: str,
        environment: str,
        change_requests: bool,
        default_strategy: str | None,
    ) -> bool:
        created = await self._tx.execute(
            "INSERT INTO project_environments (project_id, environment,"
            " change_requests_enabled, default_strategy, created_at)"
            " VALUES (?, ?, ?, ?, ?) ON CONFLICT (project_id, environment) DO NOTHING",
            (project_id, environment, int(change_requests), default_strategy, time.time()),
        )
        return created == 1

    async def enabled_strategy(self, project_id: str, environment: str) -> tuple[bool, str | None]:
        rows = await self._tx.fetch_all(
            "SELECT default_strategy FROM project_environments"
            " WHERE project_id = ? AND environment = ?",
            (project_id, environment),
        )
        return (True, rows[0][0] or None) if rows else (False, None)

    async def set_default_strategy(self, project_id: str, environment: str, saved: str) -> None:
        await self._tx.execute(
            "UPDATE project_environments SET default_strategy = ?"
            " WHERE project_id = ? AND environment = ?",
            (saved, project_id, environment),
        )

    async def event(self, type: EventType, project: str, **about: Unpack[About]) -> None:
        await self._events.record(self._tx, self._actor, type, project=project, **about)

    async def _any(self, sql: str, value: str) -> bool:
        return bool(await self._tx.fetch_all(sql, (value,)))


class SqlProjectFlagChange(SqlProjectChange):
    """A change that flags see: a flag write, with its revision and change log."""

    def __init__(self, write: FlagWrite) -> None:
        super().__init__(write.tx, write.actor, write.log)
        self._write = write

    async def delete_segments(self, project_id: str) -> None:
        segments = await self._tx.fetch_all(
            "DELETE FROM segments WHERE project_id = ? RETURNING id", (project_id,)
        )
        self._write.deleted_segments.extend((int(row[0]), project_id) for row in segments)

    async def disable(self, project_id: str, environment: str) -> bool:
        removed = await self._tx.execute(
            "DELETE FROM project_environments WHERE project_id = ? AND environment = ?",
            (project_id, environment),
        )
        if removed != 1:
            return False
        await self._tx.execute(
            "DELETE FROM feature_environments WHERE environment = ? AND feature_name IN"
            " (SELECT name FROM features WHERE project_id = ?)",
            (environment, project_id),
        )
        await self._tx.execute(
            "UPDATE features SET revision = ? WHERE project_id = ?",
            (self._write.revision, project_id),
        )
        return True


async def _project(db: Reads, project_id: str) -> wire.ProjectOut | None:
    rows = await db.fetch_all(
        "SELECT id, name, description, created_at FROM projects WHERE id = ?", (project_id,)
    )
    if not rows:
        return None
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
