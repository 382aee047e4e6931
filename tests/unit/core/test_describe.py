"""A strategy in words (``relay.core.describe``): every built-in strategy and operator, as
the web page lists a flag's strategies."""

from __future__ import annotations

from typing import Any

import pytest

from relay.core import describe
from relay.wire.strategies import Constraint, Operator, StrategyVariant


def c(name: str, op: str, *values: str, **extra: Any) -> Constraint:
    single = not op.startswith(("IN", "NOT_IN", "STR_"))
    body = {"value": values[0]} if single else {"values": list(values)}
    return Constraint.model_validate({"contextName": name, "operator": op, **body, **extra})


@pytest.mark.parametrize(
    ("name", "parameters", "words"),
    [
        ("default", {}, "everyone"),
        (
            "flexibleRollout",
            {"rollout": "50", "stickiness": "userId", "groupId": "checkout"},
            "50 % of users by userId",
        ),
        (
            "flexibleRollout",
            {"rollout": "50", "stickiness": "userId", "groupId": "g"},
            "50 % of users by userId (group g)",
        ),
        (
            "flexibleRollout",
            {"rollout": "25", "stickiness": "default", "groupId": "checkout"},
            "25 % of users by default stickiness (userId, else sessionId, else random)",
        ),
        (
            "flexibleRollout",
            {"rollout": "10", "stickiness": "random", "groupId": "checkout"},
            "10 % of requests at random",
        ),
        ("userWithId", {"userIds": "1, 2,3"}, "users 1, 2, 3"),
        ("remoteAddress", {"IPs": "10.0.0.1,10.1.0.0/16"}, "addresses 10.0.0.1, 10.1.0.0/16"),
        ("applicationHostname", {"hostNames": "web-1,web-2"}, "hosts web-1, web-2"),
        (
            "gradualRolloutUserId",
            {"percentage": "5", "groupId": "x"},
            "custom strategy gradualRolloutUserId with groupId=x, percentage=5",
        ),
        ("mine", {}, "custom strategy mine"),
    ],
)
def test_every_built_in_strategy_in_words(
    name: str, parameters: dict[str, str], words: str
) -> None:
    assert describe.strategy(name, parameters, flag="checkout") == words


@pytest.mark.parametrize(
    ("constraint", "words"),
    [
        (c("country", "IN", "NO", "SE"), "country in NO, SE"),
        (c("country", "IN", "NO", inverted=True), "country not in NO"),
        (c("country", "NOT_IN", "NO"), "country not in NO"),
        (c("country", "NOT_IN", "NO", inverted=True), "country in NO"),
        (c("email", "STR_CONTAINS", "@x.io"), "email contains @x.io"),
        (
            c("email", "STR_CONTAINS", "@X.io", caseInsensitive=True),
            "email contains @X.io (any case)",
        ),
        (c("email", "STR_CONTAINS", "@x.io", inverted=True), "email does not contain @x.io"),
        (c("path", "STR_STARTS_WITH", "/a", "/b"), "path starts with /a, /b"),
        (c("path", "STR_ENDS_WITH", ".io", inverted=True), "path does not end with .io"),
        (c("age", "NUM_EQ", "18"), "age = 18"),
        (c("age", "NUM_GT", "18"), "age > 18"),
        (c("age", "NUM_GTE", "18"), "age ≥ 18"),
        (c("age", "NUM_LT", "18"), "age < 18"),
        (c("age", "NUM_LTE", "18", inverted=True), "not (age ≤ 18)"),
        (
            c("currentTime", "DATE_AFTER", "2026-01-01T00:00:00Z"),
            "currentTime after 2026-01-01T00:00:00Z",
        ),
        (
            c("currentTime", "DATE_BEFORE", "2026-01-01T00:00:00Z"),
            "currentTime before 2026-01-01T00:00:00Z",
        ),
        (c("appVersion", "SEMVER_EQ", "1.2.0"), "appVersion semver = 1.2.0"),
        (c("appVersion", "SEMVER_GT", "1.2.0"), "appVersion semver > 1.2.0"),
        (c("appVersion", "SEMVER_GTE", "1.2.0"), "appVersion semver ≥ 1.2.0"),
        (c("appVersion", "SEMVER_LT", "1.2.0"), "appVersion semver < 1.2.0"),
        (c("appVersion", "SEMVER_LTE", "1.2.0"), "appVersion semver ≤ 1.2.0"),
        (c("email", "REGEX", "^a.*@x$", caseInsensitive=True), "email matches ^a.*@x$ (any case)"),
    ],
)
def test_every_operator_in_words(constraint: Constraint, words: str) -> None:
    assert describe.constraint(constraint) == words


def test_constraints_and_segments_follow_whom_a_strategy_lets_in() -> None:
    rollout = {"rollout": "50", "stickiness": "userId", "groupId": "checkout"}
    words = describe.strategy(
        "flexibleRollout",
        rollout,
        [c("country", "IN", "NO", "SE"), c("appVersion", "SEMVER_GTE", "1.2.0")],
        ["beta-users"],
        flag="checkout",
    )
    assert words == (
        "50 % of users by userId, country in NO, SE and appVersion semver ≥ 1.2.0"
        " and in segment beta-users"
    )
    both = describe.strategy("default", {}, segments=["a", "b"])
    assert both == "everyone, in segments a, b"


def test_a_long_list_is_named_in_part() -> None:
    ids = ",".join(str(n) for n in range(1000))
    assert describe.strategy("userWithId", {"userIds": ids}) == (
        "users 0, 1, 2, 3, 4, 5, 6, 7, 8, 9 and 990 more"
    )


def test_variants_with_their_shares() -> None:
    found = [
        StrategyVariant(name="blue", weight=500, weightType="variable", stickiness="default"),
        StrategyVariant(name="green", weight=333, weightType="fix", stickiness="default"),
    ]
    assert describe.variants(found) == "blue 50 %, green 33.3 %"


def test_every_operator_has_words_for_the_form() -> None:
    words = {op.value: describe.operator(op.value) for op in Operator}
    assert words["SEMVER_GTE"] == "semver ≥" and words["STR_ENDS_WITH"] == "ends with"
    assert all(words.values())
