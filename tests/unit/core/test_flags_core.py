"""The pure parts of flags: JSON Patch, Unleash's rules for saved strategies, the client
features answer (its schema, its ETag), the Unleash-Client-Spec threshold."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from relay.core import jsonpatch
from relay.core.client_features import Scope, inline_segments, projects_of, render
from relay.core.errors import InvalidInput
from relay.core.flags import (
    EnvironmentState,
    FlagRecord,
    FlagState,
    SegmentRecord,
    StrategyRecord,
    fix_weights,
    new_strategy_id,
    strategy_on,
    with_defaults,
)
from relay.wire.client_features import ClientFeatures
from relay.wire.flags import Patches
from relay.wire.strategies import Constraint, Strategy, StrategyVariant


def patch(document: dict[str, Any], operations: list[dict[str, Any]]) -> dict[str, Any]:
    return jsonpatch.apply(document, Patches.model_validate(operations).root)


def test_json_patch_operations() -> None:
    doc = {"a": {"b": [1, 2]}, "c": "x"}
    assert patch(doc, [{"op": "add", "path": "/a/b/1", "value": 9}]) == {
        "a": {"b": [1, 9, 2]},
        "c": "x",
    }
    assert patch(doc, [{"op": "add", "path": "/a/b/-", "value": 3}])["a"]["b"] == [1, 2, 3]
    assert patch(doc, [{"op": "remove", "path": "/c"}]) == {"a": {"b": [1, 2]}}
    assert patch(doc, [{"op": "replace", "path": "/a/b/0", "value": None}])["a"]["b"] == [None, 2]
    assert patch(doc, [{"op": "move", "from": "/c", "path": "/d"}]) == {
        "a": {"b": [1, 2]},
        "d": "x",
    }
    assert patch(doc, [{"op": "copy", "from": "/a/b", "path": "/e"}])["e"] == [1, 2]
    assert patch(doc, [{"op": "test", "path": "/c", "value": "x"}]) == doc
    assert (
        patch(
            {"a/b": 1, "m~n": 2},
            [{"op": "remove", "path": "/a~1b"}, {"op": "remove", "path": "/m~0n"}],
        )
        == {}
    )
    assert doc == {"a": {"b": [1, 2]}, "c": "x"}  # never changed in place


@pytest.mark.parametrize(
    "operations",
    [
        [{"op": "remove", "path": "/nothing"}],
        [{"op": "replace", "path": "/a/b/2", "value": 1}],
        [{"op": "add", "path": "/a/b/01", "value": 1}],
        [{"op": "add", "path": "/a/b/x", "value": 1}],
        [{"op": "add", "path": "a", "value": 1}],
        [{"op": "add", "path": "/c/d", "value": 1}],
        [{"op": "move", "from": "/a", "path": "/a/b/0"}],
        [{"op": "move", "path": "/x"}],
        [{"op": "test", "path": "/c", "value": "y"}],
        [{"op": "remove", "path": ""}],
        [{"op": "replace", "path": "", "value": [1]}],
        [{"op": "test", "path": "/c", "value": "x"}, {"op": "remove", "path": "/zz"}],
    ],
)
def test_json_patch_refusals_name_the_operation(operations: list[dict[str, Any]]) -> None:
    with pytest.raises(InvalidInput) as refused:
        patch({"a": {"b": [1, 2]}, "c": "x"}, operations)
    assert refused.value.path in (f"/body/{len(operations) - 1}", "/body")


def test_json_patch_copies_are_bounded() -> None:
    """Each copy of /a into /a doubles it: twenty would make a million values."""
    doubling = [{"op": "copy", "from": "/a", "path": "/a/-"}] * 20
    with pytest.raises(InvalidInput) as refused:
        patch({"a": [1, 2]}, doubling)
    assert "copies more than" in refused.value.message


def _containers(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5), _containers, max_leaves=10
)


@given(
    document=st.dictionaries(st.text(max_size=4), json_values, max_size=4),
    ops=st.lists(
        st.fixed_dictionaries(
            {
                "op": st.sampled_from(["add", "remove", "replace", "move", "copy", "test"]),
                "path": st.text(max_size=6),
            },
            optional={"value": json_values, "from": st.text(max_size=6)},
        ),
        max_size=4,
    ),
)
def test_json_patch_never_fails_otherwise(
    document: dict[str, Any], ops: list[dict[str, Any]]
) -> None:
    """Whatever a client sends, a patch applies or is refused with InvalidInput (a 400)."""
    try:
        result = patch(document, ops)
    except InvalidInput:
        return
    assert isinstance(result, dict)


def variant(name: str, weight: int = 0, kind: str = "variable") -> StrategyVariant:
    return StrategyVariant(name=name, weight=weight, weightType=kind, stickiness="default")  # type: ignore[arg-type]


def test_variant_weights_as_unleash_fixes_them() -> None:
    fixed = fix_weights([variant("c"), variant("b"), variant("a"), variant("z", 100, "fix")])
    assert [(v.name, v.weight) for v in fixed] == [("a", 300), ("b", 300), ("c", 300), ("z", 100)]
    three = fix_weights([variant("x"), variant("y"), variant("w")])
    assert [(v.name, v.weight) for v in three] == [("w", 333), ("x", 334), ("y", 333)]
    assert fix_weights([]) == []
    for bad in (
        [variant("a", 10, "fix")],
        [variant("a"), variant("a")],
        [variant("a"), variant("b", 600, "fix"), variant("c", 500, "fix")],
    ):
        with pytest.raises(InvalidInput):
            fix_weights(bad)


def test_strategy_defaults_and_the_strategy_of_on() -> None:
    saved = with_defaults(
        "checkout", Strategy(name="flexibleRollout", parameters={"groupId": "", "stickiness": ""})
    )
    assert saved.parameters == {"groupId": "checkout", "stickiness": "default", "rollout": "100"}
    kept = with_defaults(
        "checkout", Strategy(name="flexibleRollout", parameters={"rollout": "5", "groupId": "g"})
    )
    assert kept.parameters == {"rollout": "5", "groupId": "g", "stickiness": "default"}
    assert with_defaults("checkout", Strategy(name="userWithId", parameters={})).parameters == {}
    plain = with_defaults("f", strategy_on("f", None))
    assert (plain.name, plain.parameters) == (
        "flexibleRollout",
        {"rollout": "100", "stickiness": "default", "groupId": "f"},
    )
    default = Strategy(
        name="flexibleRollout", sortOrder=7, parameters={"rollout": "37", "groupId": ""}
    )
    on = strategy_on("f", default)
    assert on.parameters["groupId"] == "f" and on.sortOrder is None


def test_strategy_ids_sort_by_creation() -> None:
    ids = [new_strategy_id() for _ in range(100)]
    assert len(set(ids)) == 100 and all(len(i) == 26 for i in ids)
    assert ids[0][:8] <= ids[-1][:8]


def test_regex_constraints_take_re2_syntax_and_log_nothing(
    capfd: pytest.CaptureFixture[str],
) -> None:
    Constraint(contextName="x", operator="REGEX", value="^(?i)abc[[:alpha:]]$")  # type: ignore[arg-type]
    for refused in ("(regex", "^(?=a)b$", "^(a)\\1$", "[[a"):
        with pytest.raises(ValidationError):
            Constraint(contextName="x", operator="REGEX", value=refused)  # type: ignore[arg-type]
    assert capfd.readouterr().err == ""


def test_client_spec_threshold_is_4_2_0() -> None:
    assert [
        inline_segments(v) for v in (None, "4.1.99", "4.2.0-rc.1", "4.2.0", "4.10.0", "5.2.0")
    ] == [True, True, True, False, False, False]
    with pytest.raises(InvalidInput):
        inline_segments("=4.2.0")


def test_projects_of_a_key() -> None:
    assert projects_of(("*",), ()) is None
    assert projects_of(("*",), ("b", "a")) == ("a", "b")
    assert projects_of(("a", "b"), ()) == ("a", "b")
    assert projects_of(("a",), ("a", "z")) == ("a",)
    assert projects_of(("a",), ("z",)) == ()


def state(*flags: FlagRecord, segment_constraints: tuple[dict[str, Any], ...] = ()) -> FlagState:
    segment = SegmentRecord(1, "s", None, None, segment_constraints, 0.0, 3)
    return FlagState(9, flags, {1: segment})


def flag(name: str, project: str = "p", revision: int = 1, **envs: EnvironmentState) -> FlagRecord:
    return FlagRecord(name, project, "release", None, False, False, 0.0, None, revision, envs)


STRATEGY = StrategyRecord("01", "default", None, False, 0, (), {}, (), (1,))


def test_rendered_answers_follow_the_schema_and_their_etag_what_is_seen() -> None:
    constraint = {
        "contextName": "userId",
        "operator": "IN",
        "values": ["1"],
        "inverted": False,
        "caseInsensitive": False,
    }
    flags = (
        flag("a", revision=4, dev=EnvironmentState(True, (STRATEGY,))),
        flag("b", project="q", revision=8, prod=EnvironmentState(True, ())),
    )
    ids = Scope("dev", ("p",), None, inline_segments=False)
    inline = Scope("dev", ("p",), None, inline_segments=True)
    first = render(state(*flags, segment_constraints=(constraint,)), ids)
    body = ClientFeatures.model_validate_json(first.body)
    assert body.meta.etag == first.etag and first.revision == body.meta.revisionId == 4
    assert [s.id for s in body.segments or []] == [1]
    inlined = ClientFeatures.model_validate_json(
        render(state(*flags, segment_constraints=(constraint,)), inline).body
    )
    assert inlined.segments is None and inlined.features[0].strategies[0].constraints == [
        Constraint.model_validate(constraint)
    ]
    # a change the scope does not see keeps the ETag; one it sees changes it
    elsewhere = (flags[0], flag("b", project="q", revision=12))
    assert render(state(*elsewhere, segment_constraints=(constraint,)), ids).etag == first.etag
    assert render(state(*flags), ids).etag != first.etag
