"""Issue 13, item 4: a relay on a full disk starts, drains to the upstream in steps that
fit, backs off, and counts every table against its bound.

Real processes on a small tmpfs (mounting needs root: CI runs as root; elsewhere these
tests are skipped).
"""

from __future__ import annotations

import os
import signal
import time
import urllib.request
from pathlib import Path

import pytest
from service import free_port, running, start
from test_faults import CENTRAL_ENV, entries, post, relay_env, settle, stored, tmpfs

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")


def metrics_text(url: str) -> str:
    with urllib.request.urlopen(f"{url}/internal-backstage/metrics", timeout=10) as response:
        return str(response.read().decode())


def sample(text: str, name: str) -> float:
    return sum(
        float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name + " ")
    )


def test_a_relay_restarts_on_a_full_disk_and_drains_it(tmp_path: Path) -> None:
    with (
        tmpfs(tmp_path / "disk", "12m") as disk,
        running(tmp_path / "central", env=CENTRAL_ENV) as central,
    ):
        port = free_port()
        filling = relay_env(central.url, RELAY_DATA_DIR=str(disk), RELAY_FLUSH_INTERVAL="3600")
        relay = start(tmp_path / "relay", env=filling, port=port)
        accepted, status = 0, 202
        for batch in range(1000):
            status, _ = post(relay, entries(batch))
            if status != 202:
                break
            accepted += 500
        assert status == 503 and accepted > 0
        relay.stop(signal.SIGKILL)  # a crash on the full disk; nothing freed since
        draining = {**filling, "RELAY_FLUSH_INTERVAL": "0.2"}
        relay = start(tmp_path / "relay", env=draining, port=port)  # it must start
        try:
            settle(central, "disk", accepted, within=120)
            text = metrics_text(relay.url)
            assert sample(text, "relay_buffer_reserve_released_total") >= 1
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


def test_storage_failures_back_off_and_the_relay_recovers_when_space_returns(
    tmp_path: Path,
) -> None:
    """The disk full and the reserve already gone: nothing can be drained. The flusher
    backs off (never a retry every interval) and drains by itself once there is room."""
    with (
        tmpfs(tmp_path / "disk", "16m") as disk,
        running(tmp_path / "central", env=CENTRAL_ENV) as central,
    ):
        port = free_port()
        env = relay_env(central.url, RELAY_DATA_DIR=str(disk), RELAY_FLUSH_INTERVAL="3600")
        relay = start(tmp_path / "relay", env=env, port=port)
        accepted = 0
        for batch in range(5):
            assert post(relay, entries(batch))[0] == 202
            accepted += 500
        relay.stop(signal.SIGKILL)
        (disk / "buffer.reserve").unlink()
        fill(disk / "ballast")
        env = {**env, "RELAY_FLUSH_INTERVAL": "0.1", "RELAY_BACKOFF_MAX": "5"}
        relay = start(tmp_path / "relay", env=env, port=port)
        try:
            time.sleep(4)
            failures = relay.logs().count("buffer storage failed, backing off")
            assert 1 <= failures <= 10, failures  # 0.1 s apart would be 40
            assert stored(central, "disk") == 0
            (disk / "ballast").unlink()
            settle(central, "disk", accepted, within=60)
        finally:
            assert relay.stop() == 0
