"""Random flag states and contexts for the differential test of the evaluator, drawn from a
``random.Random`` the caller seeds (the same seed, the same states: never luck).

Every strategy, operator (inverted, case-insensitive), segment, variant (stickiness,
overrides, strategy variants) and dependency is drawn, from small pools of values so that
constraints match about as often as they fail. Left out, and why, so that both engines are
asked the same question:

- outcomes random by design: ``gradualRolloutRandom`` and ``random`` stickiness only with 0
  or 100 %, and every context has a ``sessionId`` and a ``plan`` (the variants' stickiness
  values), so no variant is chosen at random;
- what the two engines' authors chose differently, and that we decided (see
  ``relay.core.evaluate``): unknown operators, a segment that does not exist and a value
  that does not parse (yggdrasil turns the whole flag off; we fail the one strategy, as the
  Node SDK does); a dependency on a parent's variants when that parent has no variants of
  its own (yggdrasil holds it satisfied, the Node SDK not, as we); a parent's
  ``flexibleRollout`` without ``groupId`` (yggdrasil hashes it with the child's name);
- ``applicationHostname`` naming our host: the Python build of yggdrasil has no host name
  (the strategy never matches there), so only lists without it are drawn; the host name's
  match is tested in ``tests/unit/core/test_evaluate.py``.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Any

HOST = "diff-host"
NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)  # the clock both engines are given

USERS = [f"u{n}" for n in range(12)] + ["U1", "user-Ä"]
PLANS = ["free", "pro", "Pro", "enterprise", "PRO-trial", "team"]
VERSIONS = ["1.0.0", "1.2.3", "1.2.3-beta.1", "1.2.3-beta.10", "1.2.3-alpha", "2.0.0+b.5", "1.2"]
SCORES = ["1", "2.5", "10", "-3", "1e2", "abc", "0", "+4", ".5"]
ADDRESSES = ["10.0.0.1", "10.1.2.3", "192.168.1.20", "127.0.0.1", "::1", "2001:db8::1", "x"]
APPS = ["web", "ios", "android"]
ENVIRONMENTS = ["development", "production"]
REGIONS = ["eu-west-1", "us-east-1", "EU-central"]
STICKINESS = ["default", "userId", "sessionId", "plan"]

_STRINGS = {
    "userId": USERS,
    "appName": APPS,
    "environment": ENVIRONMENTS,
    "plan": PLANS,
    "region": REGIONS,
}
_NUMBERS = ["1", "2.5", "10", "-3", "100", "0"]
_SEMVERS = ["1.2.3", "1.2.3-beta.2", "2.0.0", "1.0.0-alpha", "v1.2.3", "1.2.3-beta.10"]
_DATES = ["2026-03-01T11:00:00Z", "2026-03-01T12:30:00.500Z", "2026-03-01T13:00:00+02:00"]
_PATTERNS = ["^u1", "pro$", "[0-9]+", "ent.*se", "^(free|pro)$", "(", "u\\d$"]
_NETWORKS = ["10.0.0.0/8", "192.168.1.0/24", "127.0.0.1", "2001:db8::/32", "bad", "10.1.2.3/16"]


def _constraint(r: random.Random) -> dict[str, Any]:
    family = r.choice(["list", "list", "str", "num", "date", "semver", "regex", "cidr"])
    c: dict[str, Any] = {"inverted": r.random() < 0.3, "caseInsensitive": r.random() < 0.3}
    if family in ("list", "str", "regex"):
        name = r.choice([*_STRINGS, "sessionId"])
        pool = _STRINGS.get(name, ["s1", "s2", "s3"])
        if family == "regex":
            c |= {"operator": "REGEX", "value": r.choice(_PATTERNS)}
        elif family == "list":
            values = r.sample(pool, r.randint(0, min(3, len(pool))))
            c |= {"operator": r.choice(["IN", "NOT_IN"]), "values": values}
        else:
            op = r.choice(["STR_CONTAINS", "STR_STARTS_WITH", "STR_ENDS_WITH"])
            parts = [v[: r.randint(1, len(v))] if op != "STR_ENDS_WITH" else v[-2:] for v in pool]
            c |= {"operator": op, "values": r.sample(parts, r.randint(1, 2))}
        c["contextName"] = name
    elif family == "num":
        op = r.choice(["NUM_EQ", "NUM_GT", "NUM_GTE", "NUM_LT", "NUM_LTE"])
        c |= {"contextName": "score", "operator": op, "value": r.choice(_NUMBERS)}
    elif family == "date":
        op = r.choice(["DATE_AFTER", "DATE_BEFORE"])
        c |= {"contextName": "currentTime", "operator": op, "value": r.choice(_DATES)}
    elif family == "semver":
        op = r.choice(["SEMVER_EQ", "SEMVER_GT", "SEMVER_GTE", "SEMVER_LT", "SEMVER_LTE"])
        c |= {"contextName": "version", "operator": op, "value": r.choice(_SEMVERS)}
    else:
        name = r.choice(["remoteAddress", "remoteAddress", "region"])
        c |= {"contextName": name, "operator": "IN_CIDR", "values": r.sample(_NETWORKS, 2)}
    return c


def _payload(r: random.Random, name: str) -> dict[str, str] | None:
    kind = r.choice([None, "string", "json", "number"])
    values = {"string": name.upper(), "json": f'{{"v": "{name}"}}', "number": "7"}
    return None if kind is None else {"type": kind, "value": values[kind]}


def _variants(r: random.Random, stickiness: str, overrides: bool) -> list[dict[str, Any]]:
    variants = []
    for n in range(r.randint(1, 4)):
        v: dict[str, Any] = {"name": f"v{n}", "weight": r.choice([1, 50, 100, 333, 500])}
        v["stickiness"] = stickiness
        if (payload := _payload(r, v["name"])) is not None:
            v["payload"] = payload
        if overrides and r.random() < 0.3:
            name = r.choice(["userId", "plan", "appName"])
            v["overrides"] = [{"contextName": name, "values": r.sample(_STRINGS[name], 2)}]
        variants.append(v)
    return variants


def _strategy(r: random.Random, segments: list[int]) -> dict[str, Any]:
    name = r.choice(
        ["default", "flexibleRollout", "flexibleRollout", "flexibleRollout", "userWithId",
         "gradualRolloutUserId", "gradualRolloutSessionId", "gradualRolloutRandom",
         "remoteAddress", "applicationHostname", "myCustom"]
    )  # fmt: skip
    params: dict[str, str] = {}
    percent = str(r.choice([0, 1, 5, 25, 50, 99, 100]))
    if name == "flexibleRollout":
        stickiness = r.choice([*STICKINESS, "random"])
        if stickiness == "random":
            percent = r.choice(["0", "100"])
        params = {"rollout": percent, "stickiness": stickiness}
        if r.random() < 0.8:
            params["groupId"] = r.choice(["g1", "g2", "shared"])
    elif name == "userWithId":
        params = {"userIds": ", ".join(r.sample(USERS, 3))}
    elif name in ("gradualRolloutUserId", "gradualRolloutSessionId"):
        params = {"percentage": percent, "groupId": r.choice(["g1", "g2"])}
    elif name == "gradualRolloutRandom":
        params = {"percentage": r.choice(["0", "100"])}
    elif name == "remoteAddress":
        params = {"IPs": ", ".join(r.sample(_NETWORKS, 2))}
    elif name == "applicationHostname":
        params = {"hostNames": r.choice(["other", "other, another", ""])}
    strategy: dict[str, Any] = {"name": name, "parameters": params}
    strategy["constraints"] = [_constraint(r) for _ in range(r.choice([0, 0, 1, 1, 2, 3]))]
    if segments and r.random() < 0.3:
        strategy["segments"] = r.sample(segments, r.randint(1, min(2, len(segments))))
    if r.random() < 0.3 and params.get("stickiness") != "random":
        strategy["variants"] = _variants(r, params.get("stickiness", "default"), False)
    return strategy


def state(r: random.Random, flags: int) -> dict[str, Any]:
    """A client features document of ``flags`` flags and a few segments."""
    segments = [
        {"id": n, "constraints": [_constraint(r) for _ in range(r.randint(1, 2))]}
        for n in range(1, r.randint(1, 4))
    ]
    ids = [s["id"] for s in segments]
    features: list[dict[str, Any]] = []
    for n in range(flags):
        flag: dict[str, Any] = {
            "name": f"flag-{n}",
            "enabled": r.random() < 0.85,
            "project": r.choice(["default", "p2"]),
            "impressionData": r.random() < 0.2,
            "strategies": [_strategy(r, ids) for _ in range(r.choice([0, 1, 1, 1, 2, 3]))],
        }
        if r.random() < 0.4:
            stickiness = r.choice(["default", "sessionId", "plan"])
            flag["variants"] = _variants(r, stickiness, True)
        features.append(flag)
    for flag in features[1:]:
        if r.random() < 0.3:
            flag["dependencies"] = [_dependency(r, features, flag)]
    return {"version": 2, "features": features, "segments": segments}


def _dependency(r: random.Random, features: list[dict[str, Any]], child: dict[str, Any]) -> Any:
    parent = r.choice(features[: features.index(child)])
    if r.random() < 0.05:
        return {"feature": "no-such-flag"}
    for strategy in parent["strategies"]:  # see the module's docstring
        strategy["parameters"].setdefault("groupId", parent["name"])
    dependency: dict[str, Any] = {"feature": parent["name"]}
    kind = r.choice(["plain", "enabled", "disabled", "variants"])
    if kind == "enabled":
        dependency["enabled"] = True
    elif kind == "disabled":
        dependency["enabled"] = False
    elif kind == "variants" and parent.get("variants"):
        names = [v["name"] for v in parent["variants"]]
        dependency["variants"] = r.sample(names, r.randint(1, len(names)))
    return dependency


def context(r: random.Random) -> dict[str, Any]:
    """A context as the SDKs take it (yggdrasil's JSON): always a sessionId and a plan."""
    ctx: dict[str, Any] = {"sessionId": r.choice(["s1", "s2", "s3", "s4"])}
    for key, pool in (("userId", USERS), ("appName", APPS), ("environment", ENVIRONMENTS)):
        if r.random() < 0.7:
            ctx[key] = r.choice(pool)
    if r.random() < 0.7:
        ctx["remoteAddress"] = r.choice(ADDRESSES)
    properties = {"plan": r.choice(PLANS)}
    for key, pool in (("region", REGIONS), ("version", VERSIONS), ("score", SCORES)):
        if r.random() < 0.6:
            properties[key] = r.choice(pool)
    ctx["properties"] = properties
    moment = NOW + timedelta(minutes=r.choice([-120, -30, 0, 30, 45, 90]))
    ctx["currentTime"] = moment.isoformat().replace("+00:00", "Z")
    return ctx
