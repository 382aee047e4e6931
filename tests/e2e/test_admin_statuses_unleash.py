"""The admin API's statuses beside a real Unleash 8.2's (real_unleash.py; opt-in:
``TEST_UNLEASH_SERVER=1``): the same calls, in the same order, to both, on flags made the
same way, and the same status from each. The calls are those where a status is a choice:
removing what is not there, doing twice what is done, naming what does not exist, the
archive, tags, segments, dependencies, strategies and project environments.

Where we answer otherwise on purpose, ``DIFFERENT`` says why; every other difference fails
the test, all of them listed at once.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from conftest import ADMIN_KEY
from flagkit import FEATURES, env_path, feature_path
from real_unleash import real_unleash
from service import running

pytestmark = pytest.mark.process

CENTRAL_ENV = {"RELAY_INIT_ADMIN_API_TOKENS": ADMIN_KEY}
PROJECT = "/api/admin/projects/default"
Call = tuple[str, str, Any]

SETUP: list[Call] = [
    ("POST", FEATURES.format(project="default"), {"name": "plain"}),
    ("POST", FEATURES.format(project="default"), {"name": "parent"}),
    ("POST", FEATURES.format(project="default"), {"name": "child"}),
    ("POST", FEATURES.format(project="default"), {"name": "gone"}),
    ("POST", f"{feature_path('child')}/dependencies", {"feature": "parent"}),
    ("DELETE", feature_path("gone"), None),
    ("POST", "/api/admin/features/plain/tags", {"type": "simple", "value": "xx"}),
]

PROBES: list[Call] = [
    # dependencies: removing what is not there
    ("DELETE", f"{feature_path('plain')}/dependencies", None),
    ("DELETE", f"{feature_path('plain')}/dependencies/parent", None),
    ("DELETE", f"{feature_path('child')}/dependencies/plain", None),
    ("DELETE", f"{feature_path('nope')}/dependencies", None),
    ("DELETE", f"{feature_path('nope')}/dependencies/parent", None),
    ("DELETE", f"{feature_path('gone')}/dependencies", None),
    ("POST", f"{feature_path('child')}/dependencies", {"feature": "nope"}),
    ("POST", f"{feature_path('plain')}/dependencies", {"feature": "plain"}),
    ("POST", f"{feature_path('parent')}/dependencies", {"feature": "child"}),
    ("GET", f"{feature_path('nope')}/parents", None),
    ("GET", f"{feature_path('nope')}/parent-variants", None),
    ("DELETE", f"{feature_path('child')}/dependencies/parent", None),
    ("DELETE", f"{feature_path('child')}/dependencies/parent", None),
    # on and off, twice, and where nothing is
    ("POST", f"{env_path('plain')}/on", None),
    ("POST", f"{env_path('plain')}/on", None),
    ("POST", f"{env_path('plain')}/off", None),
    ("POST", f"{env_path('plain')}/off", None),
    ("POST", f"{env_path('plain', 'nope')}/on", None),
    ("POST", f"{env_path('nope')}/on", None),
    ("POST", f"{env_path('gone')}/on", None),
    ("GET", env_path("nope"), None),
    ("GET", env_path("plain", "nope"), None),
    # strategies that are not there
    ("GET", f"{env_path('plain')}/strategies/nope", None),
    ("DELETE", f"{env_path('plain')}/strategies/nope", None),
    ("PUT", f"{env_path('plain')}/strategies/nope", {"name": "default"}),
    ("GET", f"{env_path('nope')}/strategies", None),
    ("POST", f"{env_path('nope')}/strategies", {"name": "default"}),
    ("POST", f"{env_path('plain')}/strategies/set-sort-order", [{"id": "nope", "sortOrder": 1}]),
    # flags: twice, unknown, archived
    ("POST", FEATURES.format(project="default"), {"name": "plain"}),
    ("POST", FEATURES.format(project="default"), {"name": "gone"}),
    ("POST", FEATURES.format(project="nope"), {"name": "elsewhere"}),
    ("GET", feature_path("nope"), None),
    ("GET", feature_path("gone"), None),
    ("GET", FEATURES.format(project="nope"), None),
    ("PATCH", feature_path("plain"), []),
    ("PATCH", feature_path("nope"), [{"op": "replace", "path": "/description", "value": "d"}]),
    ("PUT", feature_path("nope"), {"name": "nope"}),
    ("DELETE", feature_path("nope"), None),
    ("DELETE", feature_path("gone"), None),
    ("POST", "/api/admin/archive/revive/plain", None),
    ("POST", "/api/admin/archive/revive/nope", None),
    ("DELETE", "/api/admin/archive/plain", None),
    ("DELETE", "/api/admin/archive/nope", None),
    ("GET", "/api/admin/archive/features/nope", None),
    # tags
    ("POST", "/api/admin/features/plain/tags", {"type": "simple", "value": "xx"}),
    ("POST", "/api/admin/features/nope/tags", {"type": "simple", "value": "xx"}),
    ("POST", "/api/admin/features/plain/tags", {"type": "nope", "value": "xx"}),
    ("GET", "/api/admin/features/nope/tags", None),
    ("DELETE", "/api/admin/features/plain/tags/simple/yy", None),
    ("DELETE", "/api/admin/features/nope/tags/simple/xx", None),
    ("DELETE", "/api/admin/features/plain/tags/simple/xx", None),
    ("DELETE", "/api/admin/tag-types/nope", None),
    ("PUT", "/api/admin/features/nope/tags", {"addedTags": [], "removedTags": []}),
    ("POST", "/api/admin/tag-types", {"name": "simple"}),
    # segments
    ("GET", "/api/admin/segments/99999", None),
    ("DELETE", "/api/admin/segments/99999", None),
    ("PUT", "/api/admin/segments/99999", {"name": "s", "constraints": []}),
    # variants of a flag that is not there
    ("GET", f"{env_path('nope')}/variants", None),
    ("PUT", f"{feature_path('nope')}/variants-batch", {"variants": [], "environments": []}),
    ("PUT", f"{feature_path('nope')}/variants-batch", {"variants": [], "environments": ["x"]}),
    ("PUT", f"{env_path('nope')}/variants", []),
    ("PUT", f"{env_path('plain', 'nope')}/variants", []),
    # projects and their environments
    ("GET", "/api/admin/projects/nope", None),
    ("POST", f"{PROJECT}/environments", {"environment": "development"}),
    ("POST", f"{PROJECT}/environments", {"environment": "nope"}),
    ("DELETE", f"{PROJECT}/environments/nope", None),
    ("POST", "/api/admin/projects/nope/environments", {"environment": "development"}),
    ("DELETE", "/api/admin/projects/nope", None),
    ("POST", f"{PROJECT}/environments/nope/default-strategy", {"name": "flexibleRollout"}),
    # events and metrics of what is not there
    ("GET", "/api/admin/events/nope", None),
    ("GET", "/api/admin/client-metrics/features/nope/raw", None),
    ("GET", "/api/admin/metrics/applications/nope", None),
    ("DELETE", "/api/admin/api-tokens/nope", None),
]

DIFFERENT: dict[tuple[str, str], str] = {
    ("POST", f"{PROJECT}/environments/nope/default-strategy"): "Unleash answers 500 (it reads"
    " the default strategy of an environment the project does not have); ours is 404",
    ("DELETE", "/api/admin/api-tokens/nope"): "Unleash takes the key itself in the path and"
    " answers 200 for any string; we take an id or a name (a key in a URL ends up in logs)"
    " and answer 404 when none has it, or a script revoking a key it mistyped is told the"
    " key is gone while it works on",
}
"""(method, path) -> why our status differs from Unleash's on purpose."""


def status(url: str, method: str, path: str, body: Any) -> int:
    """The status of one call (the body may be anything: Unleash answers some in text)."""
    request = urllib.request.Request(
        f"{url}{path}",
        data=None if body is None else json.dumps(body).encode(),
        method=method,
        headers={"Authorization": ADMIN_KEY, "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            response.read()
            return int(response.status)
    except urllib.error.HTTPError as exc:
        with exc:
            exc.read()
            return exc.code


def run(url: str, calls: list[Call]) -> list[int]:
    return [status(url, method, path, body) for method, path, body in calls]


def test_statuses_as_unleash_answers_them(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    with real_unleash(request, tmp_path / "unleash") as unleash_at:
        unleash = unleash_at(None)
        try:
            with running(tmp_path / "central", env=CENTRAL_ENV, name="central") as central:
                ours, theirs = run(central.url, SETUP), run(unleash.url, SETUP)
                assert ours == theirs, list(zip(SETUP, ours, theirs, strict=True))
                ours, theirs = run(central.url, PROBES), run(unleash.url, PROBES)
        finally:
            unleash.close()
    differences = [
        f"{method} {path}: ours {mine}, Unleash {its}"
        for (method, path, _), mine, its in zip(PROBES, ours, theirs, strict=True)
        if mine != its and (method, path) not in DIFFERENT
    ]
    assert differences == [], "\n".join(differences)
