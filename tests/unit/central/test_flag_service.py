"""FlagService's rules over in-memory flags: names taken (archived ones too), flags read in
their own project, only the fields named changed, the archive (not while others depend on
a flag; revived off everywhere; deleted only from it), a flag turned on given a strategy.
tests/test_flags_api.py proves the SQL of ``flag_records`` on SQLite and PostgreSQL."""

from __future__ import annotations

import dataclasses

import pytest
from fake_flag_storage import FakeFlagRecords
from fake_flag_write import ACTOR, FakeWriter

from relay.central.flags.flags import FlagService
from relay.core.audit import EventType
from relay.core.errors import Conflict, InvalidInput, InvalidOperation, NotFound
from relay.core.flags import Dependency
from relay.wire import flags as wire


def service() -> tuple[FlagService, FakeWriter]:
    writer = FakeWriter()
    writer.flags.add_project("default", "development", "production")
    writer.flags.add_project("shop", "production")
    return FlagService(writer, FakeFlagRecords(writer.flags)), writer


async def test_a_name_is_taken_by_any_flag_and_a_project_must_exist() -> None:
    flags, writer = service()
    created = await flags.create(ACTOR, "default", wire.CreateFlag(name="checkout"))
    assert [e.name for e in created.environments] == ["development", "production"]
    with pytest.raises(Conflict, match=r"^A flag with that name already exists"):
        await flags.create(ACTOR, "shop", wire.CreateFlag(name="checkout"))
    await flags.archive(ACTOR, "default", "checkout")
    with pytest.raises(Conflict, match="An archived flag with that name already exists"):
        await flags.create(ACTOR, "default", wire.CreateFlag(name="checkout"))
    with pytest.raises(NotFound, match="Active project with id nope does not exist"):
        await flags.create(ACTOR, "nope", wire.CreateFlag(name="search"))
    assert writer.log.types() == [EventType.FEATURE_CREATED, EventType.FEATURE_ARCHIVED]


async def test_a_flag_is_read_in_its_own_project_and_archived_ones_only_when_asked() -> None:
    flags, _ = service()
    await flags.create(ACTOR, "default", wire.CreateFlag(name="checkout"))
    with pytest.raises(NotFound, match='no feature named "checkout" in project "shop"'):
        await flags.get("shop", "checkout")
    assert await flags.project_of("checkout") == "default"
    with pytest.raises(NotFound, match="Feature nope does not exist"):
        await flags.project_of("nope")
    await flags.archive(ACTOR, "default", "checkout")
    assert (await flags.get("default", "checkout")).archived
    with pytest.raises(NotFound, match="Could not find feature flag with name checkout"):
        await flags.get("default", "checkout", archived=False)
    assert await flags.of_project("default") == []
    with pytest.raises(NotFound, match="No project found"):
        await flags.of_project("nope", known=True)
    with pytest.raises(NotFound, match="No project found"):
        await flags.archived("nope", 0, 10)
    assert [f.name for f in await flags.archived(None, 0, 10)] == ["checkout"]


async def test_an_update_changes_the_fields_named_and_never_the_name() -> None:
    flags, writer = service()
    await flags.create(ACTOR, "default", wire.CreateFlag(name="checkout", description="old"))
    with pytest.raises(InvalidInput, match="Cannot change name of feature flag"):
        await flags.update(ACTOR, "default", "checkout", wire.UpdateFlag(name="other"))
    after = await flags.update(ACTOR, "default", "checkout", wire.UpdateFlag(stale=True))
    assert (after.stale, after.description) == (True, "old")
    stale = wire.PatchOperation(op="replace", path="/description", value="new")
    patched = await flags.patch(ACTOR, "default", "checkout", [stale])
    assert (patched.stale, patched.description) == (True, "new")
    kind, fields = writer.log.recorded[-1]
    assert kind == EventType.FEATURE_METADATA_UPDATED
    assert (fields["before"]["description"], fields["after"]["description"]) == ("old", "new")
    assert writer.flags.flags["checkout"].revision == writer.revision


async def test_the_archive_keeps_dependencies_whole_and_revives_flags_off() -> None:
    flags, writer = service()
    for name in ("parent", "child"):
        await flags.create(ACTOR, "default", wire.CreateFlag(name=name))
    writer.flags.flags["child"] = dataclasses.replace(
        writer.flags.flags["child"], dependencies=(Dependency("parent", True, ()),)
    )
    with pytest.raises(InvalidOperation, match="other features depend on it"):
        await flags.archive(ACTOR, "default", "parent")
    await flags.set_enabled(ACTOR, "default", "child", "production", True)
    await flags.archive(ACTOR, "default", "child")
    await flags.archive(ACTOR, "default", "child")  # archived already: no second event
    assert writer.flags.flags["child"].dependencies == ()
    await flags.delete(ACTOR, "parent")  # not archived: left alone
    await flags.revive(ACTOR, "child")
    revived = await flags.get("default", "child")
    assert not revived.archived
    assert not any(e.enabled for e in revived.environments)
    await flags.archive(ACTOR, "default", "child")
    await flags.delete(ACTOR, "child")
    assert set(writer.flags.flags) == {"parent"}
    with pytest.raises(NotFound, match="Feature child does not exist"):
        await flags.revive(ACTOR, "child")
    assert writer.log.types()[-5:] == [
        EventType.FEATURE_ENVIRONMENT_ENABLED,
        EventType.FEATURE_ARCHIVED,
        EventType.FEATURE_REVIVED,
        EventType.FEATURE_ARCHIVED,
        EventType.FEATURE_DELETED,
    ]


async def test_a_flag_turned_on_with_nothing_serving_gets_the_projects_default() -> None:
    flags, writer = service()
    writer.flags.projects["shop"]["production"] = '{"name": "userWithId", "parameters": {}}'
    await flags.create(ACTOR, "default", wire.CreateFlag(name="checkout"))
    await flags.create(ACTOR, "shop", wire.CreateFlag(name="basket"))
    with pytest.raises(NotFound, match="Could not find environment staging for feature"):
        await flags.set_enabled(ACTOR, "default", "checkout", "staging", True)
    await flags.set_enabled(ACTOR, "default", "checkout", "production", True)
    await flags.set_enabled(ACTOR, "shop", "basket", "production", True)
    on = await flags.environment("default", "checkout", "production")
    assert on.enabled
    assert [(s.name, s.parameters["rollout"]) for s in on.strategies] == [
        ("flexibleRollout", "100")
    ]
    basket = await flags.environment("shop", "basket", "production")
    assert [s.name for s in basket.strategies] == ["userWithId"]
    # a default saved by an older version that today's checks refuse is the operator's 400
    writer.flags.projects["shop"]["production"] = '{"name": "x", "sortOrder": 1.5}'
    await flags.create(ACTOR, "shop", wire.CreateFlag(name="wishlist"))
    with pytest.raises(InvalidInput, match="is no longer valid"):
        await flags.set_enabled(ACTOR, "shop", "wishlist", "production", True)


async def test_a_page_of_flags_follows_project_and_name_and_filters_by_name() -> None:
    flags, _ = service()
    for project, name in [("shop", "Basket"), ("default", "checkout"), ("default", "search")]:
        await flags.create(ACTOR, project, wire.CreateFlag(name=name))
    first = await flags.page(None, 2)
    assert [(f.project, f.name) for f in first] == [("default", "checkout"), ("default", "search")]
    rest = await flags.page(("default", "search"), 2)
    assert [f.name for f in rest] == ["Basket"]
    assert [f.name for f in await flags.page(None, 10, "BASK")] == ["Basket"]
