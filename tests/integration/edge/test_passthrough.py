"""Relay mode: admin add-environment passed to the upstream as it is (caller's key, headers,
body, query) and its answer passed back (status, body, content type), or a JSON
401/502/504. (SDKs' flags come from the relay's cache:
tests/integration/edge/test_flag_cache.py.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import (
    ADMIN_KEY,
    MakeClient,
    assert_error,
    auth,
    relay_settings,
)
from fake_upstream import Answer, FakeUpstream
from service import free_port
from yarl import URL

from relay.app import build_app

ENVIRONMENTS = "/api/admin/projects/default/environments"


async def test_add_environment_is_forwarded_with_the_callers_key_and_body(
    make_relay: MakeClient, upstream: FakeUpstream
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
    make_relay: MakeClient, upstream: FakeUpstream, status: int, body: bytes, content_type: str
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
    make_relay: MakeClient, upstream: FakeUpstream, method: str, path: str, header: str | None
) -> None:
    relay = await make_relay()
    headers = {} if header is None else {"Authorization": header}
    response = await relay.request(method, path, json={"environment": "x"}, headers=headers)
    assert response.status == 401
    assert_error(await response.json(), "AuthenticationRequired")
    assert upstream.passed() == []


async def test_an_upstream_that_is_gone_gives_502(
    make_relay: MakeClient, upstream: FakeUpstream
) -> None:
    relay = await make_relay()
    await upstream.close()
    response = await relay.post(
        ENVIRONMENTS, json={"environment": "staging"}, headers=auth(ADMIN_KEY)
    )
    assert response.status == 502
    assert response.content_type == "application/json"
    assert_error(await response.json(), "BadGatewayError")


async def test_an_upstream_nobody_listens_on_gives_502(
    aiohttp_client: Any, tmp_path: Path, upstream: FakeUpstream
) -> None:
    settings = relay_settings(tmp_path / "relay", f"http://127.0.0.1:{free_port()}")
    relay = await aiohttp_client(build_app(settings))
    response = await relay.post(
        ENVIRONMENTS, json={"environment": "staging"}, headers=auth(ADMIN_KEY)
    )
    assert response.status == 502
    assert_error(await response.json(), "BadGatewayError")
    assert upstream.received == []


async def test_an_upstream_slower_than_the_timeout_gives_504(
    make_relay: MakeClient, upstream: FakeUpstream
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


async def test_query_strings_are_forwarded_as_sent(
    make_relay: MakeClient, upstream: FakeUpstream
) -> None:
    relay = await make_relay()
    query = "dryRun=true&name=a%23b%26c%2Bd%3De&tag=simple:x&pct=%25"
    upstream.script = [Answer(200)]
    added = await relay.post(
        URL(f"{ENVIRONMENTS}?{query}", encoded=True),
        json={"environment": "staging"},
        headers=auth(ADMIN_KEY),
    )
    assert added.status == 200
    assert [r.raw_path for r in upstream.received if r.raw_path.startswith(ENVIRONMENTS)] == [
        f"{ENVIRONMENTS}?{query}"
    ]


async def test_names_are_forwarded_as_one_path_segment(
    make_relay: MakeClient, upstream: FakeUpstream
) -> None:
    relay = await make_relay()
    for name in ("with%20space", "a%2Fb", "..%2F..%2Fedge%2Fvalidate", "..."):
        upstream.script = [Answer(200)]
        response = await relay.post(
            URL(f"/api/admin/projects/{name}/environments", encoded=True),
            json={"environment": "staging"},
            headers=auth(ADMIN_KEY),
        )
        assert response.status == 200, name
    assert [r.raw_path for r in upstream.received if r.raw_path.startswith("/api/admin")] == [
        "/api/admin/projects/with%20space/environments",
        "/api/admin/projects/a%2Fb/environments",
        "/api/admin/projects/..%2F..%2Fedge%2Fvalidate/environments",
        "/api/admin/projects/.../environments",
    ]


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/api/admin/projects/../environments"),
        ("POST", "/api/admin/projects/%2E%2E/environments"),
        ("POST", "/api/admin/projects/.%2e/environments"),
        ("POST", "/api/admin/projects/./environments"),
        ("POST", "/api/admin/projects/%2E/environments"),
    ],
)
async def test_dot_segments_never_reach_the_upstream(
    make_relay: MakeClient, upstream: FakeUpstream, method: str, path: str
) -> None:
    relay = await make_relay()
    response = await relay.request(
        method, URL(path, encoded=True), json={"environment": "x"}, headers=auth(ADMIN_KEY)
    )
    assert response.status == 404
    assert_error(await response.json(), "NotFoundError")
    assert upstream.passed() == []
