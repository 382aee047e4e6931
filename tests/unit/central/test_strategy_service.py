"""StrategyService's rules over in-memory flags: environments the project has, strategies
found by id, the order set in one write or not at all, an environment nothing serves
turned off, each change an event; variants of a flag's own (VariantService) beside them.
tests/test_strategies_api.py and tests/test_flag_model_api.py prove the SQL on SQLite
and PostgreSQL."""

from __future__ import annotations

import pytest
from fake_flag_write import ACTOR, FakeWriter

from relay.central.flags.strategies import StrategyService
from relay.central.flags.variants import VariantService
from relay.core.audit import EventType
from relay.core.errors import InvalidInput, InvalidOperation, NotFound
from relay.wire import flags as wire
from relay.wire.strategies import Strategy, StrategySortOrder, Variant


def writer() -> FakeWriter:
    fake = FakeWriter()
    fake.flags.add_project("default", "production", "development")
    fake.flags.add_flag("checkout")
    return fake


async def test_strategies_are_read_and_changed_only_where_the_project_has_the_environment() -> None:
    fake = writer()
    strategies = StrategyService(fake)
    with pytest.raises(NotFound, match="Feature checkout does not have environment staging"):
        await strategies.of_environment("default", "checkout", "staging")
    with pytest.raises(NotFound, match='no feature named "checkout" in project "shop"'):
        await strategies.of_environment("shop", "checkout", "production")
    with pytest.raises(InvalidInput, match="not added the current environment"):
        await strategies.add(ACTOR, "default", "checkout", "staging", Strategy(name="default"))
    added = await strategies.add(
        ACTOR, "default", "checkout", "production", Strategy(name="default")
    )
    assert await strategies.get("default", "checkout", "production", added.id) == added
    with pytest.raises(NotFound, match="Could not find strategy with id nope"):
        await strategies.get("default", "checkout", "production", "nope")
    assert fake.flags.flags["checkout"].revision == fake.revision


async def test_the_order_is_set_in_one_write_or_not_at_all() -> None:
    fake = writer()
    strategies = StrategyService(fake)
    ids = [
        (await strategies.add(ACTOR, "default", "checkout", "production", Strategy(name=n))).id
        for n in ("default", "userWithId", "remoteAddress")
    ]
    first, second, third = ids
    with pytest.raises(InvalidInput, match="has no strategy nope"):
        await strategies.set_sort_order(
            ACTOR,
            "default",
            "checkout",
            "production",
            [StrategySortOrder(id=third, sortOrder=0), StrategySortOrder(id="nope", sortOrder=1)],
        )
    listed = await strategies.of_environment("default", "checkout", "production")
    assert [s.id for s in listed] == ids
    with pytest.raises(InvalidInput, match="A strategy may be named once"):
        orders = [StrategySortOrder(id=first, sortOrder=1)] * 2
        await strategies.set_sort_order(ACTOR, "default", "checkout", "production", orders)
    orders = [StrategySortOrder(id=third, sortOrder=-1), StrategySortOrder(id=first, sortOrder=5)]
    await strategies.set_sort_order(ACTOR, "default", "checkout", "production", orders)
    listed = await strategies.of_environment("default", "checkout", "production")
    assert [s.id for s in listed] == [third, second, first]
    kind, fields = fake.log.recorded[-1]
    assert kind == EventType.STRATEGY_ORDER_CHANGED
    assert fields["before"] == {"strategyIds": ids}
    assert fields["after"] == {"strategyIds": [third, second, first]}


async def test_deleting_or_disabling_the_last_served_strategy_turns_the_flag_off() -> None:
    fake = writer()
    strategies = StrategyService(fake)
    one = await strategies.add(ACTOR, "default", "checkout", "production", Strategy(name="default"))
    two = await strategies.add(ACTOR, "default", "checkout", "production", Strategy(name="default"))
    await fake.flags.set_enabled(None, "checkout", "production", True)
    await strategies.delete(ACTOR, "default", "checkout", "production", one.id)
    assert fake.flags.flags["checkout"].environment("production").enabled
    disabled = Strategy(name="default", disabled=True)
    await strategies.replace(ACTOR, "default", "checkout", "production", two.id, disabled)
    assert not fake.flags.flags["checkout"].environment("production").enabled
    assert fake.log.types()[-3:] == [
        EventType.FEATURE_STRATEGY_REMOVE,
        EventType.FEATURE_STRATEGY_UPDATE,
        EventType.FEATURE_ENVIRONMENT_DISABLED,
    ]


async def test_a_patch_cannot_change_a_strategys_identity() -> None:
    fake = writer()
    strategies = StrategyService(fake)
    added = await strategies.add(
        ACTOR, "default", "checkout", "production", Strategy(name="default")
    )
    rename = wire.PatchOperation(op="replace", path="/id", value="mine")
    with pytest.raises(InvalidInput, match="id and featureName cannot be changed"):
        await strategies.patch(ACTOR, "default", "checkout", "production", added.id, [rename])
    titled = wire.PatchOperation(op="add", path="/title", value="everyone")
    patched = await strategies.patch(ACTOR, "default", "checkout", "production", added.id, [titled])
    assert (patched.id, patched.title) == (added.id, "everyone")


async def test_environment_variants_are_set_only_on_flags_that_have_them_or_by_batch() -> None:
    fake = writer()
    variants = VariantService(fake)
    blue = Variant(name="blue", weight=0)
    with pytest.raises(InvalidOperation, match="Environment variants deprecated"):
        await variants.replace(ACTOR, "default", "checkout", "production", [blue])
    with pytest.raises(InvalidInput, match="No environments provided"):
        await variants.push(ACTOR, "default", "checkout", wire.PushVariants(variants=[blue]))
    with pytest.raises(InvalidInput, match="Environment staging is not enabled"):
        body = wire.PushVariants(variants=[blue], environments=["staging"])
        await variants.push(ACTOR, "default", "checkout", body)
    red = Variant(name="red", weight=0)
    body = wire.PushVariants(variants=[red, blue], environments=["production", "development"])
    pushed = await variants.push(ACTOR, "default", "checkout", body)
    assert [(v.name, v.weight) for v in pushed] == [("red", 500), ("blue", 500)]
    stored = await variants.of_environment("default", "checkout", "development")
    assert [v.name for v in stored] == ["blue", "red"]
    after = await variants.replace(ACTOR, "default", "checkout", "production", [blue])
    assert [(v.name, v.weight) for v in after] == [("blue", 1000)]
    assert fake.log.types() == [EventType.FEATURE_ENVIRONMENT_VARIANTS_UPDATED] * 3
    assert fake.flags.flags["checkout"].revision == fake.revision
