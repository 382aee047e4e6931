"""Flags' dependencies on their parents as stored (``DependencyStorage`` of
``dependencies``), in the SQL both backends speak."""

from __future__ import annotations

import json
from collections.abc import Sequence

from relay.central.flags.records import Reads, load_flag
from relay.core.flags import FlagRecord
from relay.store.sql import Transaction


class DependencyRecords:
    async def flag(self, db: Reads, name: str) -> FlagRecord | None:
        return await load_flag(db, name)

    async def set_parent(
        self, tx: Transaction, child: str, parent: str, enabled: bool, variants: Sequence[str]
    ) -> None:
        await tx.execute("DELETE FROM feature_dependencies WHERE child = ?", (child,))
        await tx.execute(
            "INSERT INTO feature_dependencies (child, parent, enabled, variants)"
            " VALUES (?, ?, ?, ?)",
            (child, parent, int(enabled), json.dumps(list(variants))),
        )

    async def remove(self, tx: Transaction, child: str, parent: str | None) -> bool:
        sql, params = "DELETE FROM feature_dependencies WHERE child = ?", [child]
        if parent is not None:
            sql, params = f"{sql} AND parent = ?", [child, parent]
        return bool(await tx.execute(sql, params))

    async def possible_parents(self, db: Reads, project: str, child: str, most: int) -> list[str]:
        rows = await db.fetch_all(
            "SELECT f.name FROM features f"
            " LEFT JOIN feature_dependencies d ON d.child = f.name"
            " WHERE f.project_id = ? AND f.name <> ? AND d.child IS NULL"
            " AND f.archived_at IS NULL"
            " AND EXISTS (SELECT 1 FROM features c WHERE c.name = ? AND c.project_id = ?)"
            " ORDER BY f.name LIMIT ?",
            (project, child, child, project, most),
        )
        return [str(row[0]) for row in rows]

    async def any(self, db: Reads) -> bool:
        return bool(await db.fetch_all("SELECT 1 FROM feature_dependencies LIMIT 1"))
