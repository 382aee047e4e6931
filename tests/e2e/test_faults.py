"""Nothing accepted is lost, nothing is applied twice: crashes, outages, shutdown, disk trouble.

Real processes on loopback, bounded in time. ``tests/load.py`` clients post continuously and
retry each request with its own Idempotency-Key until it is answered 202, so afterwards the
upstream must hold exactly what the clients sent.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from faultkit import ADMIN, CENTRAL_ENV, CLIENT, check_clean, entries, relay_env, remount, tmpfs
from load import Load
from service import (
    Service,
    free_port,
    post_bulk,
    running,
    scrape,
    settle,
    start,
    stored,
    wait_until,
)

pytestmark = pytest.mark.process

STEP = 20  # load requests accepted between two events of a test: it ran under load


def flushes(relay: Service, outcome: str) -> float:
    return scrape(relay.url, "relay_flush_batches_total", outcome=outcome)


def keep_loading(load: Load, relay: Service, outcome: str, count: int = 1) -> None:
    """Let the load run on until the relay has accepted STEP more of its requests and counted
    ``count`` more flushes with ``outcome``: time passes, measured in what happened in it."""
    target = flushes(relay, outcome) + count
    load.wait_accepted(STEP)
    wait_until(lambda: flushes(relay, outcome) >= target, f"{count} more flushes: {outcome}")


def test_relay_killed_repeatedly_under_load_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    with running(tmp_path / "central", env=CENTRAL_ENV) as central:
        port = free_port()
        env = relay_env(central.url)
        relay = start(tmp_path / "relay", env=env, port=port)
        load = Load(f"http://127.0.0.1:{port}/api/client/metrics/bulk", CLIENT, clients=4)
        load.start()
        try:
            for _ in range(5):
                keep_loading(load, relay, "ok")  # killed with counts buffered and sent
                relay.stop(signal.SIGKILL)
                relay = start(tmp_path / "relay", env=env, port=port)
            keep_loading(load, relay, "ok")
        finally:
            load.stop()
        check_clean(load)
        settle(central, ADMIN, "load", load.accepted, (relay, CLIENT))
        assert relay.stop() == 0


def test_upstream_stopped_under_load_then_started_again(tmp_path: Path) -> None:
    port = free_port()
    central = start(tmp_path / "central", env=CENTRAL_ENV, port=port)
    with running(tmp_path / "relay", env=relay_env(central.url)) as relay:
        load = Load(f"{relay.url}/api/client/metrics/bulk", CLIENT, clients=4)
        load.start()
        try:
            keep_loading(load, relay, "ok")
            central.stop()
            keep_loading(load, relay, "retry", count=3)  # several failed flushes under load
            central = start(tmp_path / "central", env=CENTRAL_ENV, port=port)
            keep_loading(load, relay, "ok")
        finally:
            load.stop()
        check_clean(load)
        assert set(load.statuses) == {202}  # the relay kept answering while upstream was down
        settle(central, ADMIN, "load", load.accepted, (relay, CLIENT))
    central.stop()


def test_sigterm_under_load_flushes_and_exits_within_the_grace_period(tmp_path: Path) -> None:
    with running(tmp_path / "central", env=CENTRAL_ENV) as central:
        port = free_port()
        env = relay_env(central.url, RELAY_FLUSH_INTERVAL="3600")  # only the final flush
        relay = start(tmp_path / "relay", env=env, port=port)
        load = Load(f"http://127.0.0.1:{port}/api/client/metrics/bulk", CLIENT, clients=4)
        load.start()
        try:
            load.wait_accepted(5 * STEP)  # a buffer filled under load
            began = time.monotonic()
            assert relay.stop(signal.SIGTERM, timeout=30) == 0
            took = time.monotonic() - began
            load.wait_answered()  # clients have recorded the last answers they received
            accepted_before_exit = load.accepted
            assert stored(central.url, ADMIN, "load") == accepted_before_exit
            assert took < 20  # shutdown_timeout + final_flush_timeout, the documented bound
            relay = start(tmp_path / "relay", env=env, port=port)  # clients' retries land
        finally:
            load.stop()
        relay.stop()
        check_clean(load)
        settle(central, ADMIN, "load", load.accepted)


def integrity(database: Path) -> str:
    with sqlite3.connect(f"file:{database}?mode=ro", uri=True) as conn:
        return str(conn.execute("PRAGMA integrity_check").fetchone()[0])


def test_full_disk_answers_503_and_recovers_when_space_returns(tmp_path: Path) -> None:
    with (
        tmpfs(tmp_path / "disk", "1m") as disk,
        running(tmp_path / "central", env=CENTRAL_ENV) as central,
    ):
        env = relay_env(central.url, RELAY_DATA_DIR=str(disk), RELAY_FLUSH_INTERVAL="3600")
        with running(tmp_path / "relay", env=env) as relay:
            accepted, status, error = 0, 202, None
            for batch in range(100):
                status, error = post_bulk(relay.url, CLIENT, entries(batch))
                if status != 202:
                    break
                accepted += 500
            assert status == 503, status
            assert error is not None and error["name"] == "ServiceUnavailableError"
            assert set(error) == {"id", "name", "message", "details"}
            remount(disk, "size=64m")
            assert post_bulk(relay.url, CLIENT, entries(1000))[0] == 202
            accepted += 500
            assert integrity(disk / "buffer.db") == "ok"
        settle(central, ADMIN, "disk", accepted)


def test_read_only_disk_at_start_is_one_clear_error(tmp_path: Path) -> None:
    """Linux refuses to remount read-only while the relay holds its files open for writing,
    so a read-only disk is met at start-up: with an existing buffer, and without."""
    with tmpfs(tmp_path / "disk", "64m") as disk:
        env = relay_env("http://127.0.0.1:9", RELAY_DATA_DIR=str(disk))
        # no upstream: never ready (its key has no flags), but it takes counts
        with running(tmp_path / "first", env=env, wait_for="/health") as relay:
            assert post_bulk(relay.url, CLIENT, entries(0, 10))[0] == 202
        for existing in (True, False):
            if not existing:
                (disk / "empty").mkdir()
                env = {**env, "RELAY_DATA_DIR": str(disk / "empty")}
            remount(disk, "ro")
            try:
                result = subprocess.run(
                    [sys.executable, "-m", "relay", "serve"],
                    env={**os.environ, **env, "RELAY_PORT": str(free_port())},
                    capture_output=True,
                    text=True,
                    timeout=60,
                )
            finally:
                remount(disk, "rw")
            assert result.returncode == 2, result.stderr
            lines = result.stderr.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith("relay: error:"), result.stderr
        assert integrity(disk / "buffer.db") == "ok"
