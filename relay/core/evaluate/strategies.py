"""Activation strategies compiled into rules: the strategy's constraints (its own, then its
segments') checked first, then the strategy's own test, with the hash input's constant part
(``"{groupId}:"``) prepared once.

The parameters are read as yggdrasil reads them (the engine the Python SDK embeds): a
percentage is a whole number from 0 to 100 (anything else: the strategy never matches);
``gradualRolloutUserId`` and ``gradualRolloutSessionId`` need their ``groupId``;
``flexibleRollout``'s defaults to the flag's name. An unknown strategy (a custom one) never
matches, nor does one that names a segment the document does not have (the Node SDK's rule;
yggdrasil turns the whole flag off).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from relay.core.evaluate.constraints import Check, address_in, compile_constraint, network, never
from relay.core.evaluate.context import Context, Random, getter, rollout_stickiness
from relay.core.evaluate.hashing import bucket
from relay.core.evaluate.outcome import Basis, Miss

_WHOLE = re.compile(r"\+?[0-9]+")  # what Rust's usize parses


@dataclass(frozen=True, slots=True)
class Segment:
    """A segment's constraints, compiled once and shared by the strategies that name it."""

    id: int
    constraints: tuple[tuple[Mapping[str, Any], Check], ...]


@dataclass(frozen=True, slots=True)
class Rule:
    """One strategy's test: None when the context matches, else the first reason it does not."""

    checks: tuple[tuple[Check, Miss], ...]
    test: Check | None  # None: the strategy matches whoever passes its constraints
    test_miss: Miss
    basis: Basis = Basis.EVERYONE  # whom a match goes to (``_basis``)

    def all_checks(self) -> tuple[Check, ...]:
        """The checks in order, the strategy's own test last: what a match needs."""
        own = () if self.test is None else (self.test,)
        return (*(check for check, _ in self.checks), *own)

    def miss(self, context: Context) -> Miss | None:
        for check, miss in self.checks:
            if not check(context):
                return miss
        if self.test is not None and not self.test(context):
            return self.test_miss
        return None


def compile_segments(raw: Sequence[Mapping[str, Any]]) -> dict[int, Segment]:
    segments = {}
    for segment in raw:
        constraints = segment.get("constraints") or ()
        compiled = tuple((c, compile_constraint(c)) for c in constraints)
        segments[int(segment["id"])] = Segment(int(segment["id"]), compiled)
    return segments


def compile_rule(
    raw: Mapping[str, Any],
    position: int,
    flag: str,
    segments: Mapping[int, Segment],
    hostname: str,
    randrange: Random,
) -> Rule:
    """The rule of the strategy at ``position`` (1-based) of flag ``flag``."""
    name = str(raw.get("name", ""))
    params = {str(k): str(v) for k, v in (raw.get("parameters") or {}).items()}
    found = _test(name, params, flag, hostname, randrange)
    if found is None:
        return Rule((), never, Miss(position, name, "unknown strategy"))
    test, detail = found
    pending: list[tuple[Check, Mapping[str, Any], int | None]] = [
        (compile_constraint(c), c, None) for c in raw.get("constraints") or ()
    ]
    basis = _basis(name, params)
    if raw.get("constraints") or raw.get("segments"):
        basis = basis.widest(Basis.TARGETED)
    for segment_id in raw.get("segments") or ():
        segment = segments.get(segment_id)
        if segment is None:
            return Rule((), never, Miss(position, name, f"segment {segment_id} does not exist"))
        pending.extend((check, c, segment_id) for c, check in segment.constraints)
    checks = tuple(
        (check, _constraint_miss(position, name, k, constraint, segment))
        for k, (check, constraint, segment) in enumerate(pending, start=1)
    )
    return Rule(checks, test, Miss(position, name, detail), basis)


def _constraint_miss(
    position: int, name: str, k: int, constraint: Mapping[str, Any], segment: int | None
) -> Miss:
    context_name, operator = str(constraint.get("contextName")), str(constraint.get("operator"))
    return Miss(position, name, "constraint failed", k, context_name, operator, segment)


def _percentage(params: Mapping[str, str], key: str) -> int | None:
    value = params.get(key)
    if value is None or not _WHOLE.fullmatch(value):
        return None
    parsed = int(value)
    return parsed if parsed <= 100 else None


def _basis(name: str, params: Mapping[str, str]) -> Basis:
    """Whom the strategy's own test lets through: a share (a rollout under 100 %), those a
    field of the context names (a list, a rollout of a field that may be absent), or
    everyone (``default``, a 100 % rollout of ``default`` or ``random`` stickiness, a host
    name: this server's, the same for every caller)."""
    match name:
        case "userWithId" | "remoteAddress":
            return Basis.TARGETED
        case "flexibleRollout":
            rollout = _percentage(params, "rollout")
            if rollout != 100:
                return Basis.SPLIT
            stickiness = params.get("stickiness") or "default"
            return Basis.EVERYONE if stickiness in ("default", "random") else Basis.TARGETED
        case "gradualRolloutUserId" | "gradualRolloutSessionId":
            return Basis.TARGETED if _percentage(params, "percentage") == 100 else Basis.SPLIT
        case "gradualRolloutRandom":
            return Basis.EVERYONE if _percentage(params, "percentage") == 100 else Basis.SPLIT
        case _:
            return Basis.EVERYONE


def _test(
    name: str, params: Mapping[str, str], flag: str, hostname: str, randrange: Random
) -> tuple[Check | None, str] | None:
    """The strategy's own test and what its miss says; None for an unknown strategy."""
    match name:
        case "default":
            return None, "never misses"
        case "userWithId":
            return _listed("userId", params.get("userIds")), "userId is not in userIds"
        case "flexibleRollout":
            rollout = _percentage(params, "rollout")
            stickiness = params.get("stickiness") or "default"
            group = params.get("groupId", flag)
            miss = f"{stickiness} is absent or outside the {rollout}% rollout"
            if rollout == 100 and stickiness in ("default", "random"):
                return None, miss  # a value always: nothing to hash, nor to draw
            return _rollout(rollout, group, rollout_stickiness(stickiness, randrange)), miss
        case "gradualRolloutUserId" | "gradualRolloutSessionId":
            percentage = _percentage(params, "percentage")
            field = "userId" if name == "gradualRolloutUserId" else "sessionId"
            group_id = params.get("groupId")
            check = never if group_id is None else _rollout(percentage, group_id, getter(field))
            return check, f"{field} is absent or outside the {percentage}% rollout"
        case "gradualRolloutRandom":
            return _random(_percentage(params, "percentage"), randrange), "outside the random %"
        case "remoteAddress":
            return _addresses(params.get("IPs")), "remoteAddress is not in IPs"
        case "applicationHostname":
            names = {n.strip().lower() for n in params.get("hostNames", "").split(",")}
            on = hostname.lower() in names
            return (None if on else never), f"host name {hostname} is not in hostNames"
        case _:
            return None


def _listed(field: str, listed: str | None) -> Check:
    if listed is None:
        return never
    wanted = frozenset(v.strip() for v in listed.split(","))
    read = getter(field)

    def check(context: Context) -> bool:
        return read(context) in wanted

    return check


def _rollout(rollout: int | None, group: str, stickiness: Callable[[Context], str | None]) -> Check:
    if not rollout:
        return never  # 0 %, or no percentage the SDKs read
    if rollout == 100:
        return lambda context: stickiness(context) is not None
    prefix = group + ":"

    def check(context: Context) -> bool:
        value = stickiness(context)
        return value is not None and bucket(prefix, value) <= rollout

    return check


def _random(percentage: int | None, randrange: Random) -> Check:
    if not percentage:
        return never

    def check(context: Context) -> bool:
        context.varied()
        return randrange(1, 100) < percentage  # yggdrasil's: 1 % never is

    return check


def _addresses(ips: str | None) -> Check:
    if ips is None:
        return never
    inside = address_in(tuple(n for n in map(network, ips.split(",")) if n is not None))
    return lambda context: inside(context.remote_address)
