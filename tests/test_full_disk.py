"""Issue 13, item 4: a relay on a full disk starts, drains to the upstream in steps that
fit, backs off, and counts every table against its bound.

Real processes on a small tmpfs (mounting needs root: CI runs as root; elsewhere these
tests are skipped).
"""

from __future__ import annotations

import json
import os
import signal
from datetime import datetime
from pathlib import Path

import pytest
from service import Service, get_json, running, scrape, settle, start, stored, wait_until
from test_faults import ADMIN, CENTRAL_ENV, CLIENT, entries, post, relay_env, tmpfs

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")


def fill_and_kill(workdir: Path, disk: Path, central: Service, batches: int) -> int:
    """A relay on ``disk`` that does not flush takes up to ``batches`` x 500 entries (until
    the disk is full: 503), then is killed. Returns the entries it accepted."""
    env = relay_env(central.url, RELAY_DATA_DIR=str(disk), RELAY_FLUSH_INTERVAL="3600")
    relay = start(workdir, env=env)
    accepted = 0
    for batch in range(batches):
        status, _ = post(relay, entries(batch))
        if status != 202:
            assert status == 503
            break
        accepted += 500
    relay.stop(signal.SIGKILL)  # a crash: nothing freed since
    return accepted


def drain(disk: Path, central: Service, **extra: str) -> dict[str, str]:
    return relay_env(central.url, RELAY_DATA_DIR=str(disk), RELAY_FLUSH_INTERVAL="0.2", **extra)


def test_a_relay_restarts_on_a_full_disk_and_drains_it(tmp_path: Path) -> None:
    with (
        tmpfs(tmp_path / "disk", "12m") as disk,
        running(tmp_path / "central", env=CENTRAL_ENV) as central,
    ):
        accepted = fill_and_kill(tmp_path / "relay", disk, central, batches=1000)
        assert 0 < accepted < 1000 * 500  # the disk filled up
        relay = start(tmp_path / "relay", env=drain(disk, central))  # it must start
        try:
            settle(central, ADMIN, "disk", accepted, (relay, CLIENT), within=180)
            assert scrape(relay.url, "relay_buffer_reserve_released_total") >= 1
        finally:
            assert relay.stop() == 0


def fill(path: Path) -> None:
    """A file taking whatever room the disk has left."""
    with path.open("wb") as ballast:
        try:
            while True:
                ballast.write(b"\0" * 65536)
                ballast.flush()
        except OSError:
            pass


def backoffs(relay: Service) -> list[dict[str, float]]:
    """The relay's "backing off" log lines: when, and the wait each announced."""
    found = []
    for line in relay.logs().splitlines():
        if "buffer storage failed, backing off" in line:
            entry = json.loads(line)
            at = datetime.fromisoformat(entry["ts"]).timestamp()
            found.append({"at": at, "retry_in": float(entry["retry_in"])})
    return found


def test_storage_failures_back_off_and_the_relay_recovers_when_space_returns(
    tmp_path: Path,
) -> None:
    """The disk full and the reserve already gone: nothing can be drained. The flusher
    backs off (never a retry every interval) and drains by itself once there is room.
    Its flag cache cannot write either, and still fetches and serves SDKs' flags."""
    with (
        tmpfs(tmp_path / "disk", "16m") as disk,
        running(tmp_path / "central", env=CENTRAL_ENV) as central,
    ):
        accepted = fill_and_kill(tmp_path / "relay", disk, central, batches=5)
        (disk / "buffer.reserve").unlink()
        fill(disk / "ballast")
        relay = start(tmp_path / "relay", env=drain(disk, central, RELAY_BACKOFF_MAX="5"))
        try:
            wait_until(lambda: len(backoffs(relay)) >= 3, "three failed flushes")
            _, second, third = backoffs(relay)[:3]
            # each failure waits longer than the one before, and at least as long as it said
            assert second["retry_in"] > 0.2 and third["retry_in"] > second["retry_in"] / 2
            assert third["at"] - second["at"] >= second["retry_in"] - 0.05
            assert stored(central.url, ADMIN, "disk") == 0
            assert get_json(f"{relay.url}/api/client/features", CLIENT)["version"] == 2
            (disk / "ballast").unlink()
            settle(central, ADMIN, "disk", accepted, (relay, CLIENT))
        finally:
            assert relay.stop() == 0
