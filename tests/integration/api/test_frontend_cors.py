"""CORS on the frontend paths (issue 21): any origin by default as Unleash, preflights
answered without a key, ETag exposed; the rest of the API keeps its own setting (off by
default), in both modes."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import DEV_KEY, MakeClient, auth, standalone_settings
from frontkit import FRONTEND_KEY, browser_metrics

from relay.app import build_app

METRICS = "/api/frontend/client/metrics"
# what unleash-proxy-client sends (util.ts parseHeaders), and one of its customHeaders
ASKED = "authorization,content-type,unleash-sdk,unleash-appname,unleash-connection-id,x-team"


@pytest.fixture(params=["standalone", "relay"])
def make(request: pytest.FixtureRequest) -> MakeClient:
    """A service of either mode that knows ``FRONTEND_KEY``."""
    if request.param == "standalone":  # on SQLite: CORS knows nothing of the backend
        aiohttp_client = request.getfixturevalue("aiohttp_client")
        data = request.getfixturevalue("tmp_path") / "data"

        async def standalone(**settings: Any) -> Any:
            values = standalone_settings(data, init_frontend_api_tokens=[FRONTEND_KEY], **settings)
            return await aiohttp_client(build_app(values))

        return standalone
    make_relay: MakeClient = request.getfixturevalue("make_relay")
    return lambda **settings: make_relay(frontend_tokens=[FRONTEND_KEY], **settings)


async def preflight(client: Any, path: str, origin: str) -> Any:
    return await client.options(
        path,
        headers={
            "Origin": origin,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": ASKED,
        },
    )


async def test_frontend_paths_answer_any_origin(make: MakeClient) -> None:
    client = await make()
    origin = "https://shop.example.com"
    for path in (METRICS, "/api/proxy/client/register"):
        answer = await preflight(client, path, origin)  # no key
        assert answer.status == 204, await answer.text()
        assert answer.headers["Access-Control-Allow-Origin"] == "*"
        assert answer.headers["Access-Control-Allow-Headers"] == ASKED
        assert "POST" in answer.headers["Access-Control-Allow-Methods"]
        assert answer.headers["Access-Control-Max-Age"] == "86400"
        assert "Access-Control-Allow-Credentials" not in answer.headers
    posted = await client.post(
        METRICS, json=browser_metrics(), headers={"Origin": origin, **auth(FRONTEND_KEY)}
    )
    assert posted.status == 202
    assert posted.headers["Access-Control-Allow-Origin"] == "*"
    assert posted.headers["Access-Control-Expose-Headers"] == "ETag"
    assert "Origin" in posted.headers["Vary"]
    # refusals too, so the page can read why
    for key in ("", DEV_KEY):
        refused = await client.post(
            METRICS, json=browser_metrics(), headers={"Origin": origin, **auth(key)}
        )
        assert refused.status in (401, 403)
        assert refused.headers["Access-Control-Allow-Origin"] == "*"


async def test_the_client_api_sends_no_cors_headers(make: MakeClient) -> None:
    client = await make()
    origin = "https://shop.example.com"
    features = await client.get("/api/client/features", headers={"Origin": origin, **auth(DEV_KEY)})
    assert features.status == 200
    assert not [h for h in features.headers if h.lower().startswith("access-control-")]
    answer = await preflight(client, "/api/client/metrics", origin)
    assert "Access-Control-Allow-Origin" not in answer.headers


async def test_each_setting_opens_only_its_own_paths(make: MakeClient) -> None:
    shop, admin = "https://shop.example.com", "https://admin.example.com"
    client = await make(frontend_cors_origins=[shop], cors_origins=[admin])
    allowed = await preflight(client, METRICS, shop)
    assert allowed.status == 204 and allowed.headers["Access-Control-Allow-Origin"] == shop
    assert allowed.headers["Vary"] == "Origin"
    assert "Access-Control-Allow-Origin" not in (await preflight(client, METRICS, admin)).headers
    api = await preflight(client, "/api/client/metrics", admin)
    assert api.status == 204 and api.headers["Access-Control-Allow-Origin"] == admin
    assert (
        "Access-Control-Allow-Origin"
        not in (await preflight(client, "/api/client/metrics", shop)).headers
    )
    closed = await make(frontend_cors_origins=[])
    assert "Access-Control-Allow-Origin" not in (await preflight(closed, METRICS, shop)).headers
