"""Which SDK keys a relay (mode=relay) accepts: configured keys, and keys its upstream vouches
for through ``POST /edge/validate``, cached, and kept while the upstream cannot be asked."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from conftest import (
    DEV_KEY,
    PROD_KEY,
    MakeClient,
    assert_error,
    auth,
    bulk,
    metric,
    relay_settings,
)
from fake_upstream import FakeUpstream
from keykit import (  # noqa: F401  (upstream_keys: the fixture)
    UNKNOWN_KEY,
    UP_ADMIN_KEY,
    UP_DEV_KEY,
    UP_PROD_KEY,
    send_bulk,
    upstream_keys,
)
from service import eventually, sample

from relay.app import build_app

pytestmark = pytest.mark.workers  # at one worker and at two (conftest.make_relay)


def registration() -> dict[str, Any]:
    return {
        "appName": "app",
        "instanceId": "i-1",
        "environment": "development",
        "sdkVersion": "unleash-client-python:6.0.0",
        "strategies": ["default"],
        "started": "2024-01-01T00:00:00Z",
        "interval": 15,
    }


async def validate(relay: Any, tokens: list[str]) -> Any:
    return await relay.post("/edge/validate", json={"tokens": tokens})


async def test_a_configured_key_is_accepted_without_asking_upstream(
    make_relay: MakeClient, upstream: FakeUpstream
) -> None:
    relay = await make_relay()  # client_tokens = [DEV_KEY, PROD_KEY]
    assert (await send_bulk(relay, DEV_KEY, [metric(yes=3, no=1)])).status == 202
    bearer = {"Authorization": f"Bearer {PROD_KEY}"}
    body = bulk([metric(env="production", yes=2)])
    assert (await relay.post("/api/client/metrics/bulk", json=body, headers=bearer)).status == 202
    await eventually(lambda: upstream.totals() == {("f1", "app"): (5, 1)})
    assert upstream.validate_calls == 0
    assert upstream.validated() == []


async def test_an_unlisted_key_is_checked_upstream_once_then_cached(
    make_relay: MakeClient, upstream: FakeUpstream
) -> None:
    relay = await make_relay(client_tokens=[])
    for _ in range(5):
        assert (await send_bulk(relay, UP_DEV_KEY)).status == 202
    assert (
        await relay.post(
            "/api/client/register", json=registration(), headers=auth(f"Bearer {UP_DEV_KEY}")
        )
    ).status == 202
    assert upstream.validate_calls == 1
    assert upstream.validated() == [[UP_DEV_KEY]]
    await eventually(lambda: upstream.totals() == {("f1", "app"): (5, 0)})


async def test_concurrent_first_requests_for_one_key_make_one_upstream_check(
    make_relay: MakeClient, upstream: FakeUpstream, relay_workers: int
) -> None:
    """One check per worker at most: requests at once on one worker share its check."""
    relay = await make_relay(client_tokens=[])
    upstream.validate_delay = 0.3  # every request arrives while the first check is pending
    answers = await asyncio.gather(*(send_bulk(relay, UP_DEV_KEY) for _ in range(20)))
    assert [a.status for a in answers] == [202] * 20
    assert upstream.validate_calls == relay_workers
    rejected = await asyncio.gather(*(send_bulk(relay, UNKNOWN_KEY) for _ in range(10)))
    assert [r.status for r in rejected] == [401] * 10
    assert upstream.validate_calls == 2 * relay_workers
    await eventually(lambda: upstream.totals() == {("f1", "app"): (20, 0)})


async def test_a_key_the_upstream_refuses_gets_401_and_the_answer_is_remembered(
    make_relay: MakeClient, upstream: FakeUpstream
) -> None:
    """Remembered by every worker: the upstream's word on a key is the relay's
    (``relay.edge.key_words``)."""
    relay = await make_relay(client_tokens=[])
    for _ in range(3):
        response = await send_bulk(relay, UNKNOWN_KEY)
        assert response.status == 401
        assert_error(await response.json(), "AuthenticationRequired")
    assert upstream.validate_calls == 1
    missing = await relay.post("/api/client/metrics/bulk", json=bulk([metric(yes=1)]))
    assert missing.status == 401
    assert_error(await missing.json(), "AuthenticationRequired")
    assert upstream.validate_calls == 1


async def test_the_environment_of_a_validated_key_decides_which_entries_are_kept(
    make_relay: MakeClient, upstream: FakeUpstream
) -> None:
    relay = await make_relay(client_tokens=[])
    body = [
        metric("kept", env="production", yes=4, no=1),
        metric("dropped", env="development", yes=9),
    ]
    assert (await send_bulk(relay, UP_PROD_KEY, body)).status == 202
    # A development marker sent after it: once it is upstream, a development entry stored
    # before it would be there too (same environment, so same or earlier batch).
    assert (await send_bulk(relay, UP_DEV_KEY, [metric("marker", yes=1)])).status == 202
    await eventually(lambda: ("marker", "app") in upstream.totals())
    await eventually(lambda: ("kept", "app") in upstream.totals())
    assert upstream.totals() == {("kept", "app"): (4, 1), ("marker", "app"): (1, 0)}
    for sent in upstream.bulks:
        environments = {m["environment"] for m in sent.json()["metrics"]}
        expected = {PROD_KEY: {"production"}, DEV_KEY: {"development"}}
        assert environments <= expected[sent.headers["Authorization"]]


async def test_the_environment_is_read_from_the_key_when_upstream_answers_as_unleash(
    make_relay: MakeClient, upstream: FakeUpstream
) -> None:
    """Unleash's ``/edge/validate`` answers ``{token, type, projects}`` only."""
    upstream.unleash_shape = True
    relay = await make_relay(client_tokens=[])
    body = [metric("kept", env="production", yes=2), metric("dropped", env="development", yes=7)]
    assert (await send_bulk(relay, UP_PROD_KEY, body)).status == 202
    assert (await send_bulk(relay, UP_DEV_KEY, [metric("marker", yes=1)])).status == 202
    await eventually(lambda: ("marker", "app") in upstream.totals())
    await eventually(lambda: ("kept", "app") in upstream.totals())
    assert upstream.totals() == {("kept", "app"): (2, 0), ("marker", "app"): (1, 0)}
    answer = await validate(relay, [UP_PROD_KEY])
    assert (await answer.json())["tokens"][0]["environment"] == "production"


async def test_a_validated_key_outlives_its_ttl_while_validation_is_down(
    make_relay: MakeClient, upstream: FakeUpstream
) -> None:
    relay = await make_relay(client_tokens=[], key_cache_ttl=0.05)
    assert (await send_bulk(relay, UP_DEV_KEY)).status == 202
    assert upstream.validate_calls == 1
    upstream.validate_down = True

    async def asked_again() -> bool:
        assert (await send_bulk(relay, UP_DEV_KEY)).status == 202
        return upstream.validate_calls >= 2  # the TTL ran out and the relay asked again

    await eventually(asked_again)
    for _ in range(3):
        assert (await send_bulk(relay, UP_DEV_KEY)).status == 202

    unknown = await send_bulk(relay, UNKNOWN_KEY)
    assert unknown.status == 503
    assert_error(await unknown.json(), "ServiceUnavailableError")
    never_seen = await send_bulk(relay, UP_PROD_KEY, [metric(env="production", yes=1)])
    assert never_seen.status == 503  # valid upstream, but it cannot say so now
    assert_error(await never_seen.json(), "ServiceUnavailableError")

    # a 503 is not remembered: once the hold-off after a failed call (HOLD_OFF) is over, the
    # next request asks again (each worker's hold-off: with two, requests alternate, so the
    # two keys are asked of a worker each until both have asked again)
    upstream.validate_down = False

    async def asked_after_hold_off() -> bool:
        refused = (await send_bulk(relay, UNKNOWN_KEY)).status == 401
        prod = await send_bulk(relay, UP_PROD_KEY, [metric(env="production", yes=1)])
        return refused and prod.status == 202

    await eventually(asked_after_hold_off)


async def test_a_validated_key_outlives_its_ttl_while_the_upstream_is_gone(
    make_relay: MakeClient, upstream: FakeUpstream
) -> None:
    relay = await make_relay(client_tokens=[], key_cache_ttl=0.05)
    assert (await send_bulk(relay, UP_DEV_KEY)).status == 202
    assert (await validate(relay, [UP_PROD_KEY])).status == 200
    await upstream.close()

    async def failed_validations() -> float:
        text = await (await relay.get("/internal-backstage/metrics")).text()
        name = "relay_upstream_request_duration_seconds_count"
        return sample(text, name, operation="validate", outcome="error")

    async def accepted_past_its_ttl(key: str, metrics: list[dict[str, Any]]) -> bool:
        before = await failed_validations()
        assert (await send_bulk(relay, key, metrics)).status == 202
        return await failed_validations() > before  # expired: the relay could not ask again

    await eventually(lambda: accepted_past_its_ttl(UP_DEV_KEY, [metric(yes=1)]))
    await eventually(lambda: accepted_past_its_ttl(UP_PROD_KEY, [metric(env="production", yes=1)]))
    for key in (UNKNOWN_KEY, UP_ADMIN_KEY):
        response = await send_bulk(relay, key)
        assert response.status == 503, key
        assert_error(await response.json(), "ServiceUnavailableError")
    answer = await validate(relay, [UP_DEV_KEY])
    assert answer.status == 200
    assert [t["token"] for t in (await answer.json())["tokens"]] == [UP_DEV_KEY]


@pytest.mark.parametrize(
    "path", ["/api/client/metrics/bulk", "/api/client/metrics", "/api/client/register"]
)
async def test_an_admin_key_on_a_client_endpoint_gets_403(
    make_relay: MakeClient, upstream: FakeUpstream, path: str
) -> None:
    relay = await make_relay(client_tokens=[])
    body: dict[str, Any] = {
        "/api/client/metrics/bulk": bulk([metric(yes=1)]),
        "/api/client/metrics": {"appName": "app", "bucket": None},
        "/api/client/register": registration(),
    }[path]
    for _ in range(2):
        response = await relay.post(path, json=body, headers=auth(UP_ADMIN_KEY))
        assert response.status == 403
        assert_error(await response.json(), "NoAccessError")
    assert upstream.validate_calls == 1


async def test_the_relays_edge_validate_answers_by_the_same_rules(
    make_relay: MakeClient, upstream: FakeUpstream
) -> None:
    relay = await make_relay(client_tokens=[DEV_KEY])
    asked = [DEV_KEY, UP_PROD_KEY, UNKNOWN_KEY, f"Bearer {UP_DEV_KEY}", UP_PROD_KEY]
    response = await validate(relay, asked)
    assert response.status == 200
    assert response.content_type == "application/json"
    assert (await response.json()) == {
        "tokens": [
            {
                "token": DEV_KEY,
                "type": "client",
                "projects": ["default"],
                "environment": "development",
            },
            {
                "token": UP_PROD_KEY,
                "type": "client",
                "projects": ["default"],
                "environment": "production",
            },
            {
                "token": UP_DEV_KEY,
                "type": "client",
                "projects": ["default"],
                "environment": "development",
            },
        ]
    }
    # The configured key was not asked about; each other key once, and the cache is shared
    # with the client endpoints.
    assert sorted(k for keys in upstream.validated() for k in keys) == sorted(
        [UP_PROD_KEY, UNKNOWN_KEY, UP_DEV_KEY]
    )
    calls = upstream.validate_calls
    assert (await send_bulk(relay, UP_PROD_KEY, [metric(env="production", yes=1)])).status == 202
    assert (await send_bulk(relay, UNKNOWN_KEY)).status == 401
    assert (await validate(relay, asked)).status == 200
    assert upstream.validate_calls == calls  # every worker knows what the upstream said

    admin = await validate(relay, [UP_ADMIN_KEY])
    assert [t["type"] for t in (await admin.json())["tokens"]] == ["admin"]

    upstream.validate_down = True
    down = await validate(relay, [DEV_KEY, "default:production.not-seen-before-0123456789"])
    assert down.status == 503
    assert_error(await down.json(), "ServiceUnavailableError")
    still = await validate(relay, [DEV_KEY, UP_PROD_KEY])
    assert still.status == 200
    assert [t["token"] for t in (await still.json())["tokens"]] == [DEV_KEY, UP_PROD_KEY]


async def test_a_relay_behind_a_relay_validates_keys_through_it(
    make_relay: MakeClient, upstream: FakeUpstream, aiohttp_client: Any, tmp_path: Path
) -> None:
    """SDK -> relay B -> relay A -> upstream: B asks A's ``/edge/validate``, A asks upstream;
    the counts reach the upstream through both buffers."""
    relay_a = await make_relay(client_tokens=[])  # accepts B's flush keys via upstream too
    url_a = str(relay_a.make_url("")).rstrip("/")
    settings_b = relay_settings(tmp_path / "relay-b", url_a, client_tokens=[], instance_id="b")
    relay_b = await aiohttp_client(build_app(settings_b))

    body = [metric("chained", env="production", yes=2, no=1), metric("other-env", yes=5)]
    assert (await send_bulk(relay_b, UP_PROD_KEY, body)).status == 202
    assert [UP_PROD_KEY] in upstream.validated()  # asked by relay A on behalf of relay B
    refused = await send_bulk(relay_b, UNKNOWN_KEY)
    assert refused.status == 401
    assert_error(await refused.json(), "AuthenticationRequired")

    await eventually(lambda: upstream.totals() == {("chained", "app"): (2, 1)})
    assert {b.headers["Authorization"] for b in upstream.bulks} == {PROD_KEY}


async def test_a_strict_relay_says_why_it_refuses_a_key_valid_upstream(
    make_relay: MakeClient, upstream: FakeUpstream, tmp_path: Path
) -> None:
    """With ``strict_keys``, a key the upstream vouches for outside the configured scopes is
    401 saying why, in the names the relay's settings were given by: relay's own here (the
    environment), the Unleash Proxy's (its projects) when ``relay proxy`` started it."""
    relay = await make_relay(client_tokens=[DEV_KEY], strict_keys=True)
    for _ in range(2):
        response = await send_bulk(relay, UP_PROD_KEY)
        assert response.status == 401
        assert (await response.json())["message"] == (
            "The provided API token is invalid or has expired: valid upstream, but its"
            " environment production is outside client_tokens (RELAY_CLIENT_TOKENS)"
        )
    unknown = await send_bulk(relay, UNKNOWN_KEY)
    assert (await unknown.json())["message"] == "The provided API token is invalid or has expired"
    narrow = "shop:development.narrow-scope-secret-0123456789"
    proxied = await make_relay(
        tmp_path / "proxy", client_tokens=[narrow], strict_keys=True, setting_names="proxy"
    )
    response = await send_bulk(proxied, UP_DEV_KEY)
    assert (await response.json())["message"].endswith(
        "its projects (default) are not all among those UNLEASH_API_TOKEN has for environment"
        " development"
    )
