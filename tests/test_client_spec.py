"""The Unleash client specification (npm ``@unleash/client-specification``), served by us.

Each specification file is a ``state`` (what a server would serve) plus tests with expected
answers. For each file, a fresh standalone gets the state through its admin API, as an
operator would write it (segments, flags, strategies, on), then the real Node and Python
SDKs fetch it from the standalone and answer the tests.

Some states cannot be written through Unleash's admin API, ours included; the tests on
their flags are counted apart with the reason (the API's own refusal, or what it changes):
feature-level variants (not offered here), dependencies, flag names the name rule refuses,
operators and expressions Unleash refuses, segments that do not exist, and variant weights
the API normalises to a total of 1000 (which moves users between variants: the tests of
such a flag pass or not by chance, so they are counted apart too). Every other test must
pass, and no other reason may appear. The delta API's files (no ``features`` state) do not
apply. A summary is printed (``pytest -s``).
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp.test_utils import TestClient
from conftest import ADMIN_KEY, auth, standalone_settings
from flagkit import FEATURES, env_path
from sdks import Check, node_evaluate, python_evaluate, quiet_sdk_logs

from relay.app import build_app

# Why a test may not run or pass: each is how Unleash's own admin API behaves too, except
# the first two (features this service does not offer).
KNOWN_REASONS = (
    "feature variants",
    "dependencies",
    "/body/name",  # a flag name outside Unleash's URL-friendly rule (UTF-8 names)
    "/operator",  # an operator Unleash does not have (CIDR, a made-up one)
    "needs at least one value",  # IN / NOT_IN without values
    "needs a SemVer version",  # "v2.0.0" is no strict SemVer
    "RE2 regular expression",  # unbalanced, look-ahead, back-reference
    "REGEX cannot be inverted",
    "which does not exist",  # a segment id absent from the state
    "variant weights normalised",
)
# with the pinned packages (tests/sdks.py), of 279 tests: see the summary printed
PASSING = 177


@dataclass
class Loaded:
    """What became of one specification's state: flags the API refused, and why."""

    refused: dict[str, str] = field(default_factory=dict)
    caveats: dict[str, str] = field(default_factory=dict)


async def admin(client: TestClient, method: str, path: str, body: Any = None) -> tuple[int, Any]:  # type: ignore[type-arg]
    response = await client.request(method, path, json=body, headers=auth(ADMIN_KEY))
    raw = await response.read()
    return response.status, json.loads(raw) if raw else None


def _strategy(
    strategy: dict[str, Any], segments: dict[int, int]
) -> tuple[dict[str, Any], str | None]:
    """A state's strategy as a strategy body; and a caveat when the API will change it."""
    body: dict[str, Any] = {
        "name": strategy["name"],
        "parameters": {k: str(v) for k, v in (strategy.get("parameters") or {}).items()},
        "constraints": strategy.get("constraints") or [],
        "segments": [segments.get(s, s) for s in strategy.get("segments") or []],
    }
    variants = strategy.get("variants") or []
    body["variants"] = [
        {"weightType": "variable", "stickiness": "default", **variant} for variant in variants
    ]
    total = sum(v.get("weight", 0) for v in variants)
    caveat = None
    if len(variants) > 1 and total != 1000:
        caveat = f"variant weights normalised by the admin API (total {total} -> 1000)"
    return body, caveat


async def load(client: TestClient, state: dict[str, Any]) -> Loaded:  # type: ignore[type-arg]
    loaded = Loaded()
    segments: dict[int, int] = {}
    for segment in state.get("segments") or []:
        body = {
            "name": segment.get("name") or f"segment-{segment['id']}",
            "constraints": segment["constraints"],
        }
        status, answer = await admin(client, "POST", "/api/admin/segments", body)
        assert status == 201, answer
        segments[segment["id"]] = answer["id"]
    for feature in state["features"]:
        name = feature["name"]
        if feature.get("variants"):
            loaded.refused[name] = "feature variants: the admin API has strategy variants only"
            continue
        if feature.get("dependencies"):
            loaded.refused[name] = "dependencies: not offered by the admin API"
            continue
        status, answer = await admin(
            client,
            "POST",
            FEATURES.format(project="default"),
            {"name": name, "description": feature.get("description")},
        )
        if status != 201:
            loaded.refused[name] = answer["details"][0]["message"]
            continue
        for strategy in feature.get("strategies") or []:
            body, caveat = _strategy(strategy, segments)
            status, answer = await admin(client, "POST", f"{env_path(name)}/strategies", body)
            if status != 200:
                loaded.refused[name] = answer["details"][0]["message"]
                break
            if caveat:
                loaded.caveats[name] = caveat
        if feature.get("enabled") and name not in loaded.refused:
            assert (await admin(client, "POST", f"{env_path(name)}/on"))[0] == 200
    return loaded


def _matches(expected: Any, got: Any) -> bool:
    if not isinstance(expected, dict):
        return bool(got is expected)
    return all(
        got.get(k) == v
        for k, v in expected.items()
        if k in ("name", "enabled", "payload", "feature_enabled")
    )


async def run_specification(
    spec: dict[str, Any], make: Any, node_modules: Path, tmp: Path
) -> dict[str, Counter[str]]:
    client = await make()
    loaded = await load(client, spec["state"])
    status, token = await admin(
        client, "POST", "/api/admin/api-tokens", {"type": "client", "environment": "development"}
    )
    assert status == 201
    cases = [(t, False) for t in spec.get("tests", [])] + [
        (t, True) for t in spec.get("variantTests", [])
    ]
    checks = [Check(t["toggleName"], t.get("context") or {}, variant) for t, variant in cases]
    url = str(client.make_url("")).rstrip("/")
    answers = {
        "node": await asyncio.to_thread(node_evaluate, node_modules, url, token["secret"], checks),
        "python": await asyncio.to_thread(python_evaluate, url, token["secret"], checks, tmp),
    }
    outcomes: dict[str, Counter[str]] = {}
    for sdk, got in answers.items():
        counts: Counter[str] = Counter()
        for (case, _), answer in zip(cases, got, strict=True):
            toggle = case["toggleName"]
            if toggle in loaded.refused:
                counts[f"not expressible: {loaded.refused[toggle]}"] += 1
            elif toggle in loaded.caveats:  # passes or not by chance: random stickiness
                counts[f"not expressible exactly: {loaded.caveats[toggle]}"] += 1
            elif _matches(case["expectedResult"], answer):
                counts["passed"] += 1
            else:
                counts[f"FAILED: {case['description']}: got {answer!r}"] += 1
        outcomes[sdk] = counts
    return outcomes


async def test_client_specification(node_sdk: Path, aiohttp_client: Any, tmp_path: Path) -> None:
    quiet_sdk_logs()
    folder = node_sdk / "@unleash" / "client-specification" / "specifications"
    totals: dict[str, Counter[str]] = {"node": Counter(), "python": Counter()}
    lines = []
    for name in json.loads((folder / "index.json").read_text()):
        spec = json.loads((folder / name).read_text())
        tests = len(spec.get("tests", [])) + len(spec.get("variantTests", []))
        if "features" not in spec["state"]:
            for counts in totals.values():
                counts["not applicable: the delta API is not served"] += tests
            lines.append(f"{name}: {tests} tests not applicable (delta API)")
            continue

        async def make(data: Path = tmp_path / name) -> Any:
            return await aiohttp_client(build_app(standalone_settings(data)))

        outcomes = await run_specification(spec, make, node_sdk, tmp_path)
        for sdk, counts in outcomes.items():
            totals[sdk].update(counts)
            lines.append(f"{name} [{sdk}]: {dict(counts)}")
    print("\n".join(["", *lines, *(f"TOTAL [{sdk}]: {dict(c)}" for sdk, c in totals.items())]))
    for sdk, counts in totals.items():
        failed = [reason for reason in counts if reason.startswith("FAILED")]
        assert failed == [], (sdk, failed)
        reasons = [r for r in counts if r.startswith("not expressible")]
        unknown = [r for r in reasons if not any(known in r for known in KNOWN_REASONS)]
        assert unknown == [], (sdk, unknown)
        assert counts["passed"] == PASSING, (sdk, counts["passed"])
