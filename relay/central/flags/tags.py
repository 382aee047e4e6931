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

from relay.central.flags.records import Reads
from relay.central.flags.writes import FlagWrite, Writer
from relay.core.audit import Actor, EventType
from relay.core.errors import Conflict, InvalidInput, NotFound
from relay.wire import flags as wire

MAX_TAGS = 100
MAX_TAG_TYPES = 1000


class TagService:
    def __init__(self, writer: Writer) -> None:
        self._write = writer
        self._db = writer.db

    async def of_flag(self, flag: str) -> list[wire.Tag]:
        """The flag's tags by type and value; a flag that does not exist is a 404."""
        if not await self._db.fetch_all("SELECT 1 FROM features WHERE name = ?", (flag,)):
            raise NotFound(f"Could not find feature with name {flag}")
        return await _tags(self._db, flag)

    async def add(self, actor: Actor, flag: str, tag: wire.Tag) -> wire.Tag:
        """Adding a tag the flag has is a success, as in Unleash."""
        await self.update(actor, flag, [tag], [])
        return tag

    async def update(
        self, actor: Actor, flag: str, added: Sequence[wire.Tag], removed: Sequence[wire.Tag]
    ) -> list[wire.Tag]:
        """``added`` then ``removed``, in one transaction; the flag's tags after it. Each
        tag the flag gains or loses is an event."""
        async with self._write(actor) as w:
            return await _update(w, flag, added, removed)

    async def replace(self, actor: Actor, flag: str, tags: Sequence[wire.Tag]) -> list[wire.Tag]:
        """The flag's tags become ``tags`` (an import makes them the file's); each tag
        gained or lost is an event."""
        async with self._write(actor) as w:
            current = await _tags(w.tx, flag)
            removed = [tag for tag in current if tag not in tags]
            return await _update(w, flag, [tag for tag in tags if tag not in current], removed)

    async def remove(self, actor: Actor, flag: str, type: str, value: str) -> None:
        """Removing a tag the flag does not have is a success, as in Unleash."""
        async with self._write(actor) as w:
            await _untag(w, await _exists(w, flag), flag, type, value)

    async def types(self) -> list[wire.TagType]:
        rows = await self._db.fetch_all(
            "SELECT name, description, icon, color FROM tag_types ORDER BY name"
        )
        return [wire.TagType(name=r[0], description=r[1], icon=r[2], color=r[3]) for r in rows]

    async def create_type(self, actor: Actor, body: wire.TagType) -> wire.TagType:
        async with self._write(actor) as w:
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
            await w.event(EventType.TAG_TYPE_CREATED, after=body.model_dump(mode="json"))
        return body

    async def delete_type(self, actor: Actor, name: str) -> None:
        """Its tags go with it, as in Unleash; a type that is not there is a 404."""
        async with self._write(actor) as w:
            if not await w.tx.execute("DELETE FROM tag_types WHERE name = ?", (name,)):
                raise NotFound("Could not find tag-type")
            await w.event(EventType.TAG_TYPE_DELETED, before={"name": name})


async def _update(
    w: FlagWrite, flag: str, added: Sequence[wire.Tag], removed: Sequence[wire.Tag]
) -> list[wire.Tag]:
    """``added`` then ``removed`` in ``w``; the flag's tags after it, read in the write."""
    project = await _exists(w, flag)
    for tag in added:
        if not await w.tx.fetch_all("SELECT 1 FROM tag_types WHERE name = ?", (tag.type,)):
            raise InvalidInput(f"Tag type '{tag.type}' does not exist")
        if await w.tx.execute(
            "INSERT INTO feature_tags (feature_name, tag_type, tag_value, created_at)"
            " VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
            (flag, tag.type, tag.value, time.time()),
        ):
            await _tag_event(w, EventType.FEATURE_TAGGED, project, flag, tag)
    for tag in removed:
        await _untag(w, project, flag, tag.type, tag.value)
    [count] = await w.tx.fetch_all(
        "SELECT count(*) FROM feature_tags WHERE feature_name = ?", (flag,)
    )
    if int(count[0]) > MAX_TAGS:
        raise InvalidInput(f"would give {flag} more than {MAX_TAGS} tags", "/body")
    return await _tags(w.tx, flag)


async def _tags(db: Reads, flag: str) -> list[wire.Tag]:
    rows = await db.fetch_all(
        "SELECT tag_type, tag_value FROM feature_tags WHERE feature_name = ?"
        " ORDER BY tag_type, tag_value",
        (flag,),
    )
    return [wire.Tag(type=row[0], value=row[1]) for row in rows]


async def _exists(w: FlagWrite, flag: str) -> str:
    """The flag's project; a flag that does not exist is a 404."""
    found = await w.tx.fetch_all("SELECT project_id FROM features WHERE name = ?", (flag,))
    if not found:
        raise NotFound(f"Could not find feature {flag}")
    return str(found[0][0])


async def _untag(w: FlagWrite, project: str, flag: str, type: str, value: str) -> None:
    if await w.tx.execute(
        "DELETE FROM feature_tags WHERE feature_name = ? AND tag_type = ? AND tag_value = ?",
        (flag, type, value),
    ):
        tag = wire.Tag(type=type, value=value)
        await _tag_event(w, EventType.FEATURE_UNTAGGED, project, flag, tag)


async def _tag_event(w: FlagWrite, type: EventType, project: str, flag: str, tag: wire.Tag) -> None:
    shown = tag.model_dump(mode="json")
    tagged = type is EventType.FEATURE_TAGGED
    await w.event(
        type,
        project=project,
        feature=flag,
        before=None if tagged else shown,
        after=shown if tagged else None,
    )
