"""Tags of flags and their types, Unleash's minimal set: a flag's tags (listed, added,
changed in one call, removed) and tag types (listed, created, deleted with their tags).
Tags are for people (the admin API and the page), never served to SDKs.

Each change is one write of ``writes.Writer`` (so the event log sees it with the other
flag changes); the flag's revision does not move, since what SDKs get does not change.
Bounded: ``MAX_TAGS`` per flag and ``MAX_TAG_TYPES`` in all (400 past them).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from relay.central.flags.writes import FlagWrite, Writer
from relay.core.errors import Conflict, InvalidInput, NotFound
from relay.wire import flags as wire

MAX_TAGS = 100
MAX_TAG_TYPES = 1000


class TagService:
    def __init__(self, writer: Writer) -> None:
        self._write = writer
        self._db = writer.db

    async def of_flag(self, flag: str) -> list[wire.Tag]:
        """The flag's tags by type and value (none for a flag that does not exist, as
        Unleash answers)."""
        rows = await self._db.fetch_all(
            "SELECT tag_type, tag_value FROM feature_tags WHERE feature_name = ?"
            " ORDER BY tag_type, tag_value",
            (flag,),
        )
        return [wire.Tag(type=row[0], value=row[1]) for row in rows]

    async def add(self, flag: str, tag: wire.Tag) -> wire.Tag:
        """Adding a tag the flag has is a success, as in Unleash."""
        await self.update(flag, [tag], [])
        return tag

    async def update(
        self, flag: str, added: Sequence[wire.Tag], removed: Sequence[wire.Tag]
    ) -> list[wire.Tag]:
        """``added`` then ``removed``, in one transaction; the flag's tags after it."""
        async with self._write() as w:
            await _exists(w, flag)
            for tag in added:
                if not await w.tx.fetch_all("SELECT 1 FROM tag_types WHERE name = ?", (tag.type,)):
                    raise NotFound(f"Could not find tag type {tag.type}")
                await w.tx.execute(
                    "INSERT INTO feature_tags (feature_name, tag_type, tag_value, created_at)"
                    " VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
                    (flag, tag.type, tag.value, time.time()),
                )
            for tag in removed:
                await _untag(w, flag, tag.type, tag.value)
            [count] = await w.tx.fetch_all(
                "SELECT count(*) FROM feature_tags WHERE feature_name = ?", (flag,)
            )
            if int(count[0]) > MAX_TAGS:
                raise InvalidInput(f"would give {flag} more than {MAX_TAGS} tags", "/body")
        return await self.of_flag(flag)

    async def remove(self, flag: str, type: str, value: str) -> None:
        """Removing a tag the flag does not have is a success, as in Unleash."""
        async with self._write() as w:
            await _exists(w, flag)
            await _untag(w, flag, type, value)

    async def types(self) -> list[wire.TagType]:
        rows = await self._db.fetch_all(
            "SELECT name, description, icon, color FROM tag_types ORDER BY name"
        )
        return [wire.TagType(name=r[0], description=r[1], icon=r[2], color=r[3]) for r in rows]

    async def create_type(self, body: wire.TagType) -> wire.TagType:
        async with self._write() as w:
            [count] = await w.tx.fetch_all("SELECT count(*) FROM tag_types")
            if int(count[0]) >= MAX_TAG_TYPES:
                raise InvalidInput(f"there are {MAX_TAG_TYPES} tag types, as many as are kept")
            created = await w.tx.execute(
                "INSERT INTO tag_types (name, description, icon, color) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (name) DO NOTHING",
                (body.name, body.description, body.icon, body.color),
            )
            if created != 1:
                raise Conflict(f"There's already a tag type called {body.name}")
        return body

    async def delete_type(self, name: str) -> None:
        """Its tags go with it, as in Unleash."""
        async with self._write() as w:
            await w.tx.execute("DELETE FROM tag_types WHERE name = ?", (name,))


async def _exists(w: FlagWrite, flag: str) -> None:
    if not await w.tx.fetch_all("SELECT 1 FROM features WHERE name = ?", (flag,)):
        raise NotFound(f"Could not find feature {flag}")


async def _untag(w: FlagWrite, flag: str, type: str, value: str) -> None:
    await w.tx.execute(
        "DELETE FROM feature_tags WHERE feature_name = ? AND tag_type = ? AND tag_value = ?",
        (flag, type, value),
    )
