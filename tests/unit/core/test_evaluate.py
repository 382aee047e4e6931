"""The evaluator's own promises beyond the specification: the reason a person reads, the
server's clock, the host name, a key's projects, the injected random source."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from relay.core.evaluate import Basis, Context, Decision, compile_features

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def _flag(name: str, *strategies: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {"name": name, "enabled": True, "strategies": list(strategies), **more}


def _in(context_name: str, *values: str) -> dict[str, Any]:
    return {"contextName": context_name, "operator": "IN", "values": list(values)}


DOCUMENT = {
    "features": [
        _flag("off", {"name": "default"}, enabled=False),
        _flag("everyone"),
        _flag(
            "beta",
            {"name": "default", "constraints": [_in("userId", "ann")]},
            {"name": "flexibleRollout", "parameters": {"rollout": "100", "stickiness": "userId"}},
        ),
        _flag("plans", {"name": "default", "segments": [7]}),
        _flag("custom", {"name": "myStrategy"}),
        _flag("lost-segment", {"name": "default", "segments": [99]}),
        _flag("child", dependencies=[{"feature": "off"}]),
        _flag("orphan", dependencies=[{"feature": "gone"}]),
        _flag("only-ann", {"name": "userWithId", "parameters": {"userIds": "ann"}}),
    ],
    "segments": [{"id": 7, "constraints": [_in("plan", "pro")]}],
}


def _reason(name: str, **context: Any) -> str:
    compiled = compile_features(DOCUMENT, hostname="here")
    found = compiled.evaluate_one(name, Context(current_time=NOW, **context), explain=True)
    assert found is not None
    return str(found.reason)


def test_each_decision_has_a_reason_a_person_can_read() -> None:
    assert _reason("off") == "disabled in this environment"
    assert _reason("everyone") == "enabled, no strategies"
    assert _reason("beta", user_id="ann") == "strategy 1 default matched"
    assert _reason("beta", user_id="bob") == "strategy 2 flexibleRollout matched"
    assert _reason("beta") == (
        "constraint 1 on userId (IN) failed in strategy 1 default; "
        "strategy 2 flexibleRollout: userId is absent or outside the 100% rollout"
    )
    assert _reason("plans", properties={"plan": "free"}) == (
        "constraint 1 on plan (IN) of segment 7 failed in strategy 1 default"
    )
    assert _reason("custom") == "strategy 1 myStrategy: unknown strategy"
    assert _reason("lost-segment") == "strategy 1 default: segment 99 does not exist"
    assert _reason("child") == "parent flag off is not enabled"
    assert _reason("orphan") == "parent flag gone does not exist"
    assert _reason("only-ann", user_id="bob") == "strategy 1 userWithId: userId is not in userIds"


def test_a_reason_is_structured_for_programs() -> None:
    compiled = compile_features(DOCUMENT, hostname="here")
    found = compiled.evaluate_one("beta", Context(current_time=NOW, user_id="bob"))
    assert found is not None and found.enabled
    assert (found.reason.decision, found.reason.strategy) == (Decision.MATCHED, 2)
    missed = compiled.evaluate_one("beta", Context(current_time=NOW), explain=True)
    assert missed is not None and missed.reason.decision is Decision.NO_MATCH
    first = missed.reason.misses[0]
    assert (first.strategy, first.constraint, first.context_name, first.operator) == (
        1,
        1,
        "userId",
        "IN",
    )


def test_dates_are_compared_with_the_callers_clock() -> None:
    noon = "2026-03-01T12:00:00Z"
    after = {"contextName": "currentTime", "operator": "DATE_AFTER", "value": noon}
    launch = _flag("launch", {"name": "default", "constraints": [after]})
    compiled = compile_features({"features": [launch]})
    # a currentTime the caller sent (as a property) is not the clock
    sent = {"currentTime": "2030-01-01T00:00:00Z"}
    before = Context(current_time=NOW - timedelta(seconds=1), properties=sent)
    later = Context(current_time=NOW + timedelta(seconds=1))
    assert [e.enabled for e in compiled.evaluate(before)] == [False]
    assert [e.enabled for e in compiled.evaluate(later)] == [True]


def test_a_clock_without_an_offset_is_refused() -> None:
    with pytest.raises(ValueError, match="offset"):
        Context(current_time=datetime(2026, 3, 1, 12, 0))


def test_application_hostname_compares_the_host_name_given() -> None:
    hosts = {"name": "applicationHostname", "parameters": {"hostNames": "a, Web-1"}}
    document = {"features": [_flag("here", hosts)]}
    context = Context(current_time=NOW)
    assert compile_features(document, hostname="web-1").evaluate(context)[0].enabled
    assert not compile_features(document, hostname="web-2").evaluate(context)[0].enabled


def test_a_key_sees_only_its_projects() -> None:
    document = {
        "features": [
            _flag("a", project="default"),
            _flag("b", project="mobile"),
            _flag("c", project="web", dependencies=[{"feature": "a"}]),
        ]
    }
    compiled = compile_features(document).restrict(["web", "mobile"])
    context = Context(current_time=NOW)
    assert [(e.name, e.project, e.enabled) for e in compiled.evaluate(context)] == [
        ("b", "mobile", True),
        ("c", "web", True),  # its parent, in another project, is still found
    ]
    assert compiled.evaluate_one("a", context) is None


def test_randomness_comes_from_the_injected_source() -> None:
    document = {
        "features": [
            _flag("coin", {"name": "gradualRolloutRandom", "parameters": {"percentage": "50"}}),
            _flag(
                "dice",
                variants=[{"name": n, "weight": 1, "stickiness": "plan"} for n in "abcdef"],
            ),
        ]
    }
    context = Context(current_time=NOW)  # no plan: the variant is chosen at random

    def draws(seed: int) -> list[tuple[bool, str]]:
        compiled = compile_features(document, rng=random.Random(seed))
        return [
            (coin.enabled, dice.variant.name)
            for coin, dice in (compiled.evaluate(context) for _ in range(200))
        ]

    assert draws(1) == draws(1)
    assert draws(1) != draws(2)
    outcomes = draws(1)
    assert {enabled for enabled, _ in outcomes} == {True, False}
    assert {name for _, name in outcomes} == set("abcdef")


def _rollout(stickiness: str) -> dict[str, Any]:
    return {"name": "flexibleRollout", "parameters": {"rollout": "50", "stickiness": stickiness}}


def _two_by(stickiness: str) -> list[dict[str, Any]]:
    return [{"name": n, "weight": 1, "stickiness": stickiness} for n in ("a", "b")]


def _after(context_name: str) -> dict[str, Any]:
    return {"contextName": context_name, "operator": "DATE_AFTER", "value": "2020-01-01T00:00:00Z"}


@pytest.mark.parametrize(
    ("flag", "context", "varies"),
    [
        (_flag("plain", _rollout("userId")), {"user_id": "u1"}, False),
        (_flag("dated", {"name": "default", "constraints": [_after("currentTime")]}), {}, True),
        # a date in a property is the caller's, not the clock
        (_flag("prop", {"name": "default", "constraints": [_after("since")]}), {}, False),
        # the clock read only when the constraints before it held
        (
            _flag(
                "gate",
                {"name": "default", "constraints": [_in("userId", "x"), _after("currentTime")]},
            ),
            {"user_id": "u1"},
            False,
        ),
        (
            _flag(
                "gate",
                {"name": "default", "constraints": [_in("userId", "x"), _after("currentTime")]},
            ),
            {"user_id": "x"},
            True,
        ),
        (_flag("text", {"name": "default", "constraints": [_in("currentTime", "t")]}), {}, True),
        (_flag("tick", _rollout("currentTime")), {"user_id": "u1"}, True),
        (_flag("dice", _rollout("random")), {"user_id": "u1"}, True),
        (_flag("anyone", _rollout("default")), {}, True),  # no user, no session: chance
        (_flag("anyone", _rollout("default")), {"session_id": "s"}, False),
        (
            _flag("coin", {"name": "gradualRolloutRandom", "parameters": {"percentage": "50"}}),
            {},
            True,
        ),
        (_flag("pick", variants=_two_by("plan")), {}, True),
        (_flag("pick", variants=_two_by("plan")), {"properties": {"plan": "gold"}}, False),
        # one variant with all the weight: nothing to draw
        (_flag("one", variants=[{"name": "a", "weight": 1, "stickiness": "plan"}]), {}, False),
        # a parent's read is its child's too
        (
            _flag("child", dependencies=[{"feature": "parent"}]),
            {"user_id": "u1"},
            True,
        ),
    ],
)
def test_an_evaluation_says_whether_it_read_the_clock_or_chance(
    flag: dict[str, Any], context: dict[str, Any], varies: bool
) -> None:
    """What the Frontend API keeps answers by: one that read neither is the same for every
    equal context (``Context.varies``), told by the checks that read them, not guessed."""
    parent = _flag("parent", _rollout("random"))
    compiled = compile_features({"features": [parent, flag]}, rng=random.Random(1))
    asked = Context(current_time=NOW, **context)
    compiled.evaluate_one(flag["name"], asked)
    assert asked.varies is varies


_SPLIT_VARIANTS = [{"name": n, "weight": 1, "stickiness": "default"} for n in ("a", "b")]
_ANN = [_in("userId", "ann")]
_OVERRIDDEN = [
    {"name": "a", "weight": 1, "overrides": [{"contextName": "userId", "values": ["ann"]}]},
    {"name": "b", "weight": 1},
]


@pytest.mark.parametrize(
    ("flag", "context", "basis"),
    [
        (_flag("f"), {}, Basis.EVERYONE),
        (_flag("f", {"name": "default"}), {}, Basis.EVERYONE),
        (_flag("f", {"name": "default", "constraints": _ANN}), {}, Basis.TARGETED),
        (_flag("f", {"name": "default", "segments": [7]}), {}, Basis.TARGETED),
        (_flag("f", {"name": "userWithId", "parameters": {"userIds": "ann"}}), {}, Basis.TARGETED),
        (_flag("f", _rollout("default")), {}, Basis.SPLIT),
        (_flag("f", {**_rollout("default"), "parameters": {"rollout": "100"}}), {}, Basis.EVERYONE),
        (
            _flag("f", {**_rollout("x"), "parameters": {"rollout": "100", "stickiness": "userId"}}),
            {},
            Basis.TARGETED,
        ),
        (_flag("f", variants=_SPLIT_VARIANTS), {}, Basis.SPLIT),
        (_flag("f", variants=_SPLIT_VARIANTS[:1]), {}, Basis.EVERYONE),
        (_flag("f", variants=_OVERRIDDEN), {}, Basis.TARGETED),  # ann's variant by override
        (_flag("f", {"name": "default", "variants": _SPLIT_VARIANTS}), {}, Basis.SPLIT),
    ],
)
def test_an_answer_says_whom_it_goes_to(
    flag: dict[str, Any], context: dict[str, Any], basis: Basis
) -> None:
    """OFREP's reason comes from it: the same for everyone, targeted, or split by a hash."""
    document = {"features": [flag], "segments": [{"id": 7, "constraints": []}]}
    compiled = compile_features(document)
    found = compiled.evaluate_one("f", Context(current_time=NOW, user_id="ann", **context))
    assert found is not None and found.enabled
    assert found.reason.basis is basis


@pytest.mark.parametrize(
    ("flag", "context", "nameless"),
    [
        (_flag("f", _rollout("default")), {}, True),  # no user, no session: a coin toss
        (_flag("f", _rollout("default")), {"user_id": "u1"}, False),
        (_flag("f", _rollout("default")), {"session_id": "s1"}, False),
        (_flag("f", _rollout("random")), {}, False),  # chance by design, not for want of a key
        (_flag("f", {**_rollout("default"), "parameters": {"rollout": "100"}}), {}, False),
        (_flag("f", variants=_SPLIT_VARIANTS), {}, True),
        (_flag("f", variants=_SPLIT_VARIANTS), {"session_id": "s1"}, False),
        (_flag("f", variants=_SPLIT_VARIANTS[:1]), {}, False),  # one variant: nothing to draw
        (_flag("f", variants=_two_by("plan")), {}, False),  # a property absent: not the key
        (_flag("f", dependencies=[{"feature": "parent"}]), {}, True),  # the parent's draw
        (_flag("f", {"name": "default"}), {}, False),
    ],
)
def test_an_answer_says_whether_chance_decided_it_for_want_of_a_key(
    flag: dict[str, Any], context: dict[str, Any], nameless: bool
) -> None:
    """OFREP's TARGETING_KEY_MISSING: flag by flag, told by the draws themselves."""
    parent = _flag("parent", _rollout("default"))
    compiled = compile_features({"features": [parent, flag]}, rng=random.Random(1))
    asked = Context(current_time=NOW, **context)
    (found,) = compiled.drawn(asked, "f")
    assert found.nameless is nameless
    assert [d.evaluation.name for d in compiled.drawn(asked)] == ["parent", "f"]
    assert list(compiled.drawn(asked, "nothing")) == []


def test_a_flag_whose_variants_carry_payloads_is_typed() -> None:
    payload = {"type": "string", "value": "x"}
    flags = [
        _flag("plain", variants=_SPLIT_VARIANTS),
        _flag("own", variants=[{**_SPLIT_VARIANTS[0], "payload": payload}]),
        _flag("strategy", {"name": "default", "variants": [{"name": "v", "payload": payload}]}),
    ]
    compiled = compile_features({"features": flags})
    typed = {name: compiled.typed(name) for name in ("plain", "own", "strategy", "nothing")}
    assert typed == {"plain": False, "own": True, "strategy": True, "nothing": False}
