"""The relay's flag cache against a hostile or broken upstream, file and key: a refusal
is not forgotten without asking the upstream, answers are read to a bound, only what can be
served is taken, and a damaged row of the file does not stop a start."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import logging
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from cachekit import OTHER_DEV_KEY, get, stored_scopes
from conftest import DEV_KEY, MakeClient, relay_settings
from fake_upstream import Answer, FakeUpstream
from service import eventually

from relay.app import build_app
from relay.edge import key_resolver
from relay.edge.flags import refusals
from relay.edge.flags.store import FlagScope
from relay.edge.upstream import MAX_ANSWER_BYTES

pytestmark = pytest.mark.workers  # at one worker and at two (conftest.make_relay)

SCOPE = FlagScope("development", ("default",))
SDK_METRICS = {
    "appName": "shop",
    "instanceId": "i-1",
    "bucket": {"start": "2026-01-01T00:00:00Z", "stop": "2026-01-01T00:01:00Z", "toggles": {}},
}


async def test_a_refused_key_is_asked_upstream_again_before_it_is_served(
    make_relay: MakeClient, upstream: FakeUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A key the upstream refused for flags is refused on every path of the relay; once its
    refusal has run out, it is served only if the upstream answers for it: another key of
    its scope holding the copy does not vouch for it."""
    monkeypatch.setattr(refusals, "REFUSED_TTL", 0.3)
    monkeypatch.setattr(key_resolver, "NEGATIVE_TTL", 0.3)
    upstream.valid_keys[OTHER_DEV_KEY] = "development"
    relay = await make_relay(features_refresh_interval=0.1, client_tokens=[])
    assert (await get(relay, key=OTHER_DEV_KEY))[0] == 200  # fetched with it
    assert (await get(relay, key=DEV_KEY))[0] == 200
    upstream.refused = {OTHER_DEV_KEY: 401}
    del upstream.valid_keys[OTHER_DEV_KEY]  # revoked

    async def refused() -> bool:
        return (await get(relay, key=OTHER_DEV_KEY))[0] == 401

    await eventually(refused, "the key refused at a refresh")
    posted = await relay.post(
        "/api/client/metrics", json=SDK_METRICS, headers={"Authorization": OTHER_DEV_KEY}
    )
    assert posted.status == 401  # refused on every path, not only for flags
    asked = upstream.validate_calls

    async def asked_again() -> bool:  # once the refusal has run out (each worker's refresh
        # with the key may have heard it again, and said it a moment later)
        assert (await get(relay, key=OTHER_DEV_KEY))[0] == 401
        return upstream.validate_calls > asked

    await eventually(asked_again, "the upstream asked again, and refusing")
    assert (await get(relay, key=DEV_KEY))[0] == 200

    upstream.refused = {}
    upstream.valid_keys[OTHER_DEV_KEY] = "development"
    await asyncio.sleep(0.4)
    assert (await get(relay, key=OTHER_DEV_KEY))[0] == 200  # accepted upstream again


async def test_an_answer_over_the_bound_is_not_read_and_the_copy_stays(
    make_relay: MakeClient, upstream: FakeUpstream, caplog: pytest.LogCaptureFixture
) -> None:
    """A gzip bomb: 40 kB on the wire, more than the bound once decoded."""
    relay = await make_relay(features_refresh_interval=0.1)
    status, before, _ = await get(relay)
    assert status == 200
    bomb = gzip.compress(b" " * (MAX_ANSWER_BYTES + 1))
    upstream.features_answer = Answer(200, {"Content-Encoding": "gzip"}, body=bomb)
    caplog.set_level(logging.WARNING, "relay.edge.flags.cache")

    def refused() -> bool:
        return any(getattr(r, "error", "") == "upstream answer too large" for r in caplog.records)

    await eventually(refused, "the answer refused")
    assert (await get(relay))[:2] == (200, before)


async def test_nan_from_the_upstream_is_not_passed_to_sdks(
    make_relay: MakeClient, upstream: FakeUpstream
) -> None:
    relay = await make_relay(features_refresh_interval=0.1)
    status, before, _ = await get(relay)
    assert status == 200
    body = b'{"version":2,"features":[{"name":"f1","project":"default","rollout":NaN}]}'
    upstream.features_answer = Answer(200, {"ETag": '"nan"'}, body=body)
    fetched = len(upstream.flag_fetches)
    await eventually(lambda: len(upstream.flag_fetches) > fetched + 1, "refreshes")
    assert (await get(relay))[:2] == (200, before)


@pytest.fixture
async def raw_upstream() -> AsyncIterator[str]:
    """An upstream whose flags come with an ETag that is not text (bytes no client can
    decode), as a broken proxy could send."""
    body = b'{"version":2,"features":[{"name":"f1","project":"default","strategies":[]}]}'

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = b'HTTP/1.1 200 OK\r\nETag: "\xe9!"\r\nContent-Type: application/json\r\n'
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while await reader.readuntil(b"\r\n\r\n"):
                writer.write(head + b"Content-Length: %d\r\n\r\n" % len(body) + body)
                await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    yield f"http://127.0.0.1:{port}"
    server.close()
    await server.wait_closed()


async def test_an_etag_that_is_no_text_is_not_kept_and_the_copy_is_stored(
    raw_upstream: str, tmp_path: Path, aiohttp_client: Any
) -> None:
    settings = relay_settings(tmp_path / "relay", raw_upstream, features_refresh_interval=0.1)
    relay = await aiohttp_client(build_app(settings))
    assert (await get(relay))[0] == 200
    await eventually(lambda: SCOPE in stored_scopes(tmp_path / "relay"), "the copy stored")
    with sqlite3.connect(tmp_path / "relay" / "cache.db") as conn:
        # the copies' (a scope claimed for its next fetch and not yet stored has none)
        copies = conn.execute("SELECT etag FROM flag_scopes WHERE body IS NOT NULL")
        assert {etag for (etag,) in copies} == {""}


@pytest.mark.parametrize(
    "damage",
    [
        "INSERT INTO flag_scopes (scope, body, etag, fetched_at, due_at, changed)"
        " VALUES ('garbage', x'7b7d', 'x', 1, 1, 99)",
        "UPDATE flag_scopes SET body = CAST(body AS TEXT)",
        "UPDATE flag_scopes SET fetched_at = 'yesterday'",
        "UPDATE flag_keys SET scope = '[\"development\"]'",
    ],
)
async def test_a_damaged_row_of_the_cache_does_not_stop_a_start(
    make_relay: MakeClient, upstream: FakeUpstream, tmp_path: Path, damage: str
) -> None:
    validated = "default:development.validated-upstream-secret-0123456789"
    upstream.valid_keys[validated] = "development"
    # refreshes due only every 15 minutes: the damaged row's scope is fetched at once all the same
    relay = await make_relay(client_tokens=[DEV_KEY], features_refresh_interval=900)
    assert (await get(relay, key=validated))[0] == 200
    await relay.close()
    with sqlite3.connect(tmp_path / "relay" / "cache.db") as conn:
        assert conn.execute("SELECT count(*) FROM flag_keys").fetchone() == (1,)
        conn.execute(damage)
    again = await make_relay(client_tokens=[DEV_KEY], features_refresh_interval=900)

    async def ready() -> bool:
        return (await again.get("/ready")).status == 200

    await eventually(ready, "ready")
    assert (await get(again))[0] == 200
    assert (await get(again, key=validated))[0] == 200
