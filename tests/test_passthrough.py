"""Relay mode: calls passed to the upstream as they are (caller's key, headers, body, query)
and its answer passed back (status, body, content type, ETag), or a JSON 401/502/504."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from conftest import (
    ADMIN_KEY,
    DEV_KEY,
    PROD_KEY,
    MakeClient,
    assert_error,
    auth,
    relay_settings,
)
from fake_upstream import Answer, FakeUpstream, Received
from service import free_port
from yarl import URL

from relay.app import build_app

ENVIRONMENTS = "/api/admin/projects/default/environments"


class WireUpstream(FakeUpstream):
    """The fake upstream, also keeping each request's path and query exactly as sent."""

    def __init__(self, valid_keys: dict[str, str]) -> None:
        super().__init__(valid_keys)
        self.raw_paths: list[str] = []

    async def _record(self, request: web.Request) -> Received:
        self.raw_paths.append(request.raw_path)
        return await super()._record(request)

    def passed(self) -> list[Received]:
        """Requests other than the relay's own flushes and key checks."""
        own = ("/api/client/metrics/bulk", "/edge/validate")
        return [r for r in self.received if r.path not in own]


@pytest.fixture
async def upstream() -> AsyncIterator[WireUpstream]:
    fake = WireUpstream({DEV_KEY: "development", PROD_KEY: "production"})
    await fake.start()
    yield fake
    await fake.close()


async def test_add_environment_is_forwarded_with_the_callers_key_and_body(
    make_relay: MakeClient, upstream: WireUpstream
) -> None:
    relay = await make_relay()
    body = b'{"environment": "staging", "changeRequestsEnabled": false}'
    headers = {
        "Authorization": f"Bearer {ADMIN_KEY}",
        "Content-Type": "application/json",
        "Cookie": "session=not-for-upstream",
    }
    response = await relay.post(ENVIRONMENTS, data=body, headers=headers)
    assert response.status == 200
    assert await response.read() == b""
    [sent] = upstream.passed()
    assert (sent.method, sent.path) == ("POST", ENVIRONMENTS)
    assert sent.headers["Authorization"] == f"Bearer {ADMIN_KEY}"
    assert sent.headers["Content-Type"] == "application/json"
    assert "Cookie" not in sent.headers
    assert sent.body == body
    assert upstream.validate_calls == 0  # the upstream judges the key, not the relay


@pytest.mark.parametrize(
    ("status", "body", "content_type"),
    [
        (409, b'{"name":"NameExistsError","message":"already enabled"}', "application/json"),
        (404, b'{"name":"NotFoundError"}', "application/json"),
        (400, b"Environment nope does not exist", "text/plain; charset=utf-8"),
        (403, b'{"name":"NoAccessError"}', "application/problem+json"),
        (500, b'{"name":"InternalError"}', "application/json"),
        (200, b"", "application/json"),
    ],
)
async def test_the_upstream_answer_comes_back_unchanged(
    make_relay: MakeClient, upstream: WireUpstream, status: int, body: bytes, content_type: str
) -> None:
    relay = await make_relay()
    upstream.script = [
        Answer(
            status,
            body=body,
            headers={"Content-Type": content_type, "Set-Cookie": "upstream=1", "X-Internal": "1"},
        )
    ]
    response = await relay.post(
        "/api/admin/projects/some-project/environments",
        json={"environment": "development"},
        headers=auth(ADMIN_KEY),
    )
    assert response.status == status
    assert await response.read() == body
    assert response.headers["Content-Type"] == content_type
    assert "Set-Cookie" not in response.headers
    assert "X-Internal" not in response.headers
    [sent] = upstream.passed()
    assert sent.path == "/api/admin/projects/some-project/environments"
    assert sent.json() == {"environment": "development"}
    assert sent.headers["Authorization"] == ADMIN_KEY


@pytest.mark.parametrize("header", [None, "", "   "])
@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", ENVIRONMENTS),
        ("GET", "/api/client/features"),
        ("GET", "/api/client/features/f1"),
    ],
)
async def test_without_a_key_the_answer_is_401_and_nothing_is_forwarded(
    make_relay: MakeClient, upstream: WireUpstream, method: str, path: str, header: str | None
) -> None:
    relay = await make_relay()
    headers = {} if header is None else {"Authorization": header}
    response = await relay.request(method, path, json={"environment": "x"}, headers=headers)
    assert response.status == 401
    assert_error(await response.json(), "AuthenticationRequired")
    assert upstream.passed() == []


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", ENVIRONMENTS),
        ("GET", "/api/client/features"),
        ("GET", "/api/client/features/f1"),
    ],
)
async def test_an_upstream_that_is_gone_gives_502(
    make_relay: MakeClient, upstream: WireUpstream, method: str, path: str
) -> None:
    relay = await make_relay()
    await upstream.close()
    response = await relay.request(
        method, path, json={"environment": "staging"}, headers=auth(ADMIN_KEY)
    )
    assert response.status == 502
    assert response.content_type == "application/json"
    assert_error(await response.json(), "BadGatewayError")


async def test_an_upstream_nobody_listens_on_gives_502(
    aiohttp_client: Any, tmp_path: Path, upstream: WireUpstream
) -> None:
    settings = relay_settings(tmp_path / "relay", f"http://127.0.0.1:{free_port()}")
    relay = await aiohttp_client(build_app(settings))
    response = await relay.post(
        ENVIRONMENTS, json={"environment": "staging"}, headers=auth(ADMIN_KEY)
    )
    assert response.status == 502
    assert_error(await response.json(), "BadGatewayError")
    features = await relay.get("/api/client/features", headers=auth(DEV_KEY))
    assert features.status == 502
    assert_error(await features.json(), "BadGatewayError")
    assert upstream.received == []


async def test_an_upstream_slower_than_the_timeout_gives_504(
    make_relay: MakeClient, upstream: WireUpstream
) -> None:
    relay = await make_relay(upstream_timeout=0.2)
    upstream.script = [Answer(200, delay=1)]
    response = await relay.post(
        ENVIRONMENTS, json={"environment": "staging"}, headers=auth(ADMIN_KEY)
    )
    assert response.status == 504
    assert response.content_type == "application/json"
    assert_error(await response.json(), "GatewayTimeoutError")
    [sent] = upstream.passed()  # it was asked, and did not answer in time
    assert sent.path == ENVIRONMENTS


async def test_features_are_passed_through_with_the_sdk_headers_and_etag(
    make_relay: MakeClient, upstream: WireUpstream
) -> None:
    relay = await make_relay()
    headers = {
        "Authorization": DEV_KEY,
        "If-None-Match": '"v0"',
        "Unleash-Client-Spec": "5.1.9",
        "Unleash-AppName": "shop",
        "Cookie": "session=not-for-upstream",
    }
    response = await relay.get("/api/client/features", headers=headers)
    assert response.status == 200
    assert response.headers["ETag"] == '"v1"'
    assert response.content_type == "application/json"
    assert "fetch-mode" not in response.headers  # would switch the Node SDK to streaming
    body = await response.json()
    assert [f["name"] for f in body["features"]] == ["f1"]

    [sent] = upstream.passed()
    assert (sent.method, sent.path) == ("GET", "/api/client/features")
    assert sent.headers["Authorization"] == DEV_KEY
    assert sent.headers["If-None-Match"] == '"v0"'
    assert sent.headers["Unleash-Client-Spec"] == "5.1.9"
    assert sent.headers["Unleash-AppName"] == "shop"
    assert "Cookie" not in sent.headers

    unchanged = await relay.get(
        "/api/client/features", headers={"Authorization": PROD_KEY, "If-None-Match": '"v1"'}
    )
    assert unchanged.status == 304
    assert unchanged.headers["ETag"] == '"v1"'
    assert await unchanged.read() == b""
    assert "fetch-mode" not in unchanged.headers
    second = upstream.passed()[1]
    assert second.headers["Authorization"] == PROD_KEY
    assert second.headers["If-None-Match"] == '"v1"'


async def test_query_strings_are_forwarded_as_sent(
    make_relay: MakeClient, upstream: WireUpstream
) -> None:
    relay = await make_relay()
    query = "project=default&namePrefix=a%23b%26c%2Bd%3De&tag=simple:x&pct=%25"
    response = await relay.get(
        URL(f"/api/client/features?{query}", encoded=True), headers=auth(DEV_KEY)
    )
    assert response.status == 200
    feature = await relay.get(
        URL("/api/client/features/f1?project=default", encoded=True), headers=auth(DEV_KEY)
    )
    assert feature.status == 200
    upstream.script = [Answer(200)]
    added = await relay.post(
        f"{ENVIRONMENTS}?dryRun=true", json={"environment": "staging"}, headers=auth(ADMIN_KEY)
    )
    assert added.status == 200
    assert upstream.raw_paths == [
        f"/api/client/features?{query}",
        "/api/client/features/f1?project=default",
        f"{ENVIRONMENTS}?dryRun=true",
    ]
    assert upstream.passed()[0].path == "/api/client/features"


async def test_one_feature_is_passed_through(
    make_relay: MakeClient, upstream: WireUpstream
) -> None:
    relay = await make_relay()
    toggle = {"name": "checkout", "enabled": True, "strategies": []}
    upstream.script = [
        Answer(200, body=json.dumps(toggle).encode(), headers={"ETag": '"c1"', "fetch-mode": "x"}),
        Answer(404, body=b'{"name":"NotFoundError"}'),
    ]
    headers = {"Authorization": DEV_KEY, "Unleash-Client-Spec": "5.1.9"}
    response = await relay.get("/api/client/features/checkout", headers=headers)
    assert response.status == 200
    assert await response.json() == toggle
    assert response.headers["ETag"] == '"c1"'
    assert "fetch-mode" not in response.headers
    missing = await relay.get("/api/client/features/nope", headers=headers)
    assert missing.status == 404
    assert await missing.read() == b'{"name":"NotFoundError"}'
    sent = upstream.passed()
    assert [(r.method, r.path) for r in sent] == [
        ("GET", "/api/client/features/checkout"),
        ("GET", "/api/client/features/nope"),
    ]
    assert all(r.headers["Authorization"] == DEV_KEY for r in sent)
    assert all(r.headers["Unleash-Client-Spec"] == "5.1.9" for r in sent)


async def test_names_are_forwarded_as_one_path_segment(
    make_relay: MakeClient, upstream: WireUpstream
) -> None:
    relay = await make_relay()
    for name in ("with%20space", "a%2Fb", "..%2F..%2Fedge%2Fvalidate", "..."):
        response = await relay.get(
            URL(f"/api/client/features/{name}", encoded=True), headers=auth(DEV_KEY)
        )
        assert response.status == 200, name
    upstream.script = [Answer(200)]
    response = await relay.post(
        URL("/api/admin/projects/..%2Fapi%2Fclient/environments", encoded=True),
        json={"environment": "staging"},
        headers=auth(ADMIN_KEY),
    )
    assert response.status == 200
    assert upstream.raw_paths == [
        "/api/client/features/with%20space",
        "/api/client/features/a%2Fb",
        "/api/client/features/..%2F..%2Fedge%2Fvalidate",
        "/api/client/features/...",
        "/api/admin/projects/..%2Fapi%2Fclient/environments",
    ]


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/api/admin/projects/../environments"),
        ("POST", "/api/admin/projects/%2E%2E/environments"),
        ("POST", "/api/admin/projects/.%2e/environments"),
        ("POST", "/api/admin/projects/./environments"),
        ("POST", "/api/admin/projects/%2E/environments"),
        ("GET", "/api/client/features/.."),
        ("GET", "/api/client/features/%2E%2E"),
        ("GET", "/api/client/features/%2e"),
    ],
)
async def test_dot_segments_never_reach_the_upstream(
    make_relay: MakeClient, upstream: WireUpstream, method: str, path: str
) -> None:
    relay = await make_relay()
    response = await relay.request(
        method, URL(path, encoded=True), json={"environment": "x"}, headers=auth(ADMIN_KEY)
    )
    assert response.status == 404
    assert_error(await response.json(), "NotFoundError")
    assert upstream.passed() == []
