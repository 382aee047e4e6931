"""What one connection can hold of a real server process: clients that ask for a large
answer and never read it pin a bounded amount of memory each and are closed after
``write_timeout``; connections beyond the process's open-file limit are refused with a
log line per interval, not one with a traceback per attempt."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest
from service import answers, running, scrape, wait_until

pytestmark = pytest.mark.process

LARGE = "/docs/redoc.standalone.js"
"""A large answer any caller may ask for (911 kB), without a key."""
READERS = 100
PIPELINED = 4
"""Requests each reader sends at once: more than the kernel's send buffer takes (it grows to
4 MB on loopback), so that the rest waits at the server."""
PER_CONNECTION = 256 * 1024


def rss(pid: int) -> int:
    """The resident memory of process ``pid``, in bytes."""
    status = Path(f"/proc/{pid}/status").read_text()
    match = re.search(r"^VmRSS:\s+(\d+) kB", status, re.M)
    assert match
    return int(match.group(1)) * 1024


@contextmanager
def connections(port: int, count: int, request: bytes | None) -> Iterator[list[socket.socket]]:
    """``count`` connections that send ``request`` (if any) and never read; their receive
    buffers are as small as the kernel allows, so the answers wait at the server."""
    with ExitStack() as stack:
        opened = []
        for _ in range(count):
            sock = stack.enter_context(socket.socket())
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
            sock.connect(("127.0.0.1", port))
            if request is not None:
                sock.sendall(request)
            opened.append(sock)
        yield opened


def answered(sock: socket.socket) -> bool:
    """Whether the server has started to answer on ``sock`` (read nothing)."""
    try:
        return bool(sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT))
    except BlockingIOError:
        return False


def drain(sock: socket.socket) -> int:
    """Read ``sock`` to its end (the server closed it): the bytes it had received."""
    sock.settimeout(30)
    total = 0
    try:
        while chunk := sock.recv(65536):
            total += len(chunk)
    except ConnectionResetError:
        pass
    return total


def test_slow_readers_pin_bounded_memory_and_are_closed_after_the_write_timeout(
    tmp_path: Path,
) -> None:
    env = {"RELAY_WRITE_TIMEOUT": "3"}
    with running(tmp_path, env=env) as service:
        size = len(_get(service.port, LARGE))
        before = rss(service.process.pid)
        request = f"GET {LARGE} HTTP/1.1\r\nHost: relay\r\n\r\n".encode() * PIPELINED
        with connections(service.port, READERS, request) as readers:
            wait_until(lambda: all(map(answered, readers)), "every reader got a first part")
            time.sleep(0.5)  # what the server still writes after the first part
            grown = rss(service.process.pid) - before
            assert grown < READERS * PER_CONNECTION, f"{grown / READERS / 1024:.0f} kB each"

            wait_until(
                lambda: scrape(service.url, "relay_http_write_timeouts_total") == READERS,
                "the server closed every reader after the write timeout",
            )
            received = [drain(sock) for sock in readers]
            assert max(received) < size, "what the server held was sent after the write timeout"
        assert answers(f"{service.url}/health")


def test_a_reader_slower_than_the_server_gets_every_pipelined_answer_whole(
    tmp_path: Path,
) -> None:
    """The slices after the transport's high-water mark wait for it to drain (the only
    writes timed): a client that reads, slowly, gets every byte, in order."""
    with running(tmp_path) as service:
        body = _get(service.port, LARGE)
        request = f"GET {LARGE} HTTP/1.1\r\nHost: relay\r\n\r\n".encode()
        with connections(service.port, 1, request * PIPELINED) as (sock,):
            sock.settimeout(30)
            raw = bytearray()
            while len(raw) < PIPELINED * len(body) or raw.count(body) < PIPELINED:
                chunk = sock.recv(16384)
                assert chunk, "the server closed the connection"
                raw += chunk
                time.sleep(0.001)  # slower than the server writes: its transport fills
        parts = raw.split(b"HTTP/1.1 200 OK\r\n")[1:]
        assert len(parts) == PIPELINED
        assert all(part.split(b"\r\n\r\n", 1)[1] == body for part in parts)
        assert scrape(service.url, "relay_http_write_timeouts_total") == 0


RAW = "/api/admin/client-metrics/features/f/raw"
"""A paged admin read: an answer streamed part by part (``relay.api.responses.streamed``)."""


@pytest.mark.parametrize("path", [LARGE, RAW])
def test_a_reader_that_stops_is_closed_after_the_write_timeout_on_answers_without_body(
    tmp_path: Path, path: str
) -> None:
    """Pipelined HEADs (a 304 is the same: headers, no body) that the client never reads:
    the transport goes over its high-water mark on an answer's headers, and aiohttp's end
    of answer waited for it to drain without a limit, holding the connection for good."""
    command = [sys.executable, "-m", "relay", "keys", "create", "--type", "admin"]
    created = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path, check=True)
    key = created.stdout.strip()
    with running(tmp_path, env={"RELAY_WRITE_TIMEOUT": "2"}) as service:
        with connections(service.port, 1, None) as (sock,):
            sock.setblocking(False)
            head = f"HEAD {path} HTTP/1.1\r\nHost: relay\r\nAuthorization: {key}\r\n\r\n"
            request = head.encode() * 1000

            def closed_after_timeout() -> bool:
                try:
                    sock.send(request)  # until the server stops reading: it waits to write
                except BlockingIOError:
                    pass
                except ConnectionError:  # reset by the server
                    return True
                return scrape(service.url, "relay_http_write_timeouts_total") == 1

            wait_until(closed_after_timeout, "the server closed the reader", timeout=30)
            assert drain(sock) < 1 << 22, "what the server held was sent after the timeout"
        assert scrape(service.url, "relay_http_write_timeouts_total") == 1


def _get(port: int, path: str) -> bytes:
    """The body of a GET, read whole, on a connection of its own."""
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: relay\r\nConnection: close\r\n\r\n".encode())
        raw = b""
        while chunk := sock.recv(65536):
            raw += chunk
    return raw.split(b"\r\n\r\n", 1)[1]


FILE_LIMIT = 64


def test_connections_beyond_the_file_limit_are_logged_once_per_interval(
    tmp_path: Path,
) -> None:
    """Under a hard limit of 64 open files (which raising the soft limit cannot lift), 100
    idle connections run the server out of descriptors until a second line is said: asyncio
    reported each failed accept with a traceback, hundreds a second. Now one line per 10 s
    says how many there were; once the connections close, the server answers again."""
    program = ("sh", "-c", f'ulimit -n {FILE_LIMIT} && exec "$0" -m relay serve', sys.executable)
    env = {"RELAY_IDLE_TIMEOUT": "120"}
    with running(tmp_path, env=env, program=program) as service:
        with connections(service.port, 100, None):
            wait_until(
                lambda: service.logs().count("out of system resource") >= 2,
                "a second line, an interval after the first",
            )
            assert not answers(f"{service.url}/health")
        wait_until(lambda: answers(f"{service.url}/health"), "the server answers again")
        assert scrape(service.url, "relay_accept_errors_total") > 2
        logs = service.logs()
    lines = [line for line in logs.splitlines() if "out of system resource" in line]
    assert 1 <= len(lines) <= 3, logs[-3000:]
    assert '"count"' in lines[-1] and "Traceback" not in logs


def test_the_open_file_limit_is_raised_to_the_hard_limit(tmp_path: Path) -> None:
    program = ("sh", "-c", 'ulimit -S -n 256 && exec "$0" -m relay serve', sys.executable)
    with running(tmp_path, program=program) as service:
        limits = Path(f"/proc/{service.process.pid}/limits").read_text()
        match = re.search(r"^Max open files\s+(\S+)\s+(\S+)", limits, re.M)
        assert match and match[1] == match[2] != "256", limits
        assert f'"limit": {match[2]}, "was": 256' in service.logs()
