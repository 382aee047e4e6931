"""Frontend keys (issue 21): made by the admin API and the command line, configured in both
modes, learnt by a relay from its upstream; each key type reaches only its own paths, with
Unleash's statuses and messages. The browser SDK's metrics arrive through the frontend paths
into the same durable ingest as every other count."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from clikit import relay
from conftest import (
    ADMIN_KEY,
    DEV_KEY,
    MakeClient,
    assert_error,
    auth,
    raw,
    relay_settings,
    standalone_settings,
)
from fake_upstream import FakeUpstream
from frontkit import FRONTEND_KEY, browser_metrics
from service import eventually, running
from webkit import csrf, page, sign_in

from relay.app import build_app

pytestmark = pytest.mark.workers  # at one worker and at two (conftest.make_relay)

WRONG_TYPE = "invalid token: expected a different token type for this endpoint"


async def refused(client: Any, method: str, path: str, key: str, body: Any = None) -> None:
    response = await client.request(method, path, json=body, headers=auth(key))
    assert response.status == 403, (path, await response.text())
    answer = await response.json()
    assert_error(answer, "NoAccessError")
    assert answer["message"] == WRONG_TYPE


async def check_key_types(client: Any, frontend: str, *others: str) -> None:
    """A frontend key reaches the frontend paths only; client and admin keys none of them."""
    body = browser_metrics()
    await refused(client, "GET", "/api/client/features", frontend)
    await refused(client, "POST", "/api/client/metrics", frontend, body)
    await refused(client, "POST", "/api/client/register", frontend, {"appName": "a"})
    for path in ("/api/frontend/client/metrics", "/api/proxy/client/metrics"):
        for other in others:
            await refused(client, "POST", path, other, body)
        response = await client.post(path, json=body, headers=auth(frontend))
        assert response.status == 202, await response.text()
    unknown = await client.post(
        "/api/frontend/client/metrics", json=body, headers=auth(frontend + "x")
    )
    assert unknown.status == 401
    assert_error(await unknown.json(), "AuthenticationRequired")
    registered = await client.post(
        "/api/frontend/client/register",
        json={"appName": "shop-web", "instanceId": "i-1", "sdkVersion": "unleash-client-js:3.7.0"},
        headers=auth(frontend),
    )
    assert registered.status == 202, await registered.text()


async def test_a_frontend_key_from_the_admin_api_reaches_only_the_frontend_paths(
    client: Any,
) -> None:
    response = await client.post(
        "/api/admin/api-tokens",
        json={"type": "Frontend", "environment": "development", "projects": ["default"]},
        headers=auth(ADMIN_KEY),
    )
    assert response.status == 201, await response.text()
    made = await response.json()
    assert made["type"] == "frontend" and made["secret"].startswith("default:development.")
    listed = await (await client.get("/api/admin/api-tokens", headers=auth(ADMIN_KEY))).json()
    assert {"frontend"} == {t["type"] for t in listed["tokens"] if t["id"] == made["id"]}
    await check_key_types(client, made["secret"], DEV_KEY, ADMIN_KEY)
    # the browser's counts are stored as any SDK's, in the key's environment
    rows = await raw(client, "banner")
    assert [(r["environment"], r["yes"], r["no"]) for r in rows] == [("development", 6, 2)]


async def test_backend_is_unleash_s_name_of_a_client_key(client: Any) -> None:
    response = await client.post(
        "/api/admin/api-tokens",
        json={"type": "BACKEND", "environment": "development"},
        headers=auth(ADMIN_KEY),
    )
    assert response.status == 201, await response.text()
    assert (await response.json())["type"] == "client"
    bad = await client.post(
        "/api/admin/api-tokens", json={"type": "frontend"}, headers=auth(ADMIN_KEY)
    )
    assert bad.status == 400
    assert "needs an environment" in (await bad.json())["message"]


async def test_configured_frontend_keys_in_standalone(make_client: MakeClient) -> None:
    client = await make_client(init_frontend_api_tokens=[FRONTEND_KEY])
    await check_key_types(client, FRONTEND_KEY, DEV_KEY, ADMIN_KEY)


async def test_a_relay_takes_configured_frontend_keys(make_relay: MakeClient) -> None:
    client = await make_relay(frontend_tokens=[FRONTEND_KEY])
    await check_key_types(client, FRONTEND_KEY, DEV_KEY)


async def test_a_relay_learns_a_frontend_key_from_its_upstream(
    make_relay: MakeClient, upstream: FakeUpstream
) -> None:
    upstream.valid_keys[FRONTEND_KEY] = "development"
    upstream.key_types[FRONTEND_KEY] = "frontend"
    client = await make_relay()
    await check_key_types(client, FRONTEND_KEY, DEV_KEY)
    # and says so to relays below it
    response = await client.post("/edge/validate", json={"tokens": [FRONTEND_KEY, DEV_KEY]})
    tokens = {t["token"]: t["type"] for t in (await response.json())["tokens"]}
    assert tokens == {FRONTEND_KEY: "frontend", DEV_KEY: "client"}

    def arrived() -> bool:
        return any(
            m["featureName"] == "banner" and m["environment"] == "development"
            for b in upstream.accepted_bulks()
            for m in b.json()["metrics"]
        )

    await eventually(arrived)
    counted = [
        (m["yes"], m["no"])
        for b in upstream.accepted_bulks()
        for m in b.json()["metrics"]
        if m["featureName"] == "banner"
    ]
    assert counted == [(6, 2)]  # both posts, carried upstream once


async def test_the_web_page_makes_frontend_keys(client: Any) -> None:
    await sign_in(client)
    html = await page(client, "/keys")
    assert "<option>frontend</option>" in html
    made = await client.post(
        "/keys",
        data={
            "csrf": csrf(html),
            "type": "frontend",
            "environment": "development",
            "project": "default",
            "name": "shop-web",
        },
    )
    created = await made.text()
    assert made.status == 201, created
    secret = re.search(r'value="(default:development\.[0-9a-f]{64})"', created)
    assert secret, created
    await check_key_types(client, secret.group(1), DEV_KEY, ADMIN_KEY)


async def test_a_relay_learns_a_frontend_key_from_a_standalone_upstream(
    aiohttp_server: Any, aiohttp_client: Any, tmp_path: Path
) -> None:
    settings = standalone_settings(tmp_path / "central", init_frontend_api_tokens=[FRONTEND_KEY])
    central = await aiohttp_server(build_app(settings))
    central_client = await aiohttp_client(central)
    url = str(central.make_url("")).rstrip("/")
    relay_app = build_app(relay_settings(tmp_path / "relay", url, client_tokens=[]))
    at_relay = await aiohttp_client(relay_app)
    await check_key_types(at_relay, FRONTEND_KEY, DEV_KEY)

    async def stored() -> bool:
        return [(r["yes"], r["no"]) for r in await raw(central_client, "banner")] == [(6, 2)]

    await eventually(stored, "the browser's counts stored upstream, once")


@pytest.mark.process
def test_keys_create_frontend_command(tmp_path: Path) -> None:
    made = relay(
        "keys", "create", "--type", "frontend", "--environment", "development", cwd=tmp_path
    )
    assert made.returncode == 0, made.stderr
    secret = made.stdout.strip()
    assert secret.startswith("*:development.")
    with running(tmp_path, env={"RELAY_INIT_ADMIN_API_TOKENS": ADMIN_KEY}) as service:
        body = json.dumps(browser_metrics()).encode()
        statuses = {}
        for path in ("/api/frontend/client/metrics", "/api/client/metrics"):
            request = urllib.request.Request(
                f"{service.url}{path}",
                data=body,
                method="POST",
                headers={"Authorization": secret, "Content-Type": "application/json"},
            )
            try:
                with urllib.request.urlopen(request, timeout=10) as answer:
                    statuses[path] = answer.status
            except urllib.error.HTTPError as error:
                statuses[path] = error.code
        assert statuses == {"/api/frontend/client/metrics": 202, "/api/client/metrics": 403}
