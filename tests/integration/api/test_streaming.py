"""``GET /api/client/streaming`` of the standalone service: server-sent events as the SDKs
read them (``unleash-connected``, ``unleash-updated``, ``id:``), what was missed replayed
after ``Last-Event-ID``, keep-alive comments on an idle stream, streams ended at shutdown."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from conftest import DEV_KEY, auth
from flagkit import add_strategy, create_flag, ok, turn
from service import eventually, running, wait_until
from streamkit import STREAM, Events, memory_per_stream

from relay.api.connections import SLICE, WRITE_TIMEOUTS
from relay.api.streaming import STREAMS
from relay.central.flags.serving import HEARD


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


async def test_a_quiet_stream_gets_its_keep_alives_while_other_projects_change(
    make_client: Any,
) -> None:
    """Every change of the service woke each stream, which wrote nothing when its key saw
    none of it, and waited ``stream_keepalive`` again from there: a stream of a project
    nobody changed went silent for as long as other projects kept changing (38 s seen; the
    Python SDK drops a stream silent for 30 s). The keep-alive is due
    ``stream_keepalive`` after the stream's last write, whatever wakes it meanwhile."""
    client = await make_client(stream_keepalive=0.6)
    await ok(client, "POST", "/api/admin/projects", {"id": "busy", "name": "busy"}, status=201)
    body = {"environment": "development"}
    await ok(client, "POST", "/api/admin/projects/busy/environments", body)
    await create_flag(client, "elsewhere", project="busy")
    stream = await open_stream(client)  # DEV_KEY: project default only
    assert (await stream.next())["event"] == "unleash-connected"

    async def churn() -> None:
        on = True
        while True:
            await turn(client, "elsewhere", on=on, project="busy")
            on = not on
            await asyncio.sleep(0.1)

    churning = asyncio.create_task(churn())
    try:
        began = time.monotonic()
        for _ in range(3):
            assert await stream.next(within=1.5) == {"comment": "keep-alive"}
        assert time.monotonic() - began < 3.0
    finally:
        churning.cancel()
        stream.response.close()


async def test_shutdown_ends_streams(client: Any) -> None:
    stream = await open_stream(client)
    assert (await stream.next())["event"] == "unleash-connected"
    await client.app.shutdown()  # what the server runs first when it stops
    assert await stream.next(within=5) == {"end": True}


async def test_a_stream_past_the_bound_is_hydrated_then_told_to_poll(make_client: Any) -> None:
    client = await make_client(stream_max_per_key=1, stream_keepalive=0.2)
    first = await open_stream(client)
    assert (await first.next())["event"] == "unleash-connected"
    second = await open_stream(client)
    connected = await second.next()
    assert connected["event"] == "unleash-connected"
    assert connected["data"]["events"][0]["type"] == "hydration"  # it has flags
    assert await second.next() == {"event": "fetch-mode", "data": "polling"}
    assert await second.next() == {"end": True}
    first.response.close()
    await eventually(lambda: client.app[STREAMS].total == 0, "the first stream to be closed")
    third = await open_stream(client)  # room again
    assert (await third.next())["event"] == "unleash-connected"
    assert await third.next() == {"comment": "keep-alive"}  # a stream that stays
    third.response.close()


async def test_a_worker_full_of_streams_turns_new_ones_away(make_client: Any) -> None:
    client = await make_client(stream_max=0)
    stream = await open_stream(client)
    assert (await stream.next())["event"] == "unleash-connected"
    assert await stream.next() == {"event": "fetch-mode", "data": "polling"}
    assert await stream.next() == {"end": True}


async def test_a_client_that_does_not_read_is_cut_off(make_client: Any) -> None:
    """Its stream is closed once a write waits ``write_timeout``: the changes it does not
    read are not buffered for it without bound."""
    client = await make_client(write_timeout=0.5)
    await create_flag(client, "big")
    padding = {f"p{i}": "x" * 4000 for i in range(50)}
    big = {"name": "default", "parameters": padding}  # 200 kB an event
    await add_strategy(client, "big", big)
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    loop = asyncio.get_running_loop()
    await loop.sock_connect(sock, (client.host, client.port))
    request = f"GET {STREAM} HTTP/1.1\r\nHost: x\r\nAuthorization: {DEV_KEY}\r\n\r\n"
    await loop.sock_sendall(sock, request.encode())
    try:
        await eventually(lambda: client.app[STREAMS].total == 1, "the stream to open")
        timeouts = WRITE_TIMEOUTS._value.get()
        for i in range(200):  # 40 MB of events at most (past the kernel's buffers), never read
            await turn(client, "big", on=i % 2 == 0)
            await asyncio.sleep(0.05)  # each change its own event
            if client.app[STREAMS].total == 0:
                break
        await eventually(lambda: client.app[STREAMS].total == 0, "the stream to be cut off")
        assert WRITE_TIMEOUTS._value.get() == timeouts + 1
    finally:
        sock.close()


async def test_memory_per_stream_is_bounded(client: Any) -> None:
    """What an open stream holds in the worker (Python objects: its request, response,
    handler task, the tasks of its wait), measured with tracemalloc over 300 streams;
    the kernel's socket buffers come on top. The figure is printed."""
    await create_flag(client, "checkout")
    held = await memory_per_stream(client, DEV_KEY)
    print(f"memory per stream: {held / 1024:.1f} KiB")
    assert held < 64 * 1024


@pytest.mark.parametrize("backend", ["postgres"], indirect=True)  # instances share it
async def test_a_write_through_another_instance_is_announced(
    make_client: Any, database_url: str, tmp_path: Path
) -> None:
    """Two instances on one PostgreSQL: a write through one reaches the other's streams as
    it commits (LISTEN/NOTIFY), not at its next read of the revision."""
    writer = await make_client(tmp_path / "a")
    reader = await make_client(tmp_path / "b")
    await create_flag(writer, "checkout")
    stream = await open_stream(reader)
    connected = await stream.next()
    assert connected["event"] == "unleash-connected"

    async def both_listen() -> bool:
        conn = await asyncpg.connect(database_url)
        try:
            count = await conn.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                " AND query LIKE 'LISTEN %'"
            )
            return bool(count == 2)
        finally:
            await conn.close()

    await eventually(both_listen, "both instances to listen")
    heard = HEARD._value.get()
    started = time.monotonic()
    await turn(writer, "checkout")
    updated = await stream.next()
    took = time.monotonic() - started
    assert [e["feature"]["enabled"] for e in updated["data"]["events"]] == [True]
    assert HEARD._value.get() >= heard + 2  # announced to both instances
    print(f"another instance's write reached a stream in {took * 1000:.0f} ms")
    stream.response.close()


async def test_a_revoked_key_loses_its_stream(make_client: Any) -> None:
    client = await make_client(stream_keepalive=0.2)
    body = {"type": "client", "environment": "development", "projects": ["*"]}
    created = await ok(client, "POST", "/api/admin/api-tokens", body, status=201)
    response = await client.get(STREAM, headers=auth(created["secret"]))
    stream = Events(response)
    assert (await stream.next())["event"] == "unleash-connected"
    assert await stream.next() == {"comment": "keep-alive"}
    await ok(client, "DELETE", f"/api/admin/api-tokens/{created['id']}", status=200)
    assert await stream.next() in ({"end": True}, {"comment": "keep-alive"})
    assert await stream.next() == {"end": True}


async def test_head_answers_the_headers_and_ends(client: Any) -> None:
    response = await client.head(STREAM, headers=auth(DEV_KEY))
    assert response.status == 200
    assert response.headers["Content-Type"] == "text/event-stream"
    assert client.app[STREAMS].total == 0


async def test_a_last_event_id_of_other_digits_gets_a_hydration(client: Any) -> None:
    """``str.isdigit`` takes "\u00b2" (which ``int`` refuses: a 500) and "\u0661" (read as 1)."""
    await create_flag(client, "checkout")
    for made_up in ("\u00b2", "\u0661"):
        stream = await open_stream(client, made_up)
        connected = await stream.next()
        assert [e["type"] for e in connected["data"]["events"]] == ["hydration"]
        stream.response.close()


async def test_a_large_event_unread_is_held_a_slice_at_a_time(make_client: Any) -> None:
    """An event was handed to the transport whole, a copy for each stream: what the
    kernel did not take (a few MB) stayed in the worker for each client that reads
    nothing (50 streams of a 9.6 MB hydration took a standalone from 173 to 910 MB).
    It is written from the delta's one copy 64 KiB at a time, as answers are."""
    client = await make_client()
    padding = {f"p{i}": "x" * 4000 for i in range(60)}
    for i in range(36):  # 8.7 MB: more than the kernel's socket buffers take
        await create_flag(client, f"big{i:02d}")
        await add_strategy(client, f"big{i:02d}", {"name": "default", "parameters": padding})
    loop = asyncio.get_running_loop()
    socks = []
    for _ in range(3):
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.setblocking(False)
        await loop.sock_connect(sock, (client.host, client.port))
        request = f"GET {STREAM} HTTP/1.1\r\nHost: x\r\nAuthorization: {DEV_KEY}\r\n\r\n"
        await loop.sock_sendall(sock, request.encode())
        socks.append(sock)
    try:
        connections = client.server.runner.server.connections

        def held() -> list[int]:
            """What the worker holds for each connection that waits for its client."""
            transports = [c.transport for c in connections if c.transport is not None]
            return [n for t in transports if (n := t.get_write_buffer_size())]

        await eventually(lambda: client.app[STREAMS].total == 3 and held(), "streams stuck")
        assert max(held()) <= 3 * SLICE  # a slice past the transport's high-water mark
        stream = await open_stream(client)  # and a client that reads gets it all
        got = b""
        async with asyncio.timeout(30):
            while not got.endswith(b"\n\n"):
                got += await stream.response.content.readany()
        stream.response.close()
        data = got.partition(b"\ndata: ")[2]
        assert len(json.loads(data)["events"][0]["features"]) == 36
    finally:
        for sock in socks:
            sock.close()


def _stream(port: int) -> tuple[socket.socket, bytes]:
    """A stream opened on a raw socket: what came with its first event (a hint to poll
    comes in the same write, then the end)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(f"GET {STREAM} HTTP/1.1\r\nHost: x\r\nAuthorization: {DEV_KEY}\r\n\r\n".encode())
    got = b""
    while b"\n\n" not in got.partition(b"unleash-connected")[2]:
        got += sock.recv(65536)
    sock.settimeout(0.3)
    try:
        while chunk := sock.recv(65536):
            got += chunk
    except TimeoutError:
        pass  # a stream that stays
    return sock, got


@pytest.mark.process
@pytest.mark.parametrize("bound", ["RELAY_STREAM_MAX", "RELAY_STREAM_MAX_PER_KEY"])
def test_streams_whose_clients_left_make_room_at_once(tmp_path: Path, bound: str) -> None:
    """A stream whose client closed its connection counted against the bounds until its
    next write failed (a keep-alive later, up to 25 s): SDKs reconnecting at once (a proxy
    in front restarted) were turned away by their own dead streams, and the Node SDK then
    polls for good. The program, not the test server: that one cancels the handler of a
    connection that closes (``handler_cancellation``), the service does not."""
    env = {"RELAY_INIT_CLIENT_API_TOKENS": DEV_KEY, bound: "1", "RELAY_STREAM_KEEPALIVE": "25"}
    with running(tmp_path, env=env) as service:
        first, got = _stream(service.port)
        assert b"fetch-mode" not in got
        first.close()

        def room() -> bool:
            sock, got = _stream(service.port)
            sock.close()
            return b"fetch-mode" not in got

        wait_until(room, "a stream that stays", timeout=5)
