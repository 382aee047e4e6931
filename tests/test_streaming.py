"""``GET /api/client/streaming`` of the standalone service: server-sent events as the SDKs
read them (``unleash-connected``, ``unleash-updated``, ``id:``), what was missed replayed
after ``Last-Event-ID``, keep-alive comments on an idle stream, streams ended at shutdown."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from conftest import DEV_KEY, auth
from flagkit import create_flag, turn

STREAM = "/api/client/streaming"


class Events:
    """The events (and comments) of one open stream, read as they come."""

    def __init__(self, response: Any) -> None:
        self.response = response

    async def next(self, within: float = 10.0) -> dict[str, Any]:
        """The next event or comment: {"event", "id", "data"} or {"comment"}; {"end"} when
        the stream ended."""
        fields: dict[str, Any] = {}
        async with asyncio.timeout(within):
            while True:
                line = (await self.response.content.readline()).decode()
                if line == "":
                    return {"end": True}
                line = line.rstrip("\n")
                if line == "":
                    if fields:
                        return fields
                    continue
                if line.startswith(":"):
                    fields["comment"] = line[1:].strip()
                    continue
                name, _, value = line.partition(": ")
                fields[name] = json.loads(value) if name == "data" else value


async def open_stream(client: Any, last_event_id: str | None = None) -> Events:
    headers = {**auth(DEV_KEY), "Unleash-Client-Spec": "5.2.0"}
    if last_event_id is not None:
        headers["Last-Event-ID"] = last_event_id
    response = await client.get(STREAM, headers=headers)
    assert response.status == 200
    assert response.headers["Content-Type"] == "text/event-stream"
    return Events(response)


async def test_connected_then_updated_then_replayed_after_last_event_id(client: Any) -> None:
    await create_flag(client, "checkout")
    stream = await open_stream(client)
    connected = await stream.next()
    assert connected["event"] == "unleash-connected"
    [hydration] = connected["data"]["events"]
    assert hydration["type"] == "hydration"
    assert connected["id"] == str(hydration["eventId"])

    await turn(client, "checkout")
    updated = await stream.next()
    assert updated["event"] == "unleash-updated"
    [event] = updated["data"]["events"]
    assert (event["type"], event["feature"]["enabled"]) == ("feature-updated", True)
    assert updated["id"] == str(event["eventId"])
    stream.response.close()

    await turn(client, "checkout", on=False)  # while the client is away
    again = await open_stream(client, updated["id"])
    missed = await again.next()
    assert missed["event"] == "unleash-connected"
    assert [(e["type"], e["feature"]["enabled"]) for e in missed["data"]["events"]] == [
        ("feature-updated", False)
    ]
    again.response.close()


async def test_an_idle_stream_gets_keep_alive_comments(make_client: Any) -> None:
    client = await make_client(stream_keepalive=0.2)
    stream = await open_stream(client)
    assert (await stream.next())["event"] == "unleash-connected"
    assert await stream.next(within=5) == {"comment": "keep-alive"}
    assert await stream.next(within=5) == {"comment": "keep-alive"}
    stream.response.close()


async def test_shutdown_ends_streams(client: Any) -> None:
    stream = await open_stream(client)
    assert (await stream.next())["event"] == "unleash-connected"
    await client.app.shutdown()  # what the server runs first when it stops
    assert await stream.next(within=5) == {"end": True}
