"""FlagWrite's checks and shared changes over in-memory flags: which flag a write may
change, where a strategy goes in the order, which segments it may name, how much one
environment may hold, and an environment turned off when nothing serves it. The SQL of
``write_records`` is proven by the API tests on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest
from fake_flag_write import ACTOR, FakeWriter

from relay.central.flags import writes
from relay.core.audit import EventType
from relay.core.errors import InvalidInput, NotFound
from relay.core.flags import MAX_ENVIRONMENT_BYTES
from relay.wire.strategies import Strategy


def writer() -> FakeWriter:
    fake = FakeWriter()
    fake.flags.add_project("default", "production")
    fake.flags.add_project("shop", "production")
    fake.flags.add_flag("checkout")
    return fake


def rollout(**fields: object) -> Strategy:
    return Strategy.model_validate({"name": "flexibleRollout", **fields})


async def test_a_flag_is_found_only_in_its_own_project_and_not_when_archived() -> None:
    fake = writer()
    fake.flags.add_flag("old", archived_at=1.0)
    async with fake(ACTOR) as w:
        assert (await w.flag("default", "checkout")).name == "checkout"
        with pytest.raises(NotFound, match='in project "shop", but there\'s a feature with'):
            await w.flag("shop", "checkout")
        with pytest.raises(NotFound, match=r'no feature named "nope" in project "default"$'):
            await w.flag("default", "nope")
        with pytest.raises(InvalidInput, match="archived features"):
            await w.flag("default", "old")
        assert (await w.flag("default", "old", writable=False)).archived_at == 1.0
        with pytest.raises(NotFound, match="Active project with id nope does not exist"):
            await w.project_exists("nope")


async def test_strategies_go_after_the_last_unless_an_order_is_given_capped_at_the_integer() -> (
    None
):
    fake = writer()
    async with fake(ACTOR) as w:
        flag = await w.flag("default", "checkout")
        await w.add_strategy(flag, "production", rollout())
        await w.add_strategy(flag, "production", rollout(sortOrder=writes.MAX_SORT_ORDER))
        await w.add_strategy(flag, "production", rollout())
    strategies = fake.flags.flags["checkout"].environment("production").strategies
    last = writes.MAX_SORT_ORDER
    assert [s.sort_order for s in strategies] == [0, last, last]
    assert strategies[0].parameters == {
        "rollout": "100",
        "stickiness": "default",
        "groupId": "checkout",
    }


async def test_a_strategy_names_only_segments_that_exist_in_its_project_or_global() -> None:
    fake = writer()
    fake.flags.add_segment(1)
    fake.flags.add_segment(2, "default")
    fake.flags.add_segment(3, "shop")
    async with fake(ACTOR) as w:
        flag = await w.flag("default", "checkout")
        await w.add_strategy(flag, "production", rollout(segments=[2, 1, 2]))
        with pytest.raises(InvalidInput, match="segment 3, which belongs to project shop") as e:
            await w.add_strategy(flag, "production", rollout(segments=[1, 3]))
        assert e.value.path == "/body/segments/1"
        with pytest.raises(InvalidInput, match="names segment 9, which does not exist"):
            await w.add_strategy(flag, "production", rollout(segments=[9]))
    [saved] = fake.flags.flags["checkout"].environment("production").strategies
    assert saved.segments == (1, 2)


async def test_an_environment_holds_at_most_its_bytes_with_the_segments_inlined() -> None:
    fake = writer()
    big = [{"contextName": "userId", "operator": "IN", "values": ["x" * 1000] * 100}]
    fake.flags.add_segment(1, constraints=big)
    async with fake(ACTOR) as w:
        flag = await w.flag("default", "checkout")
        await w.add_strategy(flag, "production", rollout(segments=[1]))
    room_left = MAX_ENVIRONMENT_BYTES // len(str(big)) - 1
    with pytest.raises(InvalidInput, match="over the 262144 a flag may hold"):
        async with fake(ACTOR) as w:
            for _ in range(room_left + 1):
                flag = await w.flag("default", "checkout")
                await w.add_strategy(flag, "production", rollout(segments=[1]))
    # refused whole: the write's strategies are undone with it
    assert len(fake.flags.flags["checkout"].environment("production").strategies) == 1


async def test_an_environment_nothing_serves_is_turned_off_with_an_event() -> None:
    fake = writer()
    async with fake(ACTOR) as w:
        flag = await w.flag("default", "checkout")
        await w.add_strategy(flag, "production", rollout(disabled=True))
        await w.set_enabled("checkout", "production", True)
        await w.off_unless_served(await w.flag("default", "checkout"), "production")
        await w.off_unless_served(await w.flag("default", "checkout"), "production")
    assert not fake.flags.flags["checkout"].environment("production").enabled
    assert fake.log.types() == [EventType.FEATURE_ENVIRONMENT_DISABLED]


async def test_a_project_environment_says_whether_it_is_enabled_and_its_default() -> None:
    fake = writer()
    fake.flags.projects["shop"]["production"] = '{"name": "default"}'
    async with fake(ACTOR) as w:
        assert await w.project_environment("default", "staging") is None
        found = await w.project_environment("shop", "production")
        assert found is not None
        assert found.default_strategy == '{"name": "default"}'
        await w.touch("checkout")
    assert fake.flags.flags["checkout"].revision == 1
