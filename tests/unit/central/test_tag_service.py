"""TagService's rules over in-memory tags: 404s, events only for what changed, the bounds,
a refused write leaving nothing behind. tests/test_flag_model_api.py proves the SQL."""

from __future__ import annotations

from typing import Any

import pytest
from fake_flag_write import ACTOR, FakeWriter

from relay.central.flags import tags
from relay.central.flags.tags import TagService
from relay.core.audit import EventType
from relay.core.errors import Conflict, InvalidInput, NotFound
from relay.wire import flags as wire


class FakeTags:
    def __init__(self, **flags: str) -> None:
        self.projects = dict(flags)
        self.tags: dict[str, set[tuple[str, str]]] = {name: set() for name in flags}
        self.kinds: dict[str, wire.TagType] = {"simple": wire.TagType(name="simple")}

    async def project_of(self, db: Any, flag: str) -> str | None:
        return self.projects.get(flag)

    async def of_flag(self, db: Any, flag: str) -> list[wire.Tag]:
        return [wire.Tag(type=t, value=v) for t, v in sorted(self.tags.get(flag, ()))]

    async def count(self, tx: Any, flag: str) -> int:
        return len(self.tags[flag])

    async def add(self, tx: Any, flag: str, tag: wire.Tag, at: float) -> bool:
        had = len(self.tags[flag])
        self.tags[flag].add((tag.type, tag.value))
        return len(self.tags[flag]) > had

    async def remove(self, tx: Any, flag: str, type: str, value: str) -> bool:
        if (type, value) not in self.tags[flag]:
            return False
        self.tags[flag].discard((type, value))
        return True

    async def types(self, db: Any) -> list[wire.TagType]:
        return [self.kinds[name] for name in sorted(self.kinds)]

    async def type_exists(self, db: Any, name: str) -> bool:
        return name in self.kinds

    async def type_count(self, db: Any) -> int:
        return len(self.kinds)

    async def create_type(self, tx: Any, body: wire.TagType) -> bool:
        if body.name in self.kinds:
            return False
        self.kinds[body.name] = body
        return True

    async def delete_type(self, tx: Any, name: str) -> bool:
        if self.kinds.pop(name, None) is None:
            return False
        for held in self.tags.values():
            held -= {tag for tag in held if tag[0] == name}
        return True


def service(store: FakeTags) -> tuple[TagService, FakeWriter]:
    writer = FakeWriter(store)
    return TagService(writer, store), writer


def tag(value: str, type: str = "simple") -> wire.Tag:
    return wire.Tag(type=type, value=value)


async def test_a_flag_that_is_not_there_is_a_404_to_read_and_to_change() -> None:
    tags_of, _ = service(FakeTags(checkout="default"))
    with pytest.raises(NotFound, match="Could not find feature with name nope"):
        await tags_of.of_flag("nope")
    with pytest.raises(NotFound, match="Could not find feature nope"):
        await tags_of.add(ACTOR, "nope", tag("aa"))
    with pytest.raises(NotFound):
        await tags_of.remove(ACTOR, "nope", "simple", "aa")


async def test_only_the_tags_gained_or_lost_are_events_with_the_flags_project() -> None:
    store = FakeTags(checkout="shop")
    tags_of, writer = service(store)
    await tags_of.add(ACTOR, "checkout", tag("aa"))
    await tags_of.add(ACTOR, "checkout", tag("aa"))  # had it: a success, no event
    await tags_of.remove(ACTOR, "checkout", "simple", "zzz")  # never had it: the same
    after = await tags_of.update(ACTOR, "checkout", [tag("bb")], [tag("aa")])
    assert after == [tag("bb")]
    assert writer.log.types() == [
        EventType.FEATURE_TAGGED,
        EventType.FEATURE_TAGGED,
        EventType.FEATURE_UNTAGGED,
    ]
    _, untagged = writer.log.recorded[2]
    assert untagged == {
        "project": "shop",
        "feature": "checkout",
        "environment": None,
        "before": {"type": "simple", "value": "aa"},
        "after": None,
    }


async def test_replace_makes_the_flags_tags_the_ones_given() -> None:
    store = FakeTags(checkout="default")
    tags_of, writer = service(store)
    await tags_of.update(ACTOR, "checkout", [tag("aa"), tag("bb")], [])
    wanted = [tag("bb"), tag("cc")]
    assert await tags_of.replace(ACTOR, "checkout", wanted) == wanted
    assert writer.log.types()[2:] == [EventType.FEATURE_TAGGED, EventType.FEATURE_UNTAGGED]


async def test_a_tag_of_a_type_that_is_not_there_is_refused_and_nothing_changes() -> None:
    store = FakeTags(checkout="default")
    tags_of, writer = service(store)
    with pytest.raises(InvalidInput, match="Tag type 'team' does not exist"):
        await tags_of.update(ACTOR, "checkout", [tag("aa"), tag("xx", "team")], [])
    assert await tags_of.of_flag("checkout") == []
    assert writer.log.recorded == []


async def test_past_the_tags_a_flag_may_have_the_whole_update_is_refused() -> None:
    store = FakeTags(checkout="default")
    tags_of, _ = service(store)
    await tags_of.update(ACTOR, "checkout", [tag(f"t{i}") for i in range(tags.MAX_TAGS)], [])
    with pytest.raises(InvalidInput, match="more than 100 tags"):
        await tags_of.update(ACTOR, "checkout", [tag("one-more")], [])
    assert len(await tags_of.of_flag("checkout")) == tags.MAX_TAGS
    # one removed in the same call makes room
    after = await tags_of.update(ACTOR, "checkout", [tag("one-more")], [tag("t0")])
    assert len(after) == tags.MAX_TAGS


async def test_tag_types_are_unique_bounded_and_deleted_with_their_tags(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store = FakeTags(checkout="default")
    tags_of, writer = service(store)
    team = wire.TagType(name="team", description="who owns it")
    assert await tags_of.create_type(ACTOR, team) == team
    with pytest.raises(Conflict, match="already a tag type called team"):
        await tags_of.create_type(ACTOR, team)
    assert [t.name for t in await tags_of.types()] == ["simple", "team"]
    await tags_of.add(ACTOR, "checkout", tag("payments", "team"))
    await tags_of.delete_type(ACTOR, "team")
    assert await tags_of.of_flag("checkout") == []
    with pytest.raises(NotFound, match="Could not find tag-type"):
        await tags_of.delete_type(ACTOR, "team")
    monkeypatch.setattr(tags, "MAX_TAG_TYPES", 1)
    with pytest.raises(InvalidInput, match="there are 1 tag types"):
        await tags_of.create_type(ACTOR, wire.TagType(name="more"))
    assert writer.log.types() == [
        EventType.TAG_TYPE_CREATED,
        EventType.FEATURE_TAGGED,
        EventType.TAG_TYPE_DELETED,
    ]
