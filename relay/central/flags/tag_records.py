"""Tags and tag types as stored (``TagStorage`` of ``tags``), in the SQL both backends
speak. Each verb reads or writes on the handle it is given: the database for a read, the
flag write's transaction for a change, so a change and its checks see one state."""

from __future__ import annotations

from relay.central.flags.records import Reads
from relay.store.sql import Transaction
from relay.wire import flags as wire


class TagRecords:
    async def project_of(self, db: Reads, flag: str) -> str | None:
        found = await db.fetch_all("SELECT project_id FROM features WHERE name = ?", (flag,))
        return str(found[0][0]) if found else None

    async def of_flag(self, db: Reads, flag: str) -> list[wire.Tag]:
        rows = await db.fetch_all(
            "SELECT tag_type, tag_value FROM feature_tags WHERE feature_name = ?"
            " ORDER BY tag_type, tag_value",
            (flag,),
        )
        return [wire.Tag(type=row[0], value=row[1]) for row in rows]

    async def count(self, tx: Transaction, flag: str) -> int:
        [row] = await tx.fetch_all(
            "SELECT count(*) FROM feature_tags WHERE feature_name = ?", (flag,)
        )
        return int(row[0])

    async def add(self, tx: Transaction, flag: str, tag: wire.Tag, at: float) -> bool:
        return bool(
            await tx.execute(
                "INSERT INTO feature_tags (feature_name, tag_type, tag_value, created_at)"
                " VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
                (flag, tag.type, tag.value, at),
            )
        )

    async def remove(self, tx: Transaction, flag: str, type: str, value: str) -> bool:
        return bool(
            await tx.execute(
                "DELETE FROM feature_tags"
                " WHERE feature_name = ? AND tag_type = ? AND tag_value = ?",
                (flag, type, value),
            )
        )

    async def types(self, db: Reads) -> list[wire.TagType]:
        rows = await db.fetch_all(
            "SELECT name, description, icon, color FROM tag_types ORDER BY name"
        )
        return [wire.TagType(name=r[0], description=r[1], icon=r[2], color=r[3]) for r in rows]

    async def type_exists(self, db: Reads, name: str) -> bool:
        return bool(await db.fetch_all("SELECT 1 FROM tag_types WHERE name = ?", (name,)))

    async def type_count(self, db: Reads) -> int:
        [row] = await db.fetch_all("SELECT count(*) FROM tag_types")
        return int(row[0])

    async def create_type(self, tx: Transaction, body: wire.TagType) -> bool:
        """False when a type of that name is there already."""
        created = await tx.execute(
            "INSERT INTO tag_types (name, description, icon, color) VALUES (?, ?, ?, ?)"
            " ON CONFLICT (name) DO NOTHING",
            (body.name, body.description, body.icon, body.color),
        )
        return created == 1

    async def delete_type(self, tx: Transaction, name: str) -> bool:
        """Its tags go with it (the foreign key cascades)."""
        return bool(await tx.execute("DELETE FROM tag_types WHERE name = ?", (name,)))
