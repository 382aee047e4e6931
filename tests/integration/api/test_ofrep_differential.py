"""OFREP against the Frontend API and against Unleash's own engine (``yggdrasil_engine``,
what the Python SDK embeds), for hundreds of contexts over random flags of every kind
(``tests/evaluate_states.py``, a fixed seed): at a relay whose upstream is down (its copy
serves), and in offline mode (a file).

For each context and flag, OFREP's answer must be what the protocol's mapping makes of the
Frontend API's (docs/api.md, "OpenFeature"), and the Frontend API's must be yggdrasil's:
enabled, the variant, its payload. Every context names someone (``sessionId`` always, a
``userId`` often, as ``targetingKey`` or ``userId``), so no answer is left to chance.
Date constraints are moved next to the real clock (the server reads its own; yggdrasil is
given it), an hour or half an hour away, so that the answer does not depend on the date.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from conftest import MakeClient
from evaluate_states import NOW, context, state
from fake_upstream import FakeUpstream
from service import eventually
from yggdrasil_engine.engine import UnleashEngine

from relay.app import build_app
from relay.settings import load_settings

SEED = 20261127
FLAGS = 60
CONTEXTS = 300
CLIENT = "*:development.ofrep-differential-client-0123456789"
FRONT = "*:development.ofrep-differential-front-01234567890"
ENABLED_REASONS = {"STATIC", "TARGETING_MATCH", "SPLIT"}


def document(r: random.Random, now: datetime) -> dict[str, Any]:
    """Random flags, their date constraints moved next to ``now``."""
    doc = state(r, FLAGS)
    constraints = [c for s in doc["segments"] for c in s["constraints"]]
    for flag in doc["features"]:
        for strategy in flag["strategies"]:
            constraints += strategy["constraints"]
    for constraint in constraints:
        if constraint["operator"].startswith("DATE_"):
            moment = datetime.fromisoformat(constraint["value"].replace("Z", "+00:00"))
            moved = now + (moment - NOW)
            constraint["value"] = moved.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return doc


def typed(flag: dict[str, Any]) -> bool:
    """Whether some variant of the flag carries a payload (docs/api.md)."""
    variants = list(flag.get("variants") or [])
    for strategy in flag["strategies"]:
        variants += strategy.get("variants") or []
    return any(v.get("payload") for v in variants)


def expected(toggle: dict[str, Any], is_typed: bool) -> dict[str, Any]:
    """What OFREP answers for the Frontend API's ``toggle``, by the documented mapping."""
    variant = toggle["variant"]
    shown = (
        variant["name"] if variant["enabled"] else "enabled" if toggle["enabled"] else "disabled"
    )
    found: dict[str, Any] = {"variant": shown}
    if not is_typed:
        found["value"] = toggle["enabled"]
    elif variant["enabled"] and "payload" in variant:
        kind, text = variant["payload"]["type"], variant["payload"]["value"]
        found["value"] = json.loads(text) if kind in ("json", "number") else text
    return found


def contexts(r: random.Random) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(the Frontend API's context, OFREP's), the same person and properties."""
    pairs = []
    for _ in range(CONTEXTS):
        front = context(r)
        del front["currentTime"]  # the server's clock decides, in both
        ofrep = {k: v for k, v in front.items() if k != "properties"}
        if "userId" in ofrep and r.random() < 0.6:
            ofrep["targetingKey"] = ofrep.pop("userId")
        elif "userId" in ofrep and r.random() < 0.5:
            ofrep["targetingKey"] = "not-the-user"  # a userId named wins
        if r.random() < 0.5:
            ofrep["properties"] = front["properties"]
        else:
            ofrep |= front["properties"]
        pairs.append((front, ofrep))
    return pairs


def engine_context(front: dict[str, Any], now: datetime) -> dict[str, Any]:
    """The context as the server completes it: the Frontend API's defaults, the caller's
    address (loopback), the server's clock."""
    return {
        "appName": "frontend-api",
        "environment": "default",
        "remoteAddress": "127.0.0.1",
        **front,
        "currentTime": now.isoformat().replace("+00:00", "Z"),
    }


async def compare(client: Any, doc: dict[str, Any], r: random.Random) -> Counter[str]:
    """Every flag for every context, three ways; what was compared, by OFREP reason."""
    response = await client.get("/api/client/features", headers={"Authorization": CLIENT})
    served = await response.json()
    engine = UnleashEngine()
    assert engine.take_state(json.dumps(served)) is None
    kinds = {f["name"]: typed(f) for f in doc["features"]}
    seen: Counter[str] = Counter()
    disagreements: list[Any] = []
    for front, ofrep in contexts(r):
        now = datetime.now(UTC)
        response = await client.post(
            "/api/frontend/all", json={"context": front}, headers={"Authorization": FRONT}
        )
        toggles = {t["name"]: t for t in (await response.json())["toggles"]}
        response = await client.post(
            "/ofrep/v1/evaluate/flags", json={"context": ofrep}, headers={"X-API-Key": FRONT}
        )
        assert response.status == 200
        flags = {f.pop("key"): f for f in (await response.json())["flags"]}
        assert set(flags) == set(toggles) == set(kinds)
        ctx = engine_context(front, now)
        for name, toggle in toggles.items():
            variant = engine.check_variant(name, ctx).variant
            theirs = {
                "enabled": engine.check_enabled(name, ctx).is_enabled,
                "variant": {"name": variant.name, "enabled": variant.enabled},
            }
            if variant.payload is not None:
                theirs["variant"]["payload"] = variant.payload
            ours = {"enabled": toggle["enabled"], "variant": dict(toggle["variant"])}
            for spelling in ("feature_enabled", "featureEnabled"):
                ours["variant"].pop(spelling)
            answer = flags[name]
            reason = answer.pop("reason")
            wanted = expected(toggle, kinds[name])
            consistent = (reason in ENABLED_REASONS) is toggle["enabled"]
            if (ours != theirs or answer != wanted or not consistent) and len(disagreements) < 5:
                disagreements.append((name, front, ofrep, theirs, ours, answer, reason))
            seen[reason] += 1
    assert disagreements == []
    return seen


def assert_every_way(seen: Counter[str]) -> None:
    assert sum(seen.values()) == CONTEXTS * FLAGS
    assert set(seen) == ENABLED_REASONS | {"DISABLED", "DEFAULT"}, seen
    assert min(seen.values()) > CONTEXTS * FLAGS / 100, seen


async def test_a_relay_with_its_upstream_down(
    make_relay: MakeClient, upstream: FakeUpstream
) -> None:
    r = random.Random(SEED)
    doc = document(r, datetime.now(UTC))
    upstream.features = doc
    upstream.valid_keys[CLIENT] = "development"
    relay = await make_relay(client_tokens=[CLIENT], frontend_tokens=[FRONT])

    async def ready() -> bool:
        return (await relay.get("/ready")).status == 200

    await eventually(ready, "the relay has its copy")
    await upstream.close()
    response = await relay.post(
        "/ofrep/v1/evaluate/flags", json={}, headers={"Authorization": FRONT}
    )
    assert response.status == 200, await response.text()  # from the copy, the upstream gone
    assert_every_way(await compare(relay, doc, r))


async def test_offline_mode(aiohttp_client: Any, tmp_path: Path) -> None:
    r = random.Random(SEED + 1)
    doc = document(r, datetime.now(UTC))
    (tmp_path / "flags.json").write_text(json.dumps(doc))
    settings = load_settings(
        {
            "mode": "offline",
            "data_dir": tmp_path / "data",
            "bootstrap_file": tmp_path / "flags.json",
            "client_tokens": [CLIENT],
            "frontend_tokens": [FRONT],
            "workers": 1,
        }
    )
    client = await aiohttp_client(build_app(settings))
    assert_every_way(await compare(client, doc, r))


@pytest.mark.parametrize("kind", ["json", "number"])
def test_expected_reads_payloads_as_the_mapping_says(kind: str) -> None:
    """The oracle's own mapping: a json payload is its document, a number a number."""
    toggle = {
        "enabled": True,
        "variant": {"name": "v", "enabled": True, "payload": {"type": kind, "value": "7"}},
    }
    assert expected(toggle, True) == {"variant": "v", "value": 7}
    assert expected(toggle, False) == {"variant": "v", "value": True}
    off = {"enabled": False, "variant": {"name": "disabled", "enabled": False}}
    assert expected(off, True) == {"variant": "disabled"}
    assert expected(off, False) == {"variant": "disabled", "value": False}
