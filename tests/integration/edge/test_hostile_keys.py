"""Keys from hostile callers (issue 14): a relay's key checks are no amplifier (one upstream
call per batch, bounded, cached apart, never in the flusher's way), and guessing keys from
one address meets a limit that callers with valid keys never feel."""

from __future__ import annotations

import asyncio
import logging
import secrets
import socket
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from conftest import (
    ADMIN_KEY,
    DEV_KEY,
    PROD_KEY,
    MakeClient,
    assert_error,
    auth,
    bulk,
    metric,
    standalone_settings,
)
from fake_upstream import Answer, FakeUpstream
from keykit import (  # noqa: F401  (upstream_keys: the fixture)
    UP_ADMIN_KEY,
    UP_DEV_KEY,
    UP_PROD_KEY,
    send_bulk,
    upstream_keys,
)
from service import eventually

from relay.api.throttle import client_address
from relay.app import build_app
from relay.edge.key_resolver import CONCURRENT_CHECKS, MAX_WAITING
from relay.edge.key_words import MAX_REFUSED
from relay.wire.common import MAX_LIST


def made_up(count: int) -> list[str]:
    return [f"default:development.{secrets.token_hex(16)}" for _ in range(count)]


async def validate(client: Any, tokens: list[str]) -> Any:
    return await client.post("/edge/validate", json={"tokens": tokens})


async def scraped(client: Any, name: str) -> float:
    """A metric's value from the Prometheus endpoint."""
    text = await (await client.get("/internal-backstage/metrics")).text()
    [value] = [line.split()[-1] for line in text.splitlines() if line.startswith(f"{name} ")]
    return float(value)


async def test_one_validate_request_is_one_upstream_call(
    make_relay: MakeClient, upstream: FakeUpstream
) -> None:
    """On today's main each key of the request was one upstream call (100 for 100 keys)."""
    relay = await make_relay(client_tokens=[])
    tokens = [*made_up(MAX_LIST - 1), UP_DEV_KEY]
    response = await validate(relay, tokens)
    assert response.status == 200
    assert [t["token"] for t in (await response.json())["tokens"]] == [UP_DEV_KEY]
    assert upstream.validated() == [tokens]
    again = await validate(relay, tokens)  # every answer is cached, the invalid ones too
    assert [t["token"] for t in (await again.json())["tokens"]] == [UP_DEV_KEY]
    assert upstream.validate_calls == 1


def raw_post(port: int, key: bytes) -> bytes:
    """A bulk post whose Authorization header is ``key`` as bytes (not always UTF-8)."""
    request = (
        b"POST /api/client/metrics/bulk HTTP/1.1\r\nHost: x\r\nAuthorization: "
        + key
        + b"\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
    )
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request)
        return sock.recv(65536)


async def test_what_cannot_be_a_key_is_refused_without_asking(
    make_relay: MakeClient, upstream: FakeUpstream, caplog: pytest.LogCaptureFixture
) -> None:
    """On today's main a key header that is not UTF-8 was sent on to the upstream: a 500."""
    relay = await make_relay(client_tokens=[])
    for key in (b"default:development.\xff\xfe-not-utf-8", b"not a key at all", b"a:b.short"):
        answer = await asyncio.to_thread(raw_post, relay.server.port, key)
        assert answer.startswith(b"HTTP/1.1 401 "), answer
    response = await validate(relay, ["caf\u00e9:development.secret-secret", "x", UP_DEV_KEY])
    assert [t["token"] for t in (await response.json())["tokens"]] == [UP_DEV_KEY]
    assert upstream.validated() == [[UP_DEV_KEY]]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


async def test_made_up_keys_never_push_out_a_key_in_use(
    make_relay: MakeClient, upstream: FakeUpstream
) -> None:
    """On today's main 10,000 made-up keys evicted a validated key from the one cache, and
    the SDK using it got 503 once the upstream went down."""
    relay = await make_relay(client_tokens=[], auth_failure_limit=0)
    assert (await send_bulk(relay, UP_DEV_KEY)).status == 202
    for _ in range(MAX_REFUSED // MAX_LIST + 1):
        assert (await validate(relay, made_up(MAX_LIST))).status == 200
    upstream.validate_down = True
    assert (await send_bulk(relay, UP_DEV_KEY)).status == 202


async def test_key_checks_are_bounded_and_never_hold_up_the_flusher(
    make_relay: MakeClient, upstream: FakeUpstream
) -> None:
    """On today's main 150 checks against a slow upstream were 150 upstream calls, which
    took the connections the flusher needed: its batches waited for them."""
    relay = await make_relay(client_tokens=[DEV_KEY], auth_failure_limit=0, upstream_timeout=60)
    upstream.validate_hold = release = asyncio.Event()
    url = relay.make_url("/edge/validate")
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as callers:
        checks = [
            asyncio.create_task(callers.post(url, json={"tokens": made_up(1)})) for _ in range(150)
        ]
        await eventually(lambda: upstream.validate_in_flight >= CONCURRENT_CHECKS)
        assert (await send_bulk(relay, DEV_KEY, [metric(yes=7)])).status == 202
        await eventually(lambda: upstream.totals() == {("f1", "app"): (7, 0)})
        assert (
            upstream.validate_in_flight == CONCURRENT_CHECKS
        )  # the checks still wait on the upstream

        async def all_waiting() -> bool:
            return await scraped(relay, "relay_key_checks_waiting") == 150

        await eventually(all_waiting)
        release.set()
        answers = await asyncio.gather(*checks)
        assert [a.status for a in answers] == [200] * 150
    assert upstream.most_validate_in_flight == CONCURRENT_CHECKS
    # the first checks alone, then the 146 keys that queued behind them, 100 a call
    assert upstream.validate_calls == CONCURRENT_CHECKS + 2


async def test_past_the_waiting_bound_unknown_keys_get_503_at_once(
    make_relay: MakeClient, upstream: FakeUpstream
) -> None:
    relay = await make_relay(client_tokens=[], auth_failure_limit=0, upstream_timeout=60)
    upstream.validate_hold = release = asyncio.Event()
    waiting = [
        asyncio.create_task(validate(relay, made_up(MAX_LIST)))
        for _ in range(MAX_WAITING // MAX_LIST)
    ]

    async def all_waiting() -> bool:
        return await scraped(relay, "relay_key_checks_waiting") == MAX_WAITING

    await eventually(all_waiting)
    refused = await asyncio.wait_for(validate(relay, made_up(1)), 10)
    assert refused.status == 503
    assert_error(await refused.json(), "ServiceUnavailableError")
    release.set()
    assert [(await a).status for a in waiting] == [200] * len(waiting)


async def test_invalid_keys_from_one_address_meet_a_limit(make_client: MakeClient) -> None:
    """On today's main 22,000 guesses of an admin key in 5 s met no resistance."""
    client = await make_client(auth_failure_limit=5, auth_failure_window=3600)
    failures = await scraped(client, "relay_auth_failures_total")
    throttled = await scraped(client, "relay_auth_throttled_total")
    for key in made_up(5):
        guess = await client.get("/api/admin/projects/default", headers=auth(key))
        assert guess.status == 401
    for request in (
        client.get("/api/admin/projects/default", headers=auth(made_up(1)[0])),
        client.post("/api/client/metrics/bulk", json=bulk(), headers=auth(made_up(1)[0])),
        validate(client, made_up(1)),
    ):
        refused = await request
        assert refused.status == 429
        assert_error(await refused.json(), "TooManyRequestsError")
        assert 600 <= int(refused.headers["Retry-After"]) <= 3600
    # callers with valid keys from the same address are served as before
    assert (await client.get("/api/admin/projects/default", headers=auth(ADMIN_KEY))).status == 200
    body = bulk([metric(yes=1)])
    ok = await client.post("/api/client/metrics/bulk", json=body, headers=auth(DEV_KEY))
    assert ok.status == 202
    known = await validate(client, [DEV_KEY, PROD_KEY])
    assert len((await known.json())["tokens"]) == 2
    assert await scraped(client, "relay_auth_failures_total") == failures + 5
    assert await scraped(client, "relay_auth_throttled_total") == throttled + 3


async def test_guesses_through_a_relay_stop_before_the_upstream(
    make_relay: MakeClient, upstream: FakeUpstream
) -> None:
    relay = await make_relay(auth_failure_limit=MAX_LIST, auth_failure_window=3600)
    assert (await validate(relay, made_up(MAX_LIST))).status == 200
    for request in (validate(relay, made_up(MAX_LIST)), send_bulk(relay, made_up(1)[0])):
        refused = await request
        assert refused.status == 429
        assert_error(await refused.json(), "TooManyRequestsError")
    assert upstream.validate_calls == 1  # the guesses past the limit never left the relay
    assert (await send_bulk(relay, DEV_KEY)).status == 202  # a configured key: never limited


async def test_a_key_that_could_not_be_checked_costs_nothing(
    make_relay: MakeClient, upstream: FakeUpstream
) -> None:
    relay = await make_relay(client_tokens=[], auth_failure_limit=1)
    upstream.validate_down = True
    for _ in range(3):
        assert (await send_bulk(relay, UP_PROD_KEY)).status == 503
    upstream.validate_down = False

    async def accepted() -> bool:
        body = [metric(env="production", yes=1)]
        return (await send_bulk(relay, UP_PROD_KEY, body)).status == 202

    await eventually(accepted)


async def test_requests_at_once_with_one_new_key_spend_one_check(
    make_relay: MakeClient, upstream: FakeUpstream
) -> None:
    """A fleet sharing a key the relay has not seen starts at once: the requests waiting on
    one check of it spend what one key does (before, one budget each: 29 of 2,000 streams
    at the defaults got 429 for a valid key). Should the key prove invalid, each of them
    is charged."""
    relay = await make_relay(client_tokens=[], auth_failure_limit=2, auth_failure_window=3600)
    upstream.validate_hold = release = asyncio.Event()
    fleet = [
        asyncio.create_task(send_bulk(relay, UP_PROD_KEY, [metric(env="production")]))
        for _ in range(20)
    ]
    await eventually(lambda: upstream.validate_in_flight == 1)
    release.set()
    assert [(await posted).status for posted in fleet] == [202] * 20
    assert upstream.validate_calls == 1

    upstream.validate_hold = release = asyncio.Event()
    [guess] = made_up(1)
    guesses = [asyncio.create_task(send_bulk(relay, guess)) for _ in range(5)]
    await eventually(lambda: upstream.validate_in_flight == 1)
    release.set()
    assert [(await guessed).status for guessed in guesses] == [401] * 5
    assert (await send_bulk(relay, made_up(1)[0])).status == 429  # 5 spent, of 2


async def test_an_upstream_that_answers_429_is_heard(
    make_relay: MakeClient, upstream: FakeUpstream
) -> None:
    """A relay is one address to its upstream, whose budget of invalid keys it may spend:
    its callers are then told to come back later (429), and the upstream is left alone."""
    relay = await make_relay(client_tokens=[])
    assert (await send_bulk(relay, UP_DEV_KEY)).status == 202
    upstream.validate_answer = Answer(429, headers={"Retry-After": "30"})
    for request in (validate(relay, made_up(3)), send_bulk(relay, UP_PROD_KEY)):
        refused = await request
        assert refused.status == 429
        assert_error(await refused.json(), "TooManyRequestsError")
        assert 1 <= int(refused.headers["Retry-After"]) <= 30
    assert upstream.validate_calls == 2  # one for UP_DEV_KEY, one refused; then none
    assert (await send_bulk(relay, UP_DEV_KEY)).status == 202  # known keys are still served


async def test_short_pinned_secrets_are_warned_about(
    aiohttp_client: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    weak = "*:*.letmein1"
    settings = standalone_settings(tmp_path, init_admin_api_tokens=[ADMIN_KEY, weak])
    with caplog.at_level(logging.WARNING, logger="relay.api.auth"):
        await aiohttp_client(build_app(settings))
    [warning] = [r for r in caplog.records if "RELAY_INIT_ADMIN" in r.getMessage()]
    assert "short secret" in warning.getMessage()
    assert warning.__dict__["key"] == "*:*.****"
    assert "letmein1" not in caplog.text


@pytest.mark.parametrize(
    ("remote", "counted_as"),
    [
        ("192.0.2.7", "192.0.2.7"),
        ("::ffff:192.0.2.7", "192.0.2.7"),  # IPv4 through an IPv6 socket: the same caller
        ("2001:db8:1:2:aaaa::1", "2001:db8:1:2::/64"),
        ("2001:db8:1:2:bbbb::9", "2001:db8:1:2::/64"),  # one host's block, one budget
        (None, "local"),
    ],
)
def test_addresses_are_counted_per_host(remote: str | None, counted_as: str) -> None:
    assert client_address(remote) == counted_as
