"""The Unleash client specification (npm ``@unleash/client-specification``), served by us.

Each specification file is a ``state`` (what a server would serve) plus tests with expected
answers. For each file, a fresh standalone gets the state through its admin API, as an
operator would write it (segments, flags, strategies, the flag's own variants with
``variants-batch``, on, then dependencies), then the real Node and Python SDKs fetch it from
the standalone and answer the tests.

Some states cannot be written through Unleash's admin API, ours included; the tests on
their flags are counted apart with the reason (the API's own refusal, or what it changes):

- a flag with more than one parent (Unleash keeps one: a second replaces the first);
- a dependency on a flag that has a parent, or of a flag others depend on (Unleash
  refuses transitive dependencies, so no chain and no cycle), and a flag whose parent's
  own state could not be written that way;
- a dependency on a flag that does not exist;
- flag names the name rule refuses (UTF-8 names);
- operators Unleash does not have (CIDR, a made-up one), IN / NOT_IN without values,
  "v2.0.0" as a SemVer, regular expressions RE2 refuses, an inverted REGEX;
- a segment id absent from the state;
- variant weights (of a strategy or of the flag) that do not total 1000: the API
  normalises them, which moves users between variants, so the tests of such a flag pass
  or not by chance and are counted apart too.

Every other test must pass, and no other reason may appear. The delta API's files (no
``features`` state) do not apply. A summary is printed (``pytest -s``).
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
from flagkit import FEATURES, env_path, feature_path
from sdks import Check, node_evaluate, python_evaluate, quiet_sdk_logs

from relay.app import build_app

# Why a test may not run or pass: each is how Unleash's own admin API behaves too.
KNOWN_REASONS = (
    "one parent",  # more than one dependency
    "Transitive dependency detected",
    "whose state Unleash cannot hold",  # its parent's dependency was refused
    "No active feature",  # a dependency on a flag that does not exist
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
PASSING = 213


@dataclass
class Loaded:
    """What became of one specification's state: flags the API refused, and why."""

    refused: dict[str, str] = field(default_factory=dict)
    caveats: dict[str, str] = field(default_factory=dict)


async def admin(client: TestClient, method: str, path: str, body: Any = None) -> tuple[int, Any]:  # type: ignore[type-arg]
    response = await client.request(method, path, json=body, headers=auth(ADMIN_KEY))
    raw = await response.read()
    return response.status, json.loads(raw) if raw else None


def _variants(variants: list[dict[str, Any]], defaults: dict[str, str]) -> tuple[Any, str | None]:
    """A state's variants as the API takes them; and a caveat when it will change them."""
    body = [{**defaults, **variant} for variant in variants]
    total = sum(v.get("weight", 0) for v in variants)
    caveat = None
    if len(variants) > 1 and total != 1000:
        caveat = f"variant weights normalised by the admin API (total {total} -> 1000)"
    return body, caveat


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
    defaults = {"weightType": "variable", "stickiness": "default"}
    body["variants"], caveat = _variants(strategy.get("variants") or [], defaults)
    return body, caveat


async def _flag(
    client: TestClient, feature: dict[str, Any], segments: dict[int, int]
) -> tuple[str | None, str | None]:  # type: ignore[type-arg]
    """Writes one flag of a state but its dependencies: why the API refused it, or None;
    and a caveat when the API changed it."""
    name, caveat = feature["name"], None
    body = {"name": name, "description": feature.get("description")}
    status, answer = await admin(client, "POST", FEATURES.format(project="default"), body)
    if status != 201:
        return answer["details"][0]["message"], None
    for strategy in feature.get("strategies") or []:
        body, caveat = _strategy(strategy, segments)
        status, answer = await admin(client, "POST", f"{env_path(name)}/strategies", body)
        if status != 200:
            return answer["details"][0]["message"], None
    if feature.get("variants"):
        variants, caveat = _variants(feature["variants"], {})
        body = {"variants": variants, "environments": ["development"]}
        status, answer = await admin(client, "PUT", f"{feature_path(name)}/variants-batch", body)
        assert status == 200, answer
    if feature.get("enabled"):
        assert (await admin(client, "POST", f"{env_path(name)}/on"))[0] == 200
    return None, caveat


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
    features = state["features"]
    for feature in features:
        refused, caveat = await _flag(client, feature, segments)
        if refused is not None:
            loaded.refused[feature["name"]] = refused
        elif caveat is not None:
            loaded.caveats[feature["name"]] = caveat
    await _dependencies(client, features, loaded)
    return loaded


async def _dependencies(client: TestClient, features: list[dict[str, Any]], loaded: Loaded) -> None:  # type: ignore[type-arg]
    """Each flag's dependency, those on parents without one of their own first (the
    order an operator would take); then a flag whose parent's state differs from the
    state's (refused, or its own dependency refused) is counted apart as well."""
    parents = {f["name"]: f.get("dependencies") or [] for f in features}
    ordered = sorted(
        (f for f in features if parents[f["name"]] and f["name"] not in loaded.refused),
        key=lambda f: any(parents.get(d["feature"]) for d in parents[f["name"]]),
    )
    for feature in ordered:
        name, dependencies = feature["name"], parents[feature["name"]]
        if len(dependencies) > 1:
            loaded.refused[name] = "one parent per flag: Unleash replaces a flag's dependency"
            continue
        status, answer = await admin(
            client, "POST", f"{feature_path(name)}/dependencies", dependencies[0]
        )
        if status != 200:
            loaded.refused[name] = answer["message"]
    changed = True
    while changed:
        changed = False
        for name, dependencies in parents.items():
            unheld = [d["feature"] for d in dependencies if d["feature"] in loaded.refused]
            if name not in loaded.refused and unheld and unheld[0] in parents:
                loaded.refused[name] = f"depends on {unheld[0]}, whose state Unleash cannot hold"
                changed = True


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
