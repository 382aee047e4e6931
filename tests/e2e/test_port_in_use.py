"""A port in use stops ``relay serve`` (and ``relay edge``) before it writes anything: no
migration, no first-start key for a service that could not start; one line names the port and
how to pick another. The same data dir then starts on a free port and creates its keys once."""

from __future__ import annotations

import json
import socket
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from clikit import relay
from service import free_port, running

pytestmark = pytest.mark.process

BANNER = "shown only now"  # the first-start keys' announcement (relay.central.wiring)


@contextmanager
def held_port() -> Iterator[int]:
    """A loopback port another program listens on for the duration."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", free_port()))
        sock.listen()
        yield sock.getsockname()[1]


def stored_keys(database: Path) -> int:
    if not database.exists():
        return 0
    with sqlite3.connect(database) as db:
        count: int = db.execute("SELECT count(*) FROM api_tokens").fetchone()[0]
    return count


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_port_in_use_creates_nothing_and_says_how_to_pick_another(
    tmp_path: Path, workers: str
) -> None:
    env = {"RELAY_HOST": "127.0.0.1", "RELAY_WORKERS": workers}
    with held_port() as port:
        result = relay("serve", cwd=tmp_path, env={**env, "RELAY_PORT": str(port)})
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"relay: error: cannot listen on port {port} of 127.0.0.1:")
    assert "Address already in use" in lines[0]
    assert lines[0].endswith("pick another port with --port N or RELAY_PORT=N")
    assert BANNER not in result.stdout
    database = tmp_path / "data" / "relay.db"
    assert not database.exists()  # not even migrated
    with running(tmp_path, env=env) as service:
        assert service.stdout().count(BANNER) == 1
    assert stored_keys(database) == 2  # the first-start admin and client keys


def test_the_error_is_a_json_line_when_json_logs_are_asked_for(tmp_path: Path) -> None:
    with held_port() as port:
        result = relay("serve", "--port", str(port), cwd=tmp_path, env={"RELAY_LOG_FORMAT": "json"})
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    record = json.loads(line)
    assert record["level"] == "error"
    assert f"port {port}" in record["msg"] and "RELAY_PORT=N" in record["msg"]


def test_edge_names_its_own_port_options(tmp_path: Path) -> None:
    upstream = f"http://127.0.0.1:{free_port()}"  # never reached: the port is checked first
    key = "default:development.0123456789abcdef0123"
    env = {"LOG_FORMAT": "json", "RELAY_HOST": "127.0.0.1"}
    with held_port() as port:
        result = relay("-p", str(port), "edge", "-u", upstream, "-t", key, cwd=tmp_path, env=env)
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    message = json.loads(line)["msg"]
    assert f"cannot listen on port {port}" in message
    assert "-p N (--port N) before the subcommand, or PORT=N" in message
    assert key not in result.stderr
    assert not list((tmp_path / "data").glob("*.db"))  # no buffer, no flag cache
