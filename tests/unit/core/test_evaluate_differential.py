"""Our evaluator against Unleash's own engine (``yggdrasil_engine``, what the Python SDK
embeds): random flag states and contexts from a fixed seed (``tests/evaluate_states.py``),
and every flag's answer compared: enabled, variant name, its payload, enabled and
feature_enabled. The clock is the same instant for both (yggdrasil reads it from the
context's ``currentTime``, we from the caller)."""

from __future__ import annotations

import json
import random
from collections import Counter
from datetime import datetime
from typing import Any

from evaluate_states import HOST, context, state
from yggdrasil_engine.engine import UnleashEngine

from relay.core.evaluate import Context, Evaluation, compile_features

SEED = 20260301
STATES = 400
FLAGS = 12
CONTEXTS = 10


def _ours(ctx: dict[str, Any]) -> Context:
    return Context(
        current_time=datetime.fromisoformat(ctx["currentTime"]),
        app_name=ctx.get("appName"),
        environment=ctx.get("environment"),
        user_id=ctx.get("userId"),
        session_id=ctx.get("sessionId"),
        remote_address=ctx.get("remoteAddress"),
        properties=ctx["properties"],
    )


def _answer(found: Evaluation) -> tuple[Any, ...]:
    v = found.variant
    payload = None if v.payload is None else dict(v.payload)
    return found.enabled, v.name, payload, v.enabled, v.feature_enabled


def _theirs(engine: UnleashEngine, name: str, ctx: dict[str, Any]) -> tuple[Any, ...]:
    v = engine.check_variant(name, ctx).variant
    enabled = engine.check_enabled(name, ctx).is_enabled
    return enabled, v.name, v.payload, v.enabled, v.feature_enabled


def test_the_evaluator_agrees_with_yggdrasil() -> None:
    r = random.Random(SEED)
    engine = UnleashEngine()
    compared, disagreements = 0, []
    seen: Counter[str] = Counter()
    for _ in range(STATES):
        document = state(r, FLAGS)
        assert engine.take_state(json.dumps(document)) is None  # it understood all of it
        compiled = compile_features(document, hostname=HOST)
        for _ in range(CONTEXTS):
            ctx = context(r)
            for found in compiled.evaluate(_ours(ctx)):
                ours, theirs = _answer(found), _theirs(engine, found.name, ctx)
                compared += 1
                seen[f"{found.enabled} {found.reason.decision}"] += 1
                seen["variant"] += found.variant.enabled
                if ours != theirs and len(disagreements) < 5:
                    flag = next(f for f in document["features"] if f["name"] == found.name)
                    disagreements.append((flag, document["segments"], ctx, ours, theirs))
    assert disagreements == []
    assert compared == STATES * FLAGS * CONTEXTS
    # every way to decide a flag is well represented: the states are not trivially on or off
    ways = {"True matched", "True no strategies", "False no match", "False off", "False parent"}
    assert set(seen) == {*ways, "variant"}
    assert min(seen.values()) > compared / 100, seen


REALISTIC = [
    r"^[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\.[a-zA-Z]{2,}$",
    r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$",
    r"@(example|acme)\.com$",
    r"Mozilla/5\.0 \(Windows NT 10\.0.*Chrome/1[0-2][0-9]\.",
    r"^\p{L}+$",
    r"(?i)iphone|ipad|android",
    r"漢字",
]


def test_regex_within_its_bound_agrees_with_yggdrasil_on_long_values() -> None:
    """The bound on a REGEX search (``REGEX_WORK``) leaves the patterns flags use to read
    every value a context can hold (4,096 characters, ASCII or CJK) as yggdrasil does; a
    pattern of Unicode classes (``^\\p{L}+$``: 1,199 instructions, so 417 bytes) reads a
    name, not a page."""
    r = random.Random(SEED)
    features = [
        {
            "name": f"re-{i}",
            "enabled": True,
            "strategies": [
                {
                    "name": "default",
                    "constraints": [{"contextName": "v", "operator": "REGEX", "value": pattern}],
                }
            ],
        }
        for i, pattern in enumerate(REALISTIC)
    ]
    document = {"version": 2, "features": features}
    engine = UnleashEngine()
    assert engine.take_state(json.dumps(document)) is None
    compiled = compile_features(document, hostname=HOST)
    ua = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 Chrome/120.0.0.0 "
    names = ["Ünïcödé", "漢字かな" * 25, "Jean", "Zoë Ångström"]
    values = [
        "someone@example.com",
        "0b0c1d2e-3f40-4a5b-8c6d-7e8f90a1b2c3",
        (ua * 60)[:4096],
        "漢字" * 2048,
        "".join(r.choice("漢字かなabc") for _ in range(4096)),
        "x" * 4087 + "@acme.com",
        *names,
    ]
    matched = 0
    for value in values:
        ctx = {"currentTime": "2026-03-01T00:00:00Z", "properties": {"v": value}}
        for found in compiled.evaluate(_ours(ctx)):
            if found.name == "re-4" and value not in names:
                continue  # a page of letters: past this pattern's bound (docs/api.md)
            theirs = engine.check_enabled(found.name, ctx).is_enabled
            assert found.enabled == theirs, (found.name, value[:40])
            matched += found.enabled
    assert matched >= len(values)  # not all misses
