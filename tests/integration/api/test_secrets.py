"""Secrets stay out of logs at any level, out of error messages, and out of other users'
reach on disk."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import socket
import stat
import subprocess
import sys
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from conftest import ADMIN_KEY, DEV_KEY, auth, bulk, metric
from service import running

from relay.logs import JsonFormatter, TextFormatter

SECRET = DEV_KEY.split(".", 1)[1]
ADMIN_SECRET = ADMIN_KEY.split(".", 1)[1]
CENTRAL_ENV = {"RELAY_INIT_CLIENT_API_TOKENS": DEV_KEY, "RELAY_INIT_ADMIN_API_TOKENS": ADMIN_KEY}


def exchange(port: int, request: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request)
        return sock.recv(65536)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


def sign_in(url: str) -> str:
    """The session cookie the web page gives for the admin key."""
    form = urllib.parse.urlencode({"key": ADMIN_KEY, "next": "/"}).encode()
    opener = urllib.request.build_opener(_NoRedirect)
    try:
        opener.open(urllib.request.Request(f"{url}/login", data=form))
    except urllib.error.HTTPError as redirect:
        assert redirect.code == 303
        return redirect.headers["Set-Cookie"].split(";")[0]
    raise AssertionError("no redirect after sign-in")


@pytest.mark.process
def test_nothing_secret_reaches_the_log_at_debug(tmp_path: Path) -> None:
    """On today's main aiohttp's "malformed request" lines quote the raw header (the whole
    key before a bad byte) and the over-long URL, and aiosqlite logs every statement with
    its parameters (the session's hash)."""
    with running(tmp_path, env={**CENTRAL_ENV, "RELAY_LOG_LEVEL": "DEBUG"}) as service:
        bad_header = f"GET /api/client/features HTTP/1.1\r\nHost: x\r\nAuthorization: {DEV_KEY}\x01"
        long_url = f"GET /api/client/features?key={DEV_KEY}&{'a' * 9000} HTTP/1.1\r\nHost: x"
        for request in (bad_header, long_url):
            assert exchange(service.port, f"{request}\r\n\r\n".encode()).startswith(b"HTTP/1.")
        body = json.dumps(bulk([metric(yes=1)])).encode()
        headers = {**auth(DEV_KEY), "Content-Type": "application/json"}
        posted = urllib.request.Request(f"{service.url}/api/client/metrics/bulk", body, headers)
        with urllib.request.urlopen(posted) as answer:
            assert answer.status == 202
        cookie = sign_in(service.url)
        with urllib.request.urlopen(
            urllib.request.Request(f"{service.url}/keys", headers={"Cookie": cookie})
        ) as answer:
            assert answer.status == 200
        exchange(service.port, b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")  # all logged by now
        output = service.logs() + service.stdout()
    assert "malformed request" in output  # the faults are logged, by their kind
    session = cookie.split("=", 1)[1]
    hashes = [hashlib.sha256(s.encode()).hexdigest() for s in (DEV_KEY, ADMIN_KEY, session)]
    for secret in (SECRET, ADMIN_SECRET, session, *hashes):
        assert secret not in output


def test_log_lines_are_redacted_of_anything_shaped_like_a_key() -> None:
    """Whatever a library puts in a record, a key's secret and an Authorization value are
    not written; times and addresses are."""
    record = logging.makeLogRecord(
        {
            "name": "a.library",
            "levelno": logging.DEBUG,
            "levelname": "DEBUG",
            "msg": "sent %s with b'Authorization: Bearer %s' to 10.0.0.1:4242 at 12:30:45.123456",
            "args": (ADMIN_KEY, "opaque-token-value"),
            "peer_key": DEV_KEY,
        }
    )
    line = JsonFormatter().format(record)
    entry = json.loads(line)
    assert entry["msg"] == (
        "sent *:*.**** with b'Authorization: ****' to 10.0.0.1:4242 at 12:30:45.123456"
    )
    assert entry["peer_key"] == "default:development.****"
    text = TextFormatter().format(record)
    for secret in (SECRET, ADMIN_SECRET, "opaque-token-value"):
        assert secret not in line and secret not in text


@contextmanager
def umask(mask: int) -> Iterator[None]:
    previous = os.umask(mask)
    try:
        yield
    finally:
        os.umask(previous)


def modes(data_dir: Path) -> dict[str, int]:
    return {p.name: stat.S_IMODE(p.stat().st_mode) for p in (data_dir, *data_dir.iterdir())}


@pytest.mark.process
def test_files_are_created_for_the_service_user_alone(tmp_path: Path) -> None:
    """On today's main relay.db, buffer.db, their -wal and -shm and instance-id are 0644
    in a 0755 directory, under the usual umask 022."""
    with umask(0o022), running(tmp_path / "central", env=CENTRAL_ENV) as central:
        relay_env = {
            "RELAY_MODE": "relay",
            "RELAY_UPSTREAM_URL": central.url,
            "RELAY_UPSTREAM_TOKENS": DEV_KEY,
            "RELAY_CLIENT_TOKENS": DEV_KEY,
        }
        with running(tmp_path / "relay", env=relay_env):
            seen = {
                "central": modes(tmp_path / "central" / "data"),
                "relay": modes(tmp_path / "relay" / "data"),
            }
    for name in ("relay.db", "relay.db-wal", "relay.db-shm"):
        assert name in seen["central"], seen
    for name in ("buffer.db", "buffer.db-wal", "buffer.db-shm", "instance-id"):
        assert name in seen["relay"], seen
    for files in seen.values():
        assert files.pop("data") == 0o700, seen
        assert all(mode == 0o600 for mode in files.values()), seen


def relay_command(arguments: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    """``relay <arguments>`` run to its end, with ``env`` added to this environment."""
    return subprocess.run(
        [sys.executable, "-m", "relay", *arguments],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, **env},
    )


@pytest.mark.parametrize(
    ("arguments", "named"),
    [
        (["serve", "--tokens", ADMIN_KEY], "--tokens"),
        (["serve", f"--tokens={ADMIN_KEY}"], "--tokens"),
        (["serve", f"--c={ADMIN_KEY}"], "--c"),  # ambiguous: --config, --client-tokens...
        (["keys", "create", "--type", ADMIN_KEY], "--type"),
        (["settings-docs", f"--check={ADMIN_KEY}"], "--check"),
        ([ADMIN_KEY], "invalid choice"),
    ],
)
def test_command_line_errors_never_repeat_a_value(arguments: list[str], named: str) -> None:
    """On today's main ``relay serve --tokens <key>`` answers ``unrecognized arguments:
    --tokens <key>``."""
    done = relay_command(arguments)
    assert done.returncode == 2
    assert "error:" in done.stderr
    assert ADMIN_SECRET not in done.stderr + done.stdout
    assert named in done.stderr  # what is at fault is said


@pytest.mark.parametrize(
    "url",
    [
        f"postgresql://relay:{SECRET[:16]}/{SECRET[16:]}@127.0.0.1/relay",  # / not encoded
        f"postgresql://relay:{SECRET[:16]}#{SECRET[16:]}@127.0.0.1/relay",
        f"postgres://relay:{SECRET}@[::1/relay",
        f"postgresql//relay@127.0.0.1/relay?password={SECRET}",  # scheme without its colon
    ],
)
def test_a_database_url_that_cannot_be_read_is_refused_without_its_password(url: str) -> None:
    """On the merged main a password with an unencoded ``/`` or ``#`` crashed every command
    with a traceback ending ``Port could not be cast to integer value as '<password>'``."""
    for command in (["serve"], ["keys", "list"]):
        done = relay_command(command, RELAY_DATABASE_URL=url)
        assert done.returncode == 2, done.stderr
        assert done.stderr.startswith("relay: error: invalid settings: database_url"), done.stderr
        assert "Traceback" not in done.stderr
        for part in (SECRET[:16], SECRET[16:]):
            assert part not in done.stderr + done.stdout
