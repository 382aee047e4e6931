"""TagService's rules over in-memory tags: 404s, events only for what changed, the bounds,
a refused write leaving nothing behind. tests/test_flag_model_api.py proves the SQL."""

from __future__ import annotations

import pytest
from fake_flag_storage import FakeTags
from fake_flag_write import ACTOR, FakeWriter

from relay.central.flags import tags
from relay.central.flags.tags import TagService
from relay.core.audit import EventType
from relay.core.errors import Conflict, InvalidInput, NotFound
from relay.wire import flags as wire


def service(*flags: str) -> tuple[TagService, FakeWriter]:
    """Tags of ``flags`` (of project default, unless named ``name@project``)."""
    writer = FakeWriter()
    for flag in flags:
        name, _, project = flag.partition("@")
        writer.flags.add_flag(name, project or "default")
    return TagService(writer, FakeTags(writer.flags)), writer


def tag(value: str, type: str = "simple") -> wire.Tag:
    return wire.Tag(type=type, value=value)


async def test_a_flag_that_is_not_there_is_a_404_to_read_and_to_change() -> None:
    tags_of, _ = service("checkout")
    with pytest.raises(NotFound, match="Could not find feature with name nope"):
        await tags_of.of_flag("nope")
    with pytest.raises(NotFound, match="Could not find feature nope"):
        await tags_of.add(ACTOR, "nope", tag("aa"))
    with pytest.raises(NotFound):
        await tags_of.remove(ACTOR, "nope", "simple", "aa")


async def test_only_the_tags_gained_or_lost_are_events_with_the_flags_project() -> None:
    tags_of, writer = service("checkout@shop")
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
    tags_of, writer = service("checkout")
    await tags_of.update(ACTOR, "checkout", [tag("aa"), tag("bb")], [])
    wanted = [tag("bb"), tag("cc")]
    assert await tags_of.replace(ACTOR, "checkout", wanted) == wanted
    assert writer.log.types()[2:] == [EventType.FEATURE_TAGGED, EventType.FEATURE_UNTAGGED]


async def test_a_tag_of_a_type_that_is_not_there_is_refused_and_nothing_changes() -> None:
    tags_of, writer = service("checkout")
    with pytest.raises(InvalidInput, match="Tag type 'team' does not exist"):
        await tags_of.update(ACTOR, "checkout", [tag("aa"), tag("xx", "team")], [])
    assert await tags_of.of_flag("checkout") == []
    assert writer.log.recorded == []


async def test_past_the_tags_a_flag_may_have_the_whole_update_is_refused() -> None:
    tags_of, _ = service("checkout")
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
    tags_of, writer = service("checkout")
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
