"""A strategy in words, as the web page lists it: "50 % of users by userId, country in NO,
SE". Pure: the page, and anyone reading a flag, gets one sentence per strategy that says
who it lets in, so nobody has to read the parameters' JSON to know what a flag does."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from relay.wire.strategies import Constraint, StrategyVariant

VALUES_SHOWN = 10
"""Values of a list named before "and N more": a list of 1,000 user ids stays one line."""

_SYMBOLS = {
    "NUM_EQ": "=",
    "NUM_GT": ">",
    "NUM_GTE": "≥",
    "NUM_LT": "<",
    "NUM_LTE": "≤",
    "SEMVER_EQ": "semver =",
    "SEMVER_GT": "semver >",
    "SEMVER_GTE": "semver ≥",
    "SEMVER_LT": "semver <",
    "SEMVER_LTE": "semver ≤",
    "DATE_AFTER": "after",
    "DATE_BEFORE": "before",
    "REGEX": "matches",
}
# list operators: (the words, the words inverted)
_LISTS = {
    "IN": ("in", "not in"),
    "NOT_IN": ("not in", "in"),
    "STR_CONTAINS": ("contains", "does not contain"),
    "STR_STARTS_WITH": ("starts with", "does not start with"),
    "STR_ENDS_WITH": ("ends with", "does not end with"),
}
_STICKINESS = {"default": "default stickiness (userId, else sessionId, else random)"}


def operator(op: str) -> str:
    """An operator's words: ``in``, ``contains``, ``semver ≥``..."""
    return _LISTS[op][0] if op in _LISTS else _SYMBOLS[op]


def listed(values: Sequence[str], shown: int = VALUES_SHOWN) -> str:
    """``a, b, c`` with at most ``shown`` named, then how many more."""
    named = ", ".join(values[:shown])
    more = len(values) - shown
    return f"{named} and {more} more" if more > 0 else named


def _split(value: str) -> list[str]:
    """A built-in strategy's comma-separated parameter, as the SDKs split it."""
    return [v.strip() for v in value.split(",") if v.strip()]


def constraint(c: Constraint) -> str:
    """``country in NO, SE``; ``appVersion semver ≥ 1.2.0``; ``not (age > 18)``."""
    op = c.operator.value
    # caseInsensitive counts for the STR_* operators and REGEX only (IN compares exactly)
    case = " (any case)" if c.caseInsensitive and (op.startswith("STR_") or op == "REGEX") else ""
    if op in _LISTS:
        words = _LISTS[op][1 if c.inverted else 0]
        return f"{c.contextName} {words} {listed(c.values)}{case}"
    text = f"{c.contextName} {_SYMBOLS[op]} {c.value or ''}{case}"
    return f"not ({text})" if c.inverted else text


def who(name: str, parameters: Mapping[str, str], flag: str = "") -> str:
    """Whom a strategy lets in before its constraints: the built-ins in words, a custom
    strategy by its name and parameters. A rollout's group is named when it is not the
    flag's own name (the default), since only then does it tie flags together."""
    if name == "default":
        return "everyone"
    if name == "flexibleRollout":
        rollout = parameters.get("rollout", "100")
        stickiness = parameters.get("stickiness") or "default"
        group = parameters.get("groupId") or flag
        if stickiness == "random":
            text = f"{rollout} % of requests at random"
        else:
            text = f"{rollout} % of users by {_STICKINESS.get(stickiness, stickiness)}"
        return text if group == flag else f"{text} (group {group})"
    if name == "userWithId":
        return f"users {listed(_split(parameters.get('userIds', '')))}"
    if name == "remoteAddress":
        return f"addresses {listed(_split(parameters.get('IPs', '')))}"
    if name == "applicationHostname":
        return f"hosts {listed(_split(parameters.get('hostNames', '')))}"
    shown = listed([f"{k}={v}" for k, v in sorted(parameters.items())])
    return f"custom strategy {name}" + (f" with {shown}" if shown else "")


def strategy(
    name: str,
    parameters: Mapping[str, str],
    constraints: Sequence[Constraint] = (),
    segments: Sequence[str] = (),
    flag: str = "",
) -> str:
    """The whole strategy: whom it lets in, then every condition (constraints and the
    segments named; all must hold)."""
    conditions = [constraint(c) for c in constraints]
    if segments:
        kind = "segment" if len(segments) == 1 else "segments"
        conditions.append(f"in {kind} {listed(list(segments))}")
    text = who(name, parameters, flag)
    return f"{text}, {' and '.join(conditions)}" if conditions else text


def variants(found: Sequence[StrategyVariant]) -> str:
    """``blue 50 %, green 50 %`` (weights are out of 1000)."""
    return ", ".join(f"{v.name} {v.weight / 10:g} %" for v in found)
