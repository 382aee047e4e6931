"""Flags as stored (``FlagStorage`` of ``flags``), in the SQL both backends speak: a flag
created, its fields changed, archived, revived and deleted; flags listed by project, a
page at a time, and the archive; the environments a project has."""

from __future__ import annotations

import time
from collections.abc import Mapping

from relay.central.flags.records import Reads, load_flags
from relay.core.flags import FlagRecord
from relay.store.sql import Transaction
from relay.wire import flags as wire


class FlagRecords:
    async def create(
        self, tx: Transaction, project: str, body: wire.CreateFlag, revision: int
    ) -> bool:
        created = await tx.execute(
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
                revision,
            ),
        )
        return created == 1

    async def archived(self, db: Reads, name: str) -> bool:
        rows = await db.fetch_all("SELECT archived_at FROM features WHERE name = ?", (name,))
        return bool(rows) and rows[0][0] is not None

    async def project_of(self, db: Reads, name: str) -> str | None:
        rows = await db.fetch_all("SELECT project_id FROM features WHERE name = ?", (name,))
        return str(rows[0][0]) if rows else None

    async def of_project(self, db: Reads, project: str) -> list[FlagRecord]:
        return await load_flags(db, "project_id = ? AND archived_at IS NULL", (project,))

    async def page(
        self, db: Reads, after: tuple[str, str] | None, limit: int, contains: str
    ) -> list[FlagRecord]:
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
        return await load_flags(db, chosen, [*params, limit])

    async def archive_page(
        self, db: Reads, project: str | None, offset: int, limit: int
    ) -> list[FlagRecord]:
        where, params = "archived_at IS NOT NULL", list[object]()
        if project is not None:
            where, params = f"{where} AND project_id = ?", [project]
        chosen = (
            f"name IN (SELECT name FROM features WHERE {where}"
            " ORDER BY archived_at DESC, name LIMIT ? OFFSET ?)"
        )
        return await load_flags(db, chosen, [*params, limit, offset], whole=False)

    async def environments(self, db: Reads, project: str) -> list[tuple[str, str, int]]:
        rows = await db.fetch_all(
            "SELECT e.name, e.type, e.sort_order FROM project_environments pe"
            " JOIN environments e ON e.name = pe.environment WHERE pe.project_id = ?"
            " ORDER BY e.sort_order, e.name",
            (project,),
        )
        return [(row[0], row[1], int(row[2])) for row in rows]

    async def update(
        self, tx: Transaction, name: str, changed: Mapping[str, object], revision: int
    ) -> None:
        columns = {k: int(v) if isinstance(v, bool) else v for k, v in changed.items()}
        sets = "".join(f"{_COLUMNS[field]} = ?, " for field in columns)
        await tx.execute(
            f"UPDATE features SET {sets}revision = ? WHERE name = ?",
            (*columns.values(), revision, name),
        )

    async def archive(self, tx: Transaction, name: str, revision: int) -> None:
        await tx.execute("DELETE FROM feature_dependencies WHERE child = ?", (name,))
        await tx.execute(
            "UPDATE features SET archived_at = ?, revision = ? WHERE name = ?",
            (time.time(), revision, name),
        )

    async def revive(self, tx: Transaction, name: str, revision: int) -> None:
        await tx.execute(
            "UPDATE features SET archived_at = NULL, revision = ? WHERE name = ?",
            (revision, name),
        )
        await tx.execute(
            "UPDATE feature_environments SET enabled = 0 WHERE feature_name = ?", (name,)
        )

    async def delete(self, tx: Transaction, name: str) -> None:
        await tx.execute("DELETE FROM features WHERE name = ?", (name,))


_COLUMNS = {
    "description": "description",
    "type": "type",
    "stale": "stale",
    "impression_data": "impression_data",
}
"""The columns of the fields ``update`` changes (and no other name reaches the SQL)."""
