"""CORS on the Unleash Proxy's paths at a relay, as the Proxy's ``cors`` package answered it,
from its variables (``proxy_cors_*``, origins from ``frontend_cors_origins``), and a
``PROXY_BASE_PATH`` of ``/api``, where relay's own frontend paths were. The app and its
flags are test_proxy_paths.py's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from conftest import MakeClient
from fake_upstream import FakeUpstream
from proxykit import API_KEY, KEY, _flags, proxied, ready  # noqa: F401  (_flags, proxied: the fixtures)


async def test_cors_as_the_proxys_cors_package_answered(
    proxied: Any,  # noqa: F811  (the fixture imported above)
) -> None:
    preflight = await proxied.options(
        "/proxy",
        headers={
            "Origin": "http://shop",
            "Access-Control-Request-Method": "GET",
            "Access-Control-Request-Headers": "authorization,x-foo",
        },
    )
    assert preflight.status == 204
    assert preflight.headers["Access-Control-Allow-Origin"] == "*"
    assert preflight.headers["Access-Control-Allow-Methods"] == "GET, POST"
    assert preflight.headers["Access-Control-Allow-Headers"] == "authorization,x-foo"
    assert preflight.headers["Access-Control-Max-Age"] == "172800"
    bare = await proxied.options("/proxy/client/metrics")
    assert bare.status == 204 and bare.headers["Access-Control-Allow-Origin"] == "*"
    answer = await proxied.get("/proxy", headers={"Authorization": KEY})
    assert answer.headers["Access-Control-Allow-Origin"] == "*"
    assert answer.headers["Access-Control-Expose-Headers"] == "ETag"
    refused = await proxied.get("/proxy", headers={"Origin": "http://shop"})
    assert refused.status == 401 and refused.headers["Access-Control-Allow-Origin"] == "*"


async def test_cors_from_the_proxys_variables(
    make_relay: MakeClient, upstream: FakeUpstream, tmp_path: Path
) -> None:
    relay = await ready(
        await make_relay(
            tmp_path / "cors",
            client_tokens=[API_KEY],
            proxy_client_keys=[KEY],
            frontend_cors_origins=["http://a.com", "http://b.com"],
            proxy_cors_credentials=True,
            proxy_cors_exposed_headers="ETag,X-Y",
            proxy_cors_allowed_headers="authorization",
            proxy_cors_max_age=10,
            proxy_cors_preflight_status=200,
        )
    )
    asked = {"Origin": "http://b.com", "Access-Control-Request-Method": "GET"}
    preflight = await relay.options("/proxy", headers=asked)
    assert preflight.status == 200
    assert preflight.headers["Access-Control-Allow-Origin"] == "http://b.com"
    assert preflight.headers["Access-Control-Allow-Credentials"] == "true"
    assert preflight.headers["Access-Control-Allow-Headers"] == "authorization"
    assert preflight.headers["Access-Control-Max-Age"] == "10"
    stranger = await relay.get("/proxy", headers={"Authorization": KEY, "Origin": "http://c.com"})
    assert stranger.status == 200 and "Access-Control-Allow-Origin" not in stranger.headers
    assert "Origin" in stranger.headers["Vary"]
    assert stranger.headers["Access-Control-Expose-Headers"] == "ETag,X-Y"


async def test_base_path_api_takes_over_relays_legacy_proxy_paths(
    make_relay: MakeClient, upstream: FakeUpstream, tmp_path: Path
) -> None:
    """``PROXY_BASE_PATH=/api`` puts the Proxy at /api/proxy, where relay's frontend paths
    also answer frontend keys: there the Proxy's keys are taken, as they were."""
    relay = await ready(
        await make_relay(
            tmp_path / "api",
            client_tokens=[API_KEY],
            proxy_client_keys=[KEY],
            proxy_base_path="/api",
        )
    )
    assert (await relay.get("/api/proxy", headers={"Authorization": KEY})).status == 200
    assert (await relay.get("/api/frontend", headers={"Authorization": KEY})).status == 401
