"""The Unleash Proxy's paths at a relay (``proxy_client_keys``; ``relay proxy`` sets them):
the paths under ``{proxy_base_path}/proxy``, the Proxy's keys in its header, its statuses,
answers and headers, CORS as its ``cors`` package answered, counts into the buffer. A real
relay app on a real socket in front of the fake upstream (what the real Proxy answers the
same requests is tests/e2e/test_proxy_differential.py's)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import DEV_KEY, MakeClient, assert_error
from fake_upstream import FakeUpstream
from proxykit import (  # noqa: F401  (_flags, proxied: the fixtures)
    API_KEY,
    FLAGS,
    KEY,
    SERVER,
    _flags,
    _ready,
    proxied,
    ready,
)
from service import eventually


def names(body: dict[str, Any]) -> list[str]:
    return [t["name"] for t in body["toggles"]]


async def test_the_enabled_toggles_for_a_proxy_key(
    proxied: Any,  # noqa: F811  (the fixture imported above)
) -> None:
    response = await proxied.get("/proxy?userId=1", headers={"Authorization": KEY})
    assert response.status == 200
    assert response.headers["Cache-Control"] == "public, max-age=2"
    assert response.headers["ETag"].startswith('W/"')
    assert response.content_type == "application/json"
    body = await response.json()
    assert names(body) == ["on", "web.colour", "for-shop"]
    colour = body["toggles"][1]["variant"]
    assert colour["name"] == "blue" and colour["payload"] == {"type": "string", "value": "b"}
    again = await proxied.get(
        "/proxy?userId=1",
        headers={"Authorization": KEY, "If-None-Match": response.headers["ETag"]},
    )
    assert again.status == 304
    slash = await proxied.get("/proxy/?userId=1", headers={"Authorization": "other key"})
    assert names(await slash.json()) == names(body)


@pytest.mark.parametrize("header", [None, "", "nope", f"Bearer {KEY}", DEV_KEY, SERVER])
async def test_other_keys_are_401_naming_the_setting(
    proxied: Any,  # noqa: F811  (the fixture imported above)
    header: str | None,
) -> None:
    """Only the Proxy's client keys, whole, as the Proxy compared them: not with Bearer, not
    an Unleash key (even the relay's own), not a server key."""
    headers = {} if header is None else {"Authorization": header}
    response = await proxied.get("/proxy", headers=headers)
    assert response.status == 401
    body = await response.json()
    assert_error(body, "AuthenticationRequired")
    assert (
        "proxy_client_keys (RELAY_PROXY_CLIENT_KEYS), in header authorization" in (body["message"])
    )
    assert KEY not in body["message"]


async def test_a_post_names_toggles_or_takes_its_context(
    proxied: Any,  # noqa: F811  (the fixture imported above)
) -> None:
    headers = {"Authorization": KEY}
    posted = await proxied.post("/proxy", json={"context": {"userId": "7"}}, headers=headers)
    assert posted.status == 200 and names(await posted.json()) == ["on", "web.colour", "for-shop"]
    body = {"context": {"userId": "7"}, "toggles": ["off", "nothing", "on", "on"]}
    named = await (await proxied.post("/proxy", json=body, headers=headers)).json()
    assert named["toggles"] == [
        {
            "name": "off",
            "enabled": False,
            "impressionData": False,
            "variant": {
                "name": "disabled",
                "enabled": False,
                "feature_enabled": False,
                "featureEnabled": False,
            },
        },
        {
            "name": "nothing",
            "enabled": False,
            "impressionData": False,
            "variant": {
                "name": "disabled",
                "enabled": False,
                "feature_enabled": False,
                "featureEnabled": False,
            },
        },
        *[named["toggles"][2]] * 2,
    ]
    assert named["toggles"][2]["name"] == "on" and named["toggles"][2]["enabled"] is True
    # no Content-Type: the Proxy took it for JSON; another type is 415
    raw = await proxied.post(
        "/proxy",
        data=json.dumps(body).encode(),
        headers=headers,
        skip_auto_headers=["Content-Type"],
    )
    assert raw.status == 200, await raw.text()
    typed = {**headers, "Content-Type": "text/plain"}
    assert (await proxied.post("/proxy", data=json.dumps(body), headers=typed)).status == 415
    for bad in (b"[1]", b'{"context": "x"}', b'{"toggles": "on"}', b'{"context": '):
        refused = await proxied.post(
            "/proxy", data=bad, headers={**headers, "Content-Type": "application/json"}
        )
        assert refused.status == 400, bad
        assert_error(await refused.json(), "BadDataError")


async def test_the_context_as_the_proxy_completed_it(
    proxied: Any,  # noqa: F811  (the fixture imported above)
) -> None:
    """appName is the Proxy's own when none is given, environment ``default``; a caller's
    ``currentTime`` is honoured, top-level only (under properties it is a property)."""
    headers = {"Authorization": KEY}
    plain = names(await (await proxied.get("/proxy", headers=headers)).json())
    assert "for-shop" in plain and "dated" not in plain
    other = await proxied.get("/proxy?appName=shop&environment=x", headers=headers)
    assert "for-shop" not in names(await other.json())
    past = await proxied.get("/proxy?currentTime=1999-06-01", headers=headers)
    assert "dated" in names(await past.json())
    posted = {"context": {"currentTime": "1999-06-01T10:00:00Z"}}
    assert "dated" in names(
        await (await proxied.post("/proxy", json=posted, headers=headers)).json()
    )
    under = {"context": {"properties": {"currentTime": "1999-06-01T10:00:00Z"}}}
    assert "dated" not in names(
        await (await proxied.post("/proxy", json=under, headers=headers)).json()
    )
    nonsense = await proxied.get("/proxy?currentTime=yesterday", headers=headers)
    assert "dated" not in names(await nonsense.json())


async def test_all_is_501_unless_enabled(
    proxied: Any,  # noqa: F811  (the fixture imported above)
    make_relay: MakeClient,
) -> None:
    headers = {"Authorization": KEY}
    for method in ("GET", "POST"):
        response = await proxied.request(method, "/proxy/all", headers=headers, json={})
        assert response.status == 501
        assert "ENABLE_ALL_ENDPOINT" in (await response.json())["message"]
    unauthorised = await proxied.get("/proxy/all")
    assert unauthorised.status == 401  # the key first, as the Proxy


async def test_all_lists_every_toggle_when_enabled(
    make_relay: MakeClient, upstream: FakeUpstream, tmp_path: Path
) -> None:
    relay = await ready(
        await make_relay(tmp_path / "all", client_tokens=[API_KEY], proxy_client_keys=[KEY])
    )
    body = await (await relay.get("/proxy/all", headers={"Authorization": KEY})).json()
    assert names(body) == ["on", "off", "web.colour", "dated", "for-shop"]


async def test_base_path_header_project_prefix_environment(
    make_relay: MakeClient, upstream: FakeUpstream, tmp_path: Path
) -> None:
    relay = await ready(
        await make_relay(
            tmp_path / "narrow",
            client_tokens=[API_KEY],
            proxy_client_keys=[KEY],
            proxy_base_path="edge/",
            proxy_key_header="X-Proxy-Key",
            proxy_environment="default",
            app_name="unleash-proxy",
            proxy_name_prefix="web.",
        )
    )
    assert (await relay.get("/proxy", headers={"X-Proxy-Key": KEY})).status == 404
    assert (await relay.get("/edge/proxy", headers={"Authorization": KEY})).status == 401
    found = await relay.get("/edge/proxy?environment=production", headers={"X-Proxy-Key": KEY})
    assert names(await found.json()) == ["web.colour"]
    other = await ready(
        await make_relay(
            tmp_path / "project",
            client_tokens=[API_KEY],
            proxy_client_keys=[KEY],
            proxy_environment="default",
            app_name="unleash-proxy",
            proxy_project="web",
        )
    )
    assert names(await (await other.get("/proxy", headers={"Authorization": KEY})).json()) == [
        "web.colour"
    ]
    # the environment is forced: a caller's other one does not turn for-shop off
    forced = await ready(
        await make_relay(
            tmp_path / "forced",
            client_tokens=[API_KEY],
            proxy_client_keys=[KEY],
            proxy_environment="default",
            app_name="unleash-proxy",
        )
    )
    body = await (await forced.get("/proxy?environment=x", headers={"Authorization": KEY})).json()
    assert "for-shop" in names(body)


async def test_metrics_and_registrations_are_kept_for_the_upstream(
    proxied: Any,  # noqa: F811  (the fixture imported above)
    upstream: FakeUpstream,
) -> None:
    bucket = {
        "start": "2026-01-01T00:00:00Z",
        "stop": "2026-01-01T00:01:00Z",
        "toggles": {"on": {"yes": 3, "no": 1}},
    }
    body = {"appName": "shop-web", "instanceId": "browser", "bucket": bucket}
    for path, key in (("/proxy/client/metrics", KEY), ("/proxy/all/client/metrics", SERVER)):
        response = await proxied.post(path, json=body, headers={"Authorization": key})
        assert response.status == 200, await response.text()
    registration = {
        "appName": "shop-web",
        "instanceId": "browser",
        "sdkVersion": "unleash-proxy-client:3",
        "strategies": [],
        "started": "2026-01-01T00:00:00Z",
        "interval": 1000,
    }
    response = await proxied.post(
        "/proxy/client/register", json=registration, headers={"Authorization": KEY}
    )
    assert response.status == 200
    refused = await proxied.post("/proxy/client/metrics", json=body, headers={"Authorization": "x"})
    assert refused.status == 401
    assert (
        await proxied.post("/proxy/client/metrics", json={}, headers={"Authorization": KEY})
    ).status == 400
    # stored (200 comes after the commit), then sent upstream under the browser app's name,
    # in the environment of the key the proxy's keys stand for, the registration with them
    await eventually(
        lambda: upstream.totals() == {("on", "shop-web"): (6, 2)}, "the counts sent upstream"
    )
    sent = [bulk.json() for bulk in upstream.accepted_bulks()]
    assert {m["environment"] for body in sent for m in body["metrics"]} == {"development"}
    apps = [a for body in sent for a in body["applications"]]
    assert {(a["appName"], a["environment"]) for a in apps} == {("shop-web", "development")}


async def test_health_features_and_prometheus(
    proxied: Any,  # noqa: F811  (the fixture imported above)
) -> None:
    health = await proxied.get("/proxy/health")
    assert health.status == 200 and await health.text() == "ok"
    assert (
        await proxied.get("/proxy/client/features", headers={"Authorization": KEY})
    ).status == 401
    served = await proxied.get("/proxy/client/features", headers={"Authorization": SERVER})
    assert served.status == 200
    assert [f["name"] for f in (await served.json())["features"]] == [f["name"] for f in FLAGS]
    metrics = await proxied.get("/proxy/internal-backstage/prometheus")
    assert metrics.status == 200 and "relay_http_requests_total" in await metrics.text()


async def test_not_ready_is_503_with_the_proxys_words(
    make_relay: MakeClient, upstream: FakeUpstream, tmp_path: Path
) -> None:
    from fake_upstream import Answer

    upstream.features_answer = Answer(503)
    relay = await make_relay(tmp_path / "down", client_tokens=[API_KEY], proxy_client_keys=[KEY])
    health = await relay.get("/proxy/health")
    assert health.status == 503
    assert "not ready to accept requests" in (await health.json())["message"]
    response = await relay.get("/proxy", headers={"Authorization": KEY})
    assert response.status == 503  # no copy, and the upstream gives none
    assert_error(await response.json(), "ServiceUnavailableError")


async def test_wrong_keys_are_throttled(
    make_relay: MakeClient, upstream: FakeUpstream, tmp_path: Path
) -> None:
    relay = await ready(
        await make_relay(
            tmp_path / "guess",
            client_tokens=[API_KEY],
            proxy_client_keys=[KEY],
            auth_failure_limit=3,
        )
    )
    statuses = [
        (await relay.get("/proxy", headers={"Authorization": f"guess-{i}"})).status
        for i in range(4)
    ]
    assert statuses == [401, 401, 401, 429]
    assert (await relay.get("/proxy", headers={"Authorization": KEY})).status == 200


@pytest.mark.parametrize(
    "clock",
    ["0001-01-01T00:00:00+05:00", "9999-12-31T23:59:59-14:00", "1e308", "", "2024-13-45"],
)
async def test_a_callers_time_out_of_range_is_the_clocks_not_a_500(
    proxied: Any,  # noqa: F811  (the fixture imported above)
    clock: str,
) -> None:
    """A ``currentTime`` Python's dates cannot hold in UTC (year 0, year 10000) reads as
    JavaScript's ``Invalid Date`` does: the server's clock."""
    from urllib.parse import quote

    headers = {"Authorization": KEY}
    got = await proxied.get(f"/proxy?currentTime={quote(clock)}", headers=headers)
    assert got.status == 200, await got.text()
    assert "dated" not in names(await got.json())
    body = {"context": {"currentTime": clock}, "toggles": ["dated"]}
    posted = await proxied.post("/proxy", json=body, headers=headers)
    assert posted.status == 200, await posted.text()
