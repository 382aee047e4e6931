"""Every test and variant test of the Unleash client specification (npm
``@unleash/client-specification``, installed by ``tests/sdks.py``), run through our
evaluator directly: each file's state compiled, each test's context evaluated.

The spec's ``currentTime`` is what a caller passes as its server clock (the evaluator never
takes the time from the context); a test without one gets the present time, as the
service's clock would. A flag the state does not have is off with the ``disabled`` variant,
as the SDKs answer it. The delta API's files (19, 20) have no ``features`` state: they test
the delta protocol, not evaluation, so they are the only ones left out.
"""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from relay.core.evaluate import Context, compile_features

DELTA_FILES = ("19-delta-api-hydration.json", "20-delta-api-events.json")
# with the pinned package (tests/sdks.py, 6.1.0): every test of the 20 other files (279 in all)
TOTAL = 275


def _context(raw: dict[str, Any]) -> Context:
    clock = raw.get("currentTime")
    now = datetime.fromisoformat(clock) if clock else datetime.now(UTC)
    return Context(
        current_time=now,
        app_name=raw.get("appName"),
        environment=raw.get("environment"),
        user_id=raw.get("userId"),
        session_id=raw.get("sessionId"),
        remote_address=raw.get("remoteAddress"),
        properties={str(k): str(v) for k, v in (raw.get("properties") or {}).items()},
    )


def _run(spec: dict[str, Any]) -> tuple[int, list[str]]:
    compiled = compile_features(spec["state"], hostname="spec-host", rng=random.Random(21))
    failures, count = [], 0
    for test in spec.get("tests", []):
        count += 1
        found = compiled.evaluate_one(test["toggleName"], _context(test["context"]))
        enabled = found is not None and found.enabled
        if enabled != test["expectedResult"]:
            failures.append(f"{spec['name']}: {test['description']}: got {enabled}")
    for test in spec.get("variantTests", []):
        count += 1
        found = compiled.evaluate_one(test["toggleName"], _context(test["context"]))
        expected = test["expectedResult"]
        want = (
            expected["name"],
            expected["enabled"],
            expected.get("payload"),
            expected.get("feature_enabled", expected.get("featureEnabled")),
        )
        got = ("disabled", False, None, False)
        if found is not None:
            v = found.variant
            payload = None if v.payload is None else dict(v.payload)
            got = (v.name, v.enabled, payload, v.feature_enabled)
        if got != want:
            failures.append(f"{spec['name']}: {test['description']}: got {got}, want {want}")
    return count, failures


def test_every_specification_test_passes(node_sdk: Path) -> None:
    folder = node_sdk / "@unleash" / "client-specification" / "specifications"
    names = json.loads((folder / "index.json").read_text())
    assert set(DELTA_FILES) <= set(names)
    total, failures = 0, []
    for name in names:
        if name in DELTA_FILES:
            continue
        count, failed = _run(json.loads((folder / name).read_text()))
        total += count
        failures += failed
    assert failures == []
    assert total == TOTAL
