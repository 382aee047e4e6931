"""OFREP's change stream (``GET /ofrep/v1/events``, the bulk answer's ``eventStreams``):
what it sends and when, whom it takes, its bounds; and the refetch it triggers, which a
worker behind the announced revision answers once it has caught up.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import ADMIN_KEY, DEV_KEY, standalone_settings
from flagkit import ok, turn
from ofrepkit import BULK, FRONT, by_key, evaluate, standalone

from relay.app import build_app


@pytest.fixture
async def service(aiohttp_client: Any, tmp_path: Path) -> Any:
    return await standalone(aiohttp_client, tmp_path / "data")


async def test_the_stream_names_each_change_of_the_key_s_flags(service: Any) -> None:
    _, body, _ = await evaluate(service, context={"targetingKey": "u"})
    uri = body["eventStreams"][0]["endpoint"]["requestUri"]
    at = int(uri.rsplit("revision=", 1)[1])
    async with service.get(uri) as stream:
        assert stream.status == 200
        assert stream.headers["Content-Type"] == "text/event-stream"
        assert await stream.content.readuntil(b"\n\n") == b": connected\n\n"
        # a change elsewhere (another project) is none of this key's
        await turn(service, "elsewhere", on=False, project="other")
        await turn(service, "off")
        event = await asyncio.wait_for(stream.content.readuntil(b"\n\n"), 10)
        lines = event.decode().split("\n")
        revision = int(lines[0].removeprefix("id: "))
        assert revision > at
        assert lines[1] == "event: message"
        data = json.loads(lines[2].removeprefix("data: "))
        assert data == {"type": "refetchEvaluation", "etag": str(revision)}
    # the refetch it triggers gets the change
    _, body, _ = await evaluate(service, f"{BULK}?flagConfigEtag={revision}", {"targetingKey": "u"})
    assert by_key(body)["off"]["value"] is True
    # a client that reconnects holding an older revision is told at once
    async with service.get(uri, headers={"Last-Event-ID": str(at)}) as stream:
        await stream.content.readuntil(b"\n\n")
        event = await asyncio.wait_for(stream.content.readuntil(b"\n\n"), 5)
        assert event.startswith(f"id: {revision}\n".encode())


async def test_the_stream_takes_a_frontend_key_in_its_url_only(service: Any) -> None:
    for key, status in (("", 401), (DEV_KEY, 403), (ADMIN_KEY, 403), ("x" * 40, 401)):
        response = await service.get("/ofrep/v1/events", params={"key": key})
        assert response.status == status, key
        assert {"id", "name", "message", "details"} <= set(await response.json())


async def test_streams_past_their_bound_are_told_when_to_come_back(
    aiohttp_client: Any, tmp_path: Path
) -> None:
    settings = standalone_settings(tmp_path, init_frontend_api_tokens=[FRONT], stream_max_per_key=1)
    client = await aiohttp_client(build_app(settings))
    params = {"key": FRONT}
    async with client.get("/ofrep/v1/events", params=params) as first:
        assert first.status == 200
        await first.content.readuntil(b"\n\n")
        second = await client.get("/ofrep/v1/events", params=params)
        assert second.status == 429 and int(second.headers["Retry-After"]) >= 1


async def test_a_refetch_naming_a_revision_not_reached_waits_for_it(service: Any) -> None:
    """The stream that announced it may be another worker's: the refetch is answered with
    the change, not with the flags from before it."""
    _, body, _ = await evaluate(service, context={"targetingKey": "u"})
    at = int(body["eventStreams"][0]["endpoint"]["requestUri"].rsplit("=", 1)[1])
    path = f"{BULK}?flagConfigEtag={at + 1}"
    waiting = asyncio.ensure_future(evaluate(service, path, {"targetingKey": "u"}))
    await asyncio.sleep(0.3)
    assert not waiting.done()
    await ok(
        service, "POST", "/api/admin/projects/default/features/off/environments/development/on"
    )
    _, body, _ = await asyncio.wait_for(waiting, 10)
    assert by_key(body)["off"]["value"] is True


async def test_an_idle_stream_keeps_alive_and_ends_when_its_key_is_revoked(
    aiohttp_client: Any, tmp_path: Path
) -> None:
    """A stream with nothing to say gets a keep-alive every ``stream_keepalive``; once its
    key is revoked it ends (the delta stream's life and OFREP's are one ``follow``)."""
    service = await standalone(aiohttp_client, tmp_path / "data", stream_keepalive=0.3)
    body = {"type": "frontend", "environment": "development", "projects": ["default"]}
    created = await ok(service, "POST", "/api/admin/api-tokens", body, status=201)
    async with service.get("/ofrep/v1/events", params={"key": created["secret"]}) as stream:
        assert stream.status == 200, await stream.text()
        assert await stream.content.readuntil(b"\n\n") == b": connected\n\n"
        kept = await asyncio.wait_for(stream.content.readuntil(b"\n\n"), 3)
        assert kept == b": keep-alive\n\n"
        await ok(service, "DELETE", f"/api/admin/api-tokens/{created['id']}", status=200)
        await asyncio.wait_for(stream.content.read(), 5)
        assert stream.content.at_eof()
