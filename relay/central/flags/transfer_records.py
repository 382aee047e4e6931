"""What an export and an import read (``TransferStorage`` of ``transfer``, and
``ExportStorage`` of ``exporting``), in the SQL both backends speak: the flags a query
chooses, the tags, tag types and segments an export names, and the flags, segments and
tag types an import is checked against."""

from __future__ import annotations

from collections.abc import Sequence

from relay.central.flags.records import Reads, load_flags
from relay.core.flags import FlagRecord
from relay.wire import flags as wire
from relay.wire import transfer as t


class TransferRecords:
    async def chosen_count(self, db: Reads, query: t.ExportQuery) -> int:
        where, params = _chosen(query)
        found = await db.fetch_all(f"SELECT COUNT(*) FROM features WHERE {where}", params)
        return int(found[0][0]) if found else 0

    async def chosen(self, db: Reads, query: t.ExportQuery) -> list[FlagRecord]:
        where, params = _chosen(query)
        return await load_flags(db, where, params)

    async def tags_of(self, db: Reads, names: Sequence[str]) -> list[tuple[str, str, str]]:
        if not names:
            return []
        rows = await db.fetch_all(
            "SELECT feature_name, tag_type, tag_value FROM feature_tags"
            f" WHERE feature_name IN ({_marks(names)}) ORDER BY feature_name, tag_type, tag_value",
            list(names),
        )
        return [(row[0], row[1], row[2]) for row in rows]

    async def segment_names(self, db: Reads, ids: Sequence[int]) -> list[tuple[int, str]]:
        if not ids:
            return []
        rows = await db.fetch_all(
            f"SELECT id, name FROM segments WHERE id IN ({_marks(ids)}) ORDER BY id", list(ids)
        )
        return [(int(row[0]), row[1]) for row in rows]

    async def tag_types(self, db: Reads, names: Sequence[str]) -> list[wire.TagType]:
        if not names:
            return []
        rows = await db.fetch_all(
            "SELECT name, description, icon, color FROM tag_types"
            f" WHERE name IN ({_marks(names)}) ORDER BY name",
            list(names),
        )
        return [wire.TagType(name=r[0], description=r[1], icon=r[2], color=r[3]) for r in rows]

    async def flags_named(self, db: Reads, names: Sequence[str]) -> list[FlagRecord]:
        if not names:
            return []
        return await load_flags(db, f"name IN ({_marks(names)})", list(names))

    async def active(self, db: Reads, names: Sequence[str]) -> set[str]:
        if not names:
            return set()
        rows = await db.fetch_all(
            f"SELECT name FROM features WHERE archived_at IS NULL AND name IN ({_marks(names)})",
            list(names),
        )
        return {str(row[0]) for row in rows}

    async def segments_for(self, db: Reads, project: str) -> list[tuple[int, str]]:
        rows = await db.fetch_all(
            "SELECT id, name FROM segments WHERE project_id IS NULL OR project_id = ? ORDER BY id",
            (project,),
        )
        return [(int(row[0]), str(row[1])) for row in rows]

    async def tag_type_names(self, db: Reads) -> set[str]:
        return {str(row[0]) for row in await db.fetch_all("SELECT name FROM tag_types")}


def _chosen(query: t.ExportQuery) -> tuple[str, list[object]]:
    """The condition on ``features`` of the flags ``query`` chooses."""
    where, params = "archived_at IS NULL", list[object]()
    if query.tag is not None:
        where += " AND name IN (SELECT feature_name FROM feature_tags WHERE tag_value = ?)"
        params.append(query.tag)
    elif query.features:
        where += f" AND name IN ({_marks(query.features)})"
        params += query.features
    elif query.project is not None:
        where, params = f"{where} AND project_id = ?", [query.project]
    return where, params


def _marks(values: Sequence[object]) -> str:
    return ", ".join("?" * len(values))
