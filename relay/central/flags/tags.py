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
from typing import Protocol

from relay.central.flags.records import Reads
from relay.central.flags.writes import FlagWrite, Stored
from relay.core.audit import Actor, EventType
from relay.core.errors import Conflict, InvalidInput, NotFound
from relay.store.sql import Transaction
from relay.wire import flags as wire

MAX_TAGS = 100
MAX_TAG_TYPES = 1000


class TagStorage(Protocol):
    """Tags as stored (``tag_records.TagRecords``); ``db``: where a read looks, ``tx``: the
    write a change is made in."""

    async def project_of(self, db: Reads, flag: str) -> str | None:
        """The flag's project, None when there is no such flag."""
        ...

    async def of_flag(self, db: Reads, flag: str) -> list[wire.Tag]:
        """The flag's tags by type and value."""
        ...

    async def count(self, tx: Transaction, flag: str) -> int: ...

    async def add(self, tx: Transaction, flag: str, tag: wire.Tag, at: float) -> bool:
        """False when the flag has the tag already."""
        ...

    async def remove(self, tx: Transaction, flag: str, type: str, value: str) -> bool:
        """False when the flag does not have the tag."""
        ...

    async def types(self, db: Reads) -> list[wire.TagType]:
        """Every tag type, by name."""
        ...

    async def type_exists(self, db: Reads, name: str) -> bool: ...

    async def type_count(self, db: Reads) -> int: ...

    async def create_type(self, tx: Transaction, body: wire.TagType) -> bool:
        """False when a type of that name is there already."""
        ...

    async def delete_type(self, tx: Transaction, name: str) -> bool:
        """The type and its tags; False when there is no such type."""
        ...


class TagService(Stored[TagStorage]):
    async def of_flag(self, flag: str) -> list[wire.Tag]:
        """The flag's tags by type and value; a flag that does not exist is a 404."""
        if await self._records.project_of(self._db, flag) is None:
            raise NotFound(f"Could not find feature with name {flag}")
        return await self._records.of_flag(self._db, flag)

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
            return await self._update(w, flag, added, removed)

    async def replace(self, actor: Actor, flag: str, tags: Sequence[wire.Tag]) -> list[wire.Tag]:
        """The flag's tags become ``tags`` (an import makes them the file's); each tag
        gained or lost is an event."""
        async with self._write(actor) as w:
            current = await self._records.of_flag(w.tx, flag)
            removed = [tag for tag in current if tag not in tags]
            added = [tag for tag in tags if tag not in current]
            return await self._update(w, flag, added, removed)

    async def remove(self, actor: Actor, flag: str, type: str, value: str) -> None:
        """Removing a tag the flag does not have is a success, as in Unleash."""
        async with self._write(actor) as w:
            await self._untag(w, await self._exists(w, flag), flag, type, value)

    async def types(self) -> list[wire.TagType]:
        return await self._records.types(self._db)

    async def create_type(self, actor: Actor, body: wire.TagType) -> wire.TagType:
        async with self._write(actor) as w:
            if await self._records.type_count(w.tx) >= MAX_TAG_TYPES:
                raise InvalidInput(f"there are {MAX_TAG_TYPES} tag types, as many as are kept")
            if not await self._records.create_type(w.tx, body):
                raise Conflict(f"There's already a tag type called {body.name}")
            await w.event(EventType.TAG_TYPE_CREATED, after=body.model_dump(mode="json"))
        return body

    async def delete_type(self, actor: Actor, name: str) -> None:
        """Its tags go with it, as in Unleash; a type that is not there is a 404."""
        async with self._write(actor) as w:
            if not await self._records.delete_type(w.tx, name):
                raise NotFound("Could not find tag-type")
            await w.event(EventType.TAG_TYPE_DELETED, before={"name": name})

    async def _update(
        self, w: FlagWrite, flag: str, added: Sequence[wire.Tag], removed: Sequence[wire.Tag]
    ) -> list[wire.Tag]:
        """``added`` then ``removed`` in ``w``; the flag's tags after it, read in the write."""
        project = await self._exists(w, flag)
        for tag in added:
            if not await self._records.type_exists(w.tx, tag.type):
                raise InvalidInput(f"Tag type '{tag.type}' does not exist")
            if await self._records.add(w.tx, flag, tag, time.time()):
                await _tag_event(w, EventType.FEATURE_TAGGED, project, flag, tag)
        for tag in removed:
            await self._untag(w, project, flag, tag.type, tag.value)
        if await self._records.count(w.tx, flag) > MAX_TAGS:
            raise InvalidInput(f"would give {flag} more than {MAX_TAGS} tags", "/body")
        return await self._records.of_flag(w.tx, flag)

    async def _exists(self, w: FlagWrite, flag: str) -> str:
        """The flag's project; a flag that does not exist is a 404."""
        project = await self._records.project_of(w.tx, flag)
        if project is None:
            raise NotFound(f"Could not find feature {flag}")
        return project

    async def _untag(self, w: FlagWrite, project: str, flag: str, type: str, value: str) -> None:
        if await self._records.remove(w.tx, flag, type, value):
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
