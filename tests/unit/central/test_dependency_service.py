"""DependencyService's rules over in-memory flags: one parent in the same project, not
archived, no second level, the child touched and the change an event; the parents and
parent variants a flag may name. The SQL of ``dependency_records`` is proven by
tests/test_flag_model_api.py on SQLite and PostgreSQL."""

from __future__ import annotations

import dataclasses

import pytest
from fake_flag_storage import FakeDependencies
from fake_flag_write import ACTOR, FakeWriter

from relay.central.flags import dependencies
from relay.central.flags.dependencies import DependencyService
from relay.core.audit import EventType
from relay.core.errors import InvalidOperation, NotFound
from relay.core.flags import Dependency, EnvironmentState
from relay.wire import flags as wire


def service() -> tuple[DependencyService, FakeWriter]:
    writer = FakeWriter()
    for name in ("checkout", "parent", "other"):
        writer.flags.add_flag(name)
    writer.flags.add_flag("elsewhere", "shop")
    writer.flags.add_flag("old", archived_at=1.0)
    return DependencyService(writer, FakeDependencies(writer.flags)), writer


def on(parent: str, *variants: str, enabled: bool = True) -> wire.CreateDependency:
    return wire.CreateDependency(feature=parent, enabled=enabled, variants=list(variants))


async def test_a_child_gets_one_parent_its_revision_moves_and_the_change_is_an_event() -> None:
    deps, writer = service()
    assert not await deps.any()
    await deps.add(ACTOR, "default", "checkout", on("parent", "blue"))
    await deps.add(ACTOR, "default", "checkout", on("other", "red", enabled=False))
    child = writer.flags.flags["checkout"]
    assert child.dependencies == (Dependency("other", False, ()),)
    assert child.revision == writer.revision == 2
    assert await deps.any()
    assert writer.log.types() == [EventType.FEATURE_DEPENDENCY_ADDED] * 2
    _, replaced = writer.log.recorded[1]
    assert replaced["before"] == {"feature": "parent", "enabled": True, "variants": ["blue"]}
    assert replaced["after"] == {"feature": "other", "enabled": False, "variants": []}


@pytest.mark.parametrize(
    ("child", "parent", "refusal"),
    [
        ("checkout", "checkout", "cannot depend on itself"),
        ("checkout", "nope", "No active feature nope exists"),
        ("checkout", "old", "No active feature old exists"),
        ("checkout", "elsewhere", "should be in the same project"),
        ("checkout", "child", "that has parent dependency"),
        ("parent", "other", "that other features depend on"),
    ],
)
async def test_the_rules_unleash_keeps_refuse_a_dependency(
    child: str, parent: str, refusal: str
) -> None:
    deps, writer = service()
    writer.flags.add_flag("child")
    await deps.add(ACTOR, "default", "child", on("parent"))
    with pytest.raises(InvalidOperation, match=refusal):
        await deps.add(ACTOR, "default", child, on(parent))
    assert writer.log.types() == [EventType.FEATURE_DEPENDENCY_ADDED]


async def test_removing_a_dependency_that_is_not_there_is_a_404() -> None:
    deps, writer = service()
    with pytest.raises(NotFound, match='"checkout" has no dependencies to remove'):
        await deps.delete(ACTOR, "default", "checkout")
    await deps.add(ACTOR, "default", "checkout", on("parent"))
    with pytest.raises(NotFound, match='No dependency on "other" for feature "checkout"'):
        await deps.delete(ACTOR, "default", "checkout", "other")
    await deps.delete(ACTOR, "default", "checkout", "parent")
    assert writer.flags.flags["checkout"].dependencies == ()
    assert writer.log.types()[-1] == EventType.FEATURE_DEPENDENCY_REMOVED


async def test_parents_a_flag_may_name_are_bounded_and_their_variants_listed_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    deps, writer = service()
    assert await deps.possible_parents("default", "checkout") == ["other", "parent"]
    monkeypatch.setattr(dependencies, "MAX_PARENTS", 1)
    assert await deps.possible_parents("default", "checkout") == ["other"]
    assert await deps.possible_parents("shop", "checkout") == []
    state = EnvironmentState(variants=({"name": "b"}, {"name": "a"}))
    writer.flags.flags["parent"] = dataclasses.replace(
        writer.flags.flags["parent"], environments={"production": state, "dev": state}
    )
    assert await deps.parent_variants("default", "parent") == ["a", "b"]
    assert await deps.parent_variants("shop", "parent") == []
