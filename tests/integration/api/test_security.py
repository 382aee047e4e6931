"""Keys stay secret, client keys stay out of admin operations, the upstream is the only peer."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from conftest import ADMIN_KEY, DEV_KEY, assert_error, auth, bulk, metric
from fake_upstream import Answer, FakeUpstream
from service import eventually, running, wait_until

from relay.app import build_app
from relay.central import keys_api, usage_api
from relay.settings import load_settings

UPSTREAM_SECRET = "upstream-secret-that-must-never-leak-0123456789"
UPSTREAM_KEY = f"default:development.{UPSTREAM_SECRET}"


async def test_client_keys_reach_no_admin_operation(client: Any) -> None:
    for route in [*keys_api.ROUTES, *usage_api.ROUTES]:
        path = route.path.format(
            projectId="default",
            environment="development",
            featureName="f",
            appName="a",
            nameOrId="x",
        )
        response = await client.request(route.method, path, json={}, headers=auth(DEV_KEY))
        assert response.status == 403, (route.method, path)
        assert_error(await response.json(), "NoAccessError")


@pytest.mark.process
def test_upstream_keys_never_appear_in_logs_or_answers(tmp_path: Path) -> None:
    """The upstream refuses the relay's key (401): errors are logged, the key never is."""
    central_env = {"RELAY_INIT_ADMIN_API_TOKENS": ADMIN_KEY, "RELAY_LOG_LEVEL": "DEBUG"}
    with running(tmp_path / "central", env=central_env) as central:
        env = {
            "RELAY_MODE": "relay",
            "RELAY_UPSTREAM_URL": central.url,
            "RELAY_UPSTREAM_TOKENS": UPSTREAM_KEY,
            "RELAY_CLIENT_TOKENS": DEV_KEY,
            "RELAY_FLUSH_INTERVAL": "0.1",
            "RELAY_BACKOFF_MAX": "0.2",
            "RELAY_LOG_LEVEL": "DEBUG",
        }
        with running(tmp_path / "relay", env=env) as relay:
            request = urllib.request.Request(
                f"{relay.url}/api/client/metrics/bulk",
                data=json.dumps(bulk([metric(yes=1)])).encode(),
                headers={**auth(DEV_KEY), "Content-Type": "application/json"},
            )
            with urllib.request.urlopen(request) as response:
                assert response.status == 202
            wait_until(
                lambda: "upstream refused the key" in relay.logs(),
                "the refusal logged",
                details=relay.logs,
            )
            answers = b""
            for path in ("/internal-backstage/metrics", "/docs/openapi.json", "/health", "/ready"):
                with urllib.request.urlopen(f"{relay.url}{path}") as response:
                    answers += response.read()
        for text in (relay.logs(), relay.stdout(), central.logs(), answers.decode()):
            assert UPSTREAM_SECRET not in text
            assert DEV_KEY.split(".")[1] not in text


async def test_redirects_are_never_followed(make_relay: Any, upstream: FakeUpstream) -> None:
    elsewhere = FakeUpstream()
    other = await elsewhere.start()
    try:
        upstream.script = [Answer(302, headers={"Location": f"{other}/steal"})]
        client = await make_relay()
        response = await client.post(
            "/api/admin/projects/default/environments",
            json={"environment": "production"},
            headers=auth(ADMIN_KEY),
        )
        assert response.status == 302
        assert "Location" not in response.headers
        upstream.script = [Answer(307, headers={"Location": f"{other}/api/client/metrics/bulk"})]
        await client.post(
            "/api/client/metrics/bulk", json=bulk([metric(yes=2)]), headers=auth(DEV_KEY)
        )
        await eventually(lambda: upstream.totals() == {("f1", "app"): (2, 0)})
        assert elsewhere.received == []  # the redirect target never heard from the relay
        statuses = [r.headers["X-Fake-Status"] for r in upstream.bulks]
        assert statuses == ["307", "202"]  # the batch was kept, not dead-lettered
    finally:
        await elsewhere.close()


async def test_frontend_and_unknown_key_types_are_refused(
    aiohttp_client: Any, tmp_path: Path
) -> None:
    frontend, weird = (
        "default:development.frontend-key-123456",
        "default:development.weird-key-123456",
    )
    fake = FakeUpstream({frontend: "development", weird: "development"})
    fake.key_types = {frontend: "frontend", weird: "weird"}
    url = await fake.start()
    try:
        settings = load_settings(
            {
                "mode": "relay",
                "workers": 1,
                "data_dir": tmp_path,
                "upstream_url": url,
                "upstream_tokens": [DEV_KEY],
                "sqlite_synchronous": "NORMAL",
            }
        )
        client = await aiohttp_client(build_app(settings))
        for key, status, name in (
            (frontend, 403, "NoAccessError"),  # as Unleash
            (weird, 401, "AuthenticationRequired"),
        ):
            response = await client.post(
                "/api/client/metrics/bulk", json=bulk([metric(yes=1)]), headers=auth(key)
            )
            assert response.status == status
            assert_error(await response.json(), name)
    finally:
        await fake.close()


@pytest.mark.parametrize("origins", [[], ["https://flags.example.com"]])
async def test_cors_is_off_unless_configured(make_client: Any, origins: list[str]) -> None:
    client = await make_client(cors_origins=origins)
    allowed, other = "https://flags.example.com", "https://evil.example.com"
    for origin in (allowed, other):
        response = await client.get("/health", headers={"Origin": origin})
        expected = origin if origins and origin == allowed else None
        assert response.headers.get("Access-Control-Allow-Origin") == expected
        preflight = await client.options(
            "/api/client/metrics/bulk",
            headers={"Origin": origin, "Access-Control-Request-Method": "POST"},
        )
        if expected:
            assert preflight.status == 204
            assert "Authorization" in preflight.headers["Access-Control-Allow-Headers"]
        else:
            assert "Access-Control-Allow-Origin" not in preflight.headers
