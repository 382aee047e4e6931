"""Flags moved between a real Unleash 8.2.0 and us. From Unleash: its export, of the flags of
test_flags_sdk.py (rollouts, constraints, strategy variants, a segment, a disabled
strategy) built through its admin API, is served by our standalone as Unleash serves it,
and our export of them is Unleash's but for what we add or leave out (strategy ids and
``sortOrder``, nulls, context fields). To Unleash: our export of the same flags passes
its validation and, imported, is served by Unleash as we serve it. The export Unleash
wrote is kept as ``data/unleash_82_export.json``, imported by every run; a live Unleash
server is opt-in: ``TEST_UNLEASH_SERVER=1`` (real_unleash.py)."""

from __future__ import annotations

import json
import urllib.request
from datetime import UTC, datetime, timedelta
from http.cookiejar import CookieJar
from pathlib import Path
from typing import Any

import pytest
from conftest import ADMIN_KEY, DATA, DEV_KEY
from flagkit import http
from flagstate import build_state
from real_unleash import real_unleash
from service import running

pytestmark = pytest.mark.process

EXPORT = "/api/admin/features-batch/export"
QUERY = {"environment": "development", "project": "default"}
WRITTEN_BY_UNLEASH = DATA / "unleash_82_export.json"
TESTERS = {
    "name": "testers",
    "constraints": [{"contextName": "userId", "operator": "IN", "values": ["7", "8"]}],
}


def meaning(constraints: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Constraints as SDKs read them: ``inverted`` and ``caseInsensitive`` false when absent
    (Unleash keeps them as sent, we keep them explicit)."""
    return [{"inverted": False, "caseInsensitive": False, **c} for c in constraints]


def served(url: str) -> dict[str, Any]:
    """name -> what an SDK evaluates of the flag."""
    status, body = http("GET", f"{url}/api/client/features", key=DEV_KEY)
    assert status == 200, body
    return {
        f["name"]: {
            "enabled": f["enabled"],
            "type": f["type"],
            "impressionData": f.get("impressionData", False),
            "variants": f.get("variants") or [],
            "strategies": [
                {
                    **{k: s.get(k) for k in ("name", "parameters", "variants")},
                    "constraints": meaning(s["constraints"]),
                }
                for s in f["strategies"]
            ],
        }
        for f in body["features"]
    }


def compared(exported: dict[str, Any]) -> dict[str, Any]:
    """An export without nulls, strategy ids and sort orders, and context fields."""

    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if v is not None}
        return [strip(v) for v in value] if isinstance(value, list) else value

    exported = strip(exported)
    exported.pop("contextFields")
    for strategy in exported["featureStrategies"]:
        strategy.pop("id")
        strategy.pop("sortOrder", None)
        strategy["constraints"] = meaning(strategy["constraints"])
    return exported


def import_into_ours(tmp_path: Path, exported: dict[str, Any]) -> tuple[dict[str, Any], Any]:
    """What our standalone serves and exports after importing ``exported``."""
    env = {"RELAY_INIT_ADMIN_API_TOKENS": ADMIN_KEY, "RELAY_INIT_CLIENT_API_TOKENS": DEV_KEY}
    with running(tmp_path / "ours", env=env) as ours:
        # segments are matched by name: created first, as Unleash requires
        assert http("POST", f"{ours.url}/api/admin/segments", TESTERS)[0] == 201
        body = {"project": "default", "environment": "development", "data": exported}
        assert http("POST", f"{ours.url}/api/admin/features-batch/import", body) == (200, None)
        status, again = http("POST", f"{ours.url}{EXPORT}", QUERY)
        assert status == 200, again
        return served(ours.url), again


def test_the_export_unleash_82_wrote_is_imported(tmp_path: Path) -> None:
    written = json.loads(WRITTEN_BY_UNLEASH.read_text())
    features, again = import_into_ours(tmp_path, written)
    assert set(features) == {f["name"] for f in written["features"]}
    assert features["off"]["enabled"] is False and features["segment"]["enabled"] is True
    assert [s["name"] for s in features["several"]["strategies"]] == ["default", "flexibleRollout"]
    assert compared(again) == compared(written)


def test_a_live_unleash_82s_export_is_served_alike(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    with real_unleash(request, tmp_path / "unleash") as run:
        unleash = run(None)
        try:
            build_state(unleash.url)
            status, theirs = http("POST", f"{unleash.url}{EXPORT}", QUERY)
            assert status == 200, theirs
            expected = served(unleash.url)
        finally:
            unleash.close()
    features, again = import_into_ours(tmp_path, theirs)
    assert features == expected
    assert compared(again) == compared(theirs)


def test_our_export_is_imported_by_a_live_unleash_82(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """Unleash imports only with a personal access token (never an admin key): its default
    admin user signs in and makes one."""
    env = {"RELAY_INIT_ADMIN_API_TOKENS": ADMIN_KEY, "RELAY_INIT_CLIENT_API_TOKENS": DEV_KEY}
    with running(tmp_path / "ours", env=env) as ours:
        build_state(ours.url)
        status, exported = http("POST", f"{ours.url}{EXPORT}", QUERY)
        assert status == 200, exported
        expected = served(ours.url)
    with real_unleash(request, tmp_path / "unleash") as run:
        unleash = run(None)
        try:
            assert http("POST", f"{unleash.url}/api/admin/segments", TESTERS)[0] == 201
            token = personal_token(unleash.url)
            body = {"project": "default", "environment": "development", "data": exported}
            batch = f"{unleash.url}/api/admin/features-batch"
            validation = {"errors": [], "warnings": [], "permissions": []}
            assert http("POST", f"{batch}/validate", body, key=token) == (200, validation)
            assert http("POST", f"{batch}/import", body, key=token) == (200, None)
            assert served(unleash.url) == expected
        finally:
            unleash.close()


def personal_token(url: str) -> str:
    """A personal access token of Unleash's default admin user, valid for a day."""
    session = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(CookieJar()))

    def post(path: str, body: dict[str, Any]) -> Any:
        headers = {"Content-Type": "application/json"}
        call = urllib.request.Request(
            f"{url}{path}", json.dumps(body).encode(), headers, method="POST"
        )
        with session.open(call, timeout=30) as response:
            return json.load(response)

    post("/auth/simple/login", {"username": "admin", "password": "unleash4all"})
    expires = datetime.now(UTC) + timedelta(days=1)
    made = post(
        "/api/admin/user/tokens", {"description": "import", "expiresAt": expires.isoformat()}
    )
    return str(made["secret"])
