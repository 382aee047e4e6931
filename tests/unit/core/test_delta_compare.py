"""``relay.core.delta.compared``: what a relay will make of two copies of its upstream's
answer. Any two answers, the second's changes replayed as events over the first (as the
SDKs apply them), give exactly the second, in every scope a key may have."""

from __future__ import annotations

import json
from typing import Any

from deltakit import agrees, replay
from hypothesis import given
from hypothesis import strategies as st

from relay.core.catalog import Scope
from relay.core.client_features import Answer, from_answer
from relay.core.delta import Changes, compared, delta

NAMES = ("a.one", "a.two", "b.one")
SCOPES = (
    Scope("development", None, None, False),
    Scope("development", None, "a.", False),
    Scope("development", ("other",), None, False),
)


def segment(id: int, value: int) -> dict[str, Any]:
    constraint = {"contextName": "userId", "operator": "IN", "values": [str(value)]}
    return {"id": id, "name": f"s{id}", "constraints": [constraint]}


@st.composite
def answers(draw: st.DrawFn) -> Answer:
    ids = draw(st.sets(st.sampled_from((1, 2))))
    segments = {i: segment(i, draw(st.integers(0, 2))) for i in ids}
    features = []
    for name in sorted(draw(st.sets(st.sampled_from(NAMES)))):
        uses = draw(st.sets(st.sampled_from(sorted(segments)))) if segments else set()
        strategy: dict[str, Any] = {"name": "default", "constraints": [], "parameters": {}}
        if uses:
            strategy["segments"] = sorted(uses)
        features.append(
            {
                "name": name,
                "enabled": draw(st.booleans()),
                "project": draw(st.sampled_from(("default", "other"))),
                "strategies": [strategy],
            }
        )
    return Answer(features, segments, 0)


def held(answer: Answer, scope: Scope) -> tuple[dict[str, Any], dict[int, Any]]:
    body = json.loads(from_answer(answer, False).answer(scope).body)
    return {f["name"]: f for f in body["features"]}, {s["id"]: s for s in body["segments"]}


@given(answers(), answers())
def test_two_copies_compared_bring_a_client_from_one_to_the_other(old: Answer, new: Answer) -> None:
    changes = Changes.of(1, 2, compared(old, new, 2))
    catalog = from_answer(new, False)
    for scope in SCOPES:
        found = delta(catalog, scope, changes, 1)
        events = json.loads(found.body)["events"] if found.events else []
        assert agrees(replay(held(old, scope), events), held(new, scope)), (scope, events)


def test_the_same_copy_twice_changes_nothing() -> None:
    answer = Answer([{"name": "a.one", "project": "default", "enabled": True}], {}, 0)
    assert compared(answer, answer, 2) == []
    assert [c.key for c in compared(None, answer, 2)] == ["a.one"]


@given(answers(), answers(), answers())
def test_three_copies_compared_bring_a_client_from_the_first_to_the_last(
    first: Answer, second: Answer, third: Answer
) -> None:
    """Changes of two steps kept once per flag (the last) still reach every scope the flag
    was in on the way (a flag moved from project to project)."""
    changes = Changes.of(1, 3, [*compared(first, second, 2), *compared(second, third, 3)])
    catalog = from_answer(third, False)
    for scope in SCOPES:
        found = delta(catalog, scope, changes, 1)
        events = json.loads(found.body)["events"] if found.events else []
        assert agrees(replay(held(first, scope), events), held(third, scope)), (scope, events)


def test_a_segment_gone_is_announced_only_to_scopes_whose_flags_used_it() -> None:
    """A relay's copy that loses a segment told every scope of it (``segment-removed``),
    a project's too when only another project's flags had used it."""
    strategy = {"name": "default", "constraints": [], "parameters": {}, "segments": [1]}
    theirs = {"name": "b.one", "project": "other", "enabled": True, "strategies": [strategy]}
    old = Answer([theirs], {1: segment(1, 1)}, 0)
    new = Answer([{**theirs, "strategies": []}], {}, 0)
    changes = Changes.of(1, 2, compared(old, new, 2))
    catalog = from_answer(new, inline=False)
    for projects, heard in ((("default",), False), (("other",), True), (None, True)):
        scope = Scope("development", projects, None, False)
        events = json.loads(delta(catalog, scope, changes, 1).body)
        removed = [e for e in events["events"] if e["type"] == "segment-removed"]
        assert bool(removed) == heard, projects
