"""``workers`` > 1: a supervisor and N server processes on one port and one database."""

from __future__ import annotations

import json
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from relaykit import CLIENT, STANDALONE_ENV, call, post_metric, relay_env, stored, workers
from service import Service, running, scrape, start, wait_until

pytestmark = pytest.mark.process

TWO = {"RELAY_WORKERS": "2"}


def port_is_free(port: int) -> bool:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def test_standalone_workers_share_port_database_keys_and_metrics(tmp_path: Path) -> None:
    with running(tmp_path, env=TWO) as central:
        assert len(workers(central)) == 2
        # first-start keys are created once, by the supervisor, and shown once
        assert central.stdout().count("shown only now") == 1
        [admin] = re.findall(r"^\s+admin\s+(\S+)$", central.stdout(), re.MULTILINE)
        [client] = re.findall(r"^\s+client\s+(\S+)$", central.stdout(), re.MULTILINE)
        body = {
            "applications": [],
            "metrics": [
                {"featureName": "f1", "appName": "app", "environment": "development", "yes": 1}
            ],
        }
        for _ in range(40):  # a new connection each: SO_REUSEPORT spreads them over both
            assert call(f"{central.url}/api/client/metrics/bulk", body, key=client)[0] == 202
        _, raw = call(f"{central.url}/api/admin/client-metrics/features/f1/raw", key=admin)
        assert sum(row["yes"] for row in raw["data"]) == 40
        # whichever worker answers the scrape reports the sum over both
        accepted = [
            scrape(central.url, "relay_metric_entries_total", outcome="accepted") for _ in range(10)
        ]
        assert set(accepted) == {40.0}
        assert central.stop() == 0
    logs = (tmp_path / "relay.log").read_text()
    assert "worker 0 listening" in logs and "worker 1 listening" in logs


def buffering_relay(tmp_path: Path, central: Service, posts: int, yes: int) -> Service:
    """A two-worker relay that does not flush on its own, with ``posts`` counts buffered."""
    relay = start(
        tmp_path / "relay", env=relay_env(central.url, RELAY_FLUSH_INTERVAL="3600", **TWO)
    )
    for _ in range(posts):
        post_metric(relay, yes)
    return relay


def buffered(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        return int(conn.execute("SELECT coalesce(sum(yes), 0) FROM metrics").fetchone()[0])


def bulk_posts(service: Service) -> float:
    """Bulk requests the service answered 202 (a standalone with one worker)."""
    route = "/api/client/metrics/bulk"
    return scrape(service.url, "relay_http_requests_total", route=route, status="202")


def test_relay_workers_share_one_buffer_and_sigterm_delivers_everything_once(
    tmp_path: Path,
) -> None:
    with running(tmp_path / "central", env=STANDALONE_ENV) as central:
        relay = buffering_relay(tmp_path, central, posts=30, yes=1)
        assert stored(central) == 0  # no periodic flush yet: everything waits in the buffer
        # both workers wrote into the one buffer (30 new connections: both had some)
        data = tmp_path / "relay" / "data"
        assert buffered(data / "buffer.db") == 30
        assert not list(data.glob("buffer-*.db"))
        assert relay.stop(signal.SIGTERM) == 0
        assert stored(central) == 30
        # only the leader flushes, and it stops last: one final flush, with everything, in
        # one upstream request for the one environment
        assert relay.logs().count("final flush") == 1
        assert bulk_posts(central) == 1
        assert '"logger": "relay.process.supervisor", "msg": "stopping workers"' in relay.logs()


def test_a_retried_idempotency_key_counts_once_whichever_worker_answers(tmp_path: Path) -> None:
    with running(tmp_path / "central", env=STANDALONE_ENV) as central:
        relay = start(tmp_path / "relay", env=relay_env(central.url, **TWO))
        body = json.dumps(
            {
                "applications": [],
                "metrics": [
                    {"featureName": "f1", "appName": "app", "environment": "development", "yes": 3}
                ],
            }
        ).encode()
        for _ in range(12):  # a new connection each: both workers see the key
            request = urllib.request.Request(
                f"{relay.url}/api/client/metrics/bulk",
                data=body,
                headers={
                    "Authorization": CLIENT,
                    "Content-Type": "application/json",
                    "Idempotency-Key": "retry-of-one-batch",
                },
            )
            with urllib.request.urlopen(request, timeout=10) as response:
                assert response.status == 202
        assert relay.stop(signal.SIGTERM) == 0
        assert stored(central) == 3


def test_a_dead_worker_stops_the_service_and_nothing_is_lost(tmp_path: Path) -> None:
    with running(tmp_path / "central", env=STANDALONE_ENV) as central:
        relay = buffering_relay(tmp_path, central, posts=10, yes=2)
        victim, survivor = workers(relay)
        subprocess.run(["kill", "-9", str(victim)], check=True)
        assert relay.process.wait(30) == 1
        assert not Path(f"/proc/{survivor}").exists() or _is_zombie(survivor)
        assert "worker exited" in relay.logs()
        wait_until(lambda: port_is_free(relay.port))
        with running(tmp_path / "relay", env=relay_env(central.url, **TWO), port=relay.port):
            wait_until(lambda: stored(central) == 20)


def test_the_supervisor_is_lean_and_workers_end_when_it_is_killed(tmp_path: Path) -> None:
    relay = start(tmp_path, env=TWO)
    pids = workers(relay)
    # `relay serve` became (same PID) an interpreter that never loaded pydantic or aiohttp
    supervisor = Path(f"/proc/{relay.process.pid}")
    assert b"relay.process.supervisor" in (supervisor / "cmdline").read_bytes()
    maps = (supervisor / "maps").read_bytes()
    assert b"pydantic_core" not in maps and b"aiohttp" not in maps and b"_sqlite3" not in maps
    relay.stop(signal.SIGKILL)
    wait_until(lambda: all(not Path(f"/proc/{p}").exists() or _is_zombie(p) for p in pids))
    wait_until(lambda: port_is_free(relay.port))


def test_port_in_use_is_one_line_and_exit_2(tmp_path: Path) -> None:
    with running(tmp_path / "first") as first:
        result = subprocess.run(
            [sys.executable, "-m", "relay", "serve"],
            cwd=tmp_path,
            env={
                "PATH": "/usr/bin:/bin",
                "RELAY_WORKERS": "2",
                "RELAY_HOST": "127.0.0.1",
                "RELAY_PORT": str(first.port),
                "RELAY_DATA_DIR": str(tmp_path / "second"),
            },
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1].startswith("relay: error:")
    assert "in use" in result.stderr
    assert "Traceback" not in result.stderr


def _is_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True
