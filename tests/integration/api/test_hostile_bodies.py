"""Bodies from hostile or broken clients (issue 14): encodings, bombs, 100-continue, slow and
oversized bodies, hang-ups. Each gets a clear 4xx with a JSON body, at once when it can be
known at once, without a traceback in the log, and the connection stays usable when the
request was well framed."""

from __future__ import annotations

import asyncio
import gzip
import json
import socket
import time
import zlib
from pathlib import Path
from typing import Any

import pytest
from conftest import (
    DEV_KEY,
    MakeClient,
    assert_error,
    auth,
    bulk,
    metric,
    raw,
    standalone_settings,
)
from rawhttp import exchange
from service import running

from relay.app import build_app

BODY = json.dumps(bulk([metric(yes=2, no=1)])).encode()


@pytest.fixture
async def standalone(aiohttp_client: Any, tmp_path: Path) -> Any:
    return await aiohttp_client(build_app(standalone_settings(tmp_path / "data")))


def json_error(answer: bytes) -> tuple[int, dict[str, Any]]:
    """Status and JSON body of one raw HTTP/1.1 answer."""
    head, _, body = answer.partition(b"\r\n\r\n")
    assert b"application/json" in head, head
    return int(head.split(b" ")[1]), json.loads(body)


def raw_request(path: str, body: bytes, key: str | None = DEV_KEY, **headers: str) -> bytes:
    """A raw POST with a JSON body and Content-Length, as bytes to send."""
    lines = [f"POST {path} HTTP/1.1", "Host: x", "Content-Type: application/json"]
    lines += [f"Authorization: {key}"] if key else []
    lines += [f"{name.replace('_', '-')}: {value}" for name, value in headers.items()]
    lines += [f"Content-Length: {len(body)}", "", ""]
    return "\r\n".join(lines).encode() + body


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "GZip", "identity"])
async def test_gzip_and_deflate_bodies_are_decoded(standalone: Any, encoding: str) -> None:
    data = {"gzip": gzip.compress, "deflate": zlib.compress}.get(encoding.lower(), bytes)(BODY)
    response = await standalone.post(
        "/api/client/metrics/bulk",
        data=data,
        headers={**auth(DEV_KEY), "Content-Type": "application/json", "Content-Encoding": encoding},
    )
    assert response.status == 202
    assert [(r["yes"], r["no"]) for r in await raw(standalone, "f1")] == [(2, 1)]


@pytest.mark.parametrize("encoding", ["br", "zstd", "compress", "gzip, gzip", "x-custom"])
async def test_other_encodings_are_415(standalone: Any, encoding: str) -> None:
    headers = {**auth(DEV_KEY), "Content-Type": "application/json", "Content-Encoding": encoding}
    for path in ("/api/client/metrics/bulk", "/edge/validate"):
        response = await standalone.post(path, data=BODY, headers=headers)
        assert response.status == 415, (path, encoding)
        error = await response.json()
        assert_error(error, "ContentTypeError")
        assert error["details"][0]["path"] == "/header/Content-Encoding"


@pytest.mark.parametrize(
    "data",
    [
        b"not gzip at all",
        gzip.compress(BODY)[:-12],  # cut short
        gzip.compress(BODY) + b"trailing",
        b"",
    ],
    ids=["garbage", "truncated", "trailing", "empty"],
)
async def test_bodies_that_do_not_decode_are_400_and_the_connection_goes_on(
    standalone: Any, data: bytes
) -> None:
    """On today's main: 500, two tracebacks in the log, and the next request on that
    connection lost."""
    bad = raw_request("/edge/validate", data, key=None, Content_Encoding="gzip")
    good = raw_request("/api/client/metrics/bulk", BODY)
    first, second = await asyncio.to_thread(two_answers, standalone.server.port, bad + good)
    status, error = json_error(first)
    assert status == 400
    assert_error(error, "BadDataError")
    assert error["details"][0]["path"] == "/body"
    assert second.startswith(b"HTTP/1.1 202 "), second  # the request after it on the connection


def two_answers(port: int, data: bytes) -> tuple[bytes, bytes]:
    """Send two pipelined requests on one connection; their two answers."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(data)
        received = b""
        while received.count(b"HTTP/1.1 ") < 2 or not received.endswith((b"}", b"\r\n\r\n")):
            chunk = sock.recv(65536)
            if not chunk:
                break
            received += chunk
    first, found, second = received[1:].partition(b"HTTP/1.1 ")
    return received[:1] + first, found + second


async def test_a_gzip_bomb_is_413_without_inflating_it(standalone: Any) -> None:
    bomb = gzip.compress(b" " * (64 * 1024 * 1024))  # 64 MiB of spaces in about 64 KB
    assert len(bomb) < 100_000
    response = await standalone.post(
        "/api/client/metrics/bulk",
        data=bomb,
        headers={**auth(DEV_KEY), "Content-Type": "application/json", "Content-Encoding": "gzip"},
    )
    assert response.status == 413
    assert_error(await response.json(), "ContentTooLargeError")


async def test_a_byte_order_mark_before_the_json_is_read_past(standalone: Any) -> None:
    response = await standalone.post(
        "/api/client/metrics/bulk",
        data=b"\xef\xbb\xbf" + BODY,
        headers={**auth(DEV_KEY), "Content-Type": "application/json"},
    )
    assert response.status == 202
    assert [(r["yes"], r["no"]) for r in await raw(standalone, "f1")] == [(2, 1)]


def continued(port: int, head: bytes, body: bytes) -> tuple[bytes, bytes]:
    """Send headers with ``Expect: 100-continue`` and read what comes first; send the body
    only after a 100. Returns the first answer and the final one (empty if none)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(head)
        first = sock.recv(65536)
        if not first.startswith(b"HTTP/1.1 100 "):
            return first, b""
        sock.sendall(body)
        final = b""
        while b"\r\n\r\n" not in final:
            final += sock.recv(65536)
        return first, final


async def test_100_continue_only_once_the_key_and_the_size_are_checked(standalone: Any) -> None:
    """On today's main every endpoint answers 100 Continue before looking at the request."""
    port = standalone.server.port
    cases = [(None, len(BODY), b" 401 "), (DEV_KEY, 2 * 1024 * 1024, b" 413 ")]
    for key, length, expected in cases:
        head = raw_request("/api/client/metrics/bulk", b"", key=key, Expect="100-continue")
        head = head.replace(b"Content-Length: 0", f"Content-Length: {length}".encode())
        first, final = await asyncio.to_thread(continued, port, head, BODY)
        assert first.startswith(b"HTTP/1.1" + expected), first
        assert final == b""
    head = raw_request("/api/client/metrics/bulk", b"", Expect="100-continue")
    head = head.replace(b"Content-Length: 0", f"Content-Length: {len(BODY)}".encode())
    first, final = await asyncio.to_thread(continued, port, head, BODY)
    assert first.startswith(b"HTTP/1.1 100 Continue"), first
    assert final.startswith(b"HTTP/1.1 202 "), final


def test_a_body_announced_over_the_limit_is_413_at_once(tmp_path: Path) -> None:
    """On today's main the answer is 408 once ``body_timeout`` has passed."""
    env = {"RELAY_INIT_CLIENT_API_TOKENS": DEV_KEY, "RELAY_BODY_TIMEOUT": "120"}
    with running(tmp_path, env=env) as service:
        head = raw_request("/api/client/metrics/bulk", b"{")
        head = head.replace(b"Content-Length: 1", b"Content-Length: 5000000")
        answer, _ = exchange(service.port, head, wait=20)
        status, error = json_error(answer)
        assert status == 413
        assert_error(error, "ContentTooLargeError")
        assert b"Connection: close" in answer.partition(b"\r\n\r\n")[0]


def hang_up_mid_body(port: int) -> None:
    head = raw_request("/api/client/metrics/bulk", BODY).replace(
        f"Content-Length: {len(BODY)}".encode(), b"Content-Length: 1000"
    )
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(head[: -len(BODY) + 10])  # the headers and 10 bytes, then gone
        time.sleep(0.2)  # most likely while the body is being read


@pytest.mark.parametrize("level", ["INFO", "DEBUG"])
def test_what_hostile_clients_send_does_not_fill_the_log(tmp_path: Path, level: str) -> None:
    """On today's main a bad gzip body logs two tracebacks (about 5 KB), a client hanging up
    mid-body one "unhandled error" with a traceback, a malformed chunked body one more."""
    env = {"RELAY_INIT_CLIENT_API_TOKENS": DEV_KEY, "RELAY_LOG_LEVEL": level}
    with running(tmp_path, env=env) as service:
        before = len(service.logs())
        bad_gzip = raw_request("/edge/validate", b"not gzip", key=None, Content_Encoding="gzip")
        chunked = raw_request("/api/client/metrics/bulk", b"").replace(
            b"Content-Length: 0\r\n", b"Transfer-Encoding: chunked\r\n"
        )
        for _ in range(10):
            exchange(service.port, bad_gzip)
            exchange(service.port, chunked + b"zz\r\nnot a chunk\r\n")
            hang_up_mid_body(service.port)
        exchange(service.port, b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")  # all handled by now
        log = service.logs()[before:]
    assert "Traceback" not in log, log
    lines = [json.loads(line) for line in log.splitlines()]
    if level == "INFO":  # the access log's one short line per request, and nothing else
        assert lines and all(line["logger"] == "relay.access" for line in lines), log
        assert all(len(json.dumps(line)) < 300 for line in lines), log
        return
    ours = [line for line in lines if line["logger"].startswith(("relay", "aiohttp.server"))]
    # a hang-up noticed mid-body is one short line (one before is not noticed at all)
    hang_ups = [line for line in ours if line["msg"] == "client closed the connection mid-body"]
    assert hang_ups, log
    assert all("exc" not in line and len(line["msg"]) < 200 for line in ours), log


async def test_pass_through_bodies_are_bounded_in_time_and_size(make_relay: MakeClient) -> None:
    """On today's main a pass-through body is read with no time limit and no size check
    before reading: 200 such connections held the relay for over 70 s."""
    relay = await make_relay(body_timeout=1)
    path = "/api/admin/projects/default/environments"
    slow = raw_request(path, b"{", key="x").replace(b"Content-Length: 1", b"Content-Length: 100000")
    answers = await asyncio.gather(
        *(asyncio.to_thread(exchange, relay.server.port, slow, 20) for _ in range(20))
    )
    for answer, _ in answers:
        status, error = json_error(answer)
        assert status == 408
        assert_error(error, "RequestTimeoutError")
    large = slow.replace(b"Content-Length: 100000", b"Content-Length: 5000000")
    answer, _ = await asyncio.to_thread(exchange, relay.server.port, large, 20)
    status, error = json_error(answer)
    assert status == 413
    assert_error(error, "ContentTooLargeError")
