"""Issue 13, item 4: a relay on a full disk starts, drains to the upstream in steps that
fit, backs off, and counts every table against its bound.

Real processes on a small tmpfs (mounting needs root: CI runs as root; elsewhere these
tests are skipped).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import time
from collections import Counter
from contextlib import closing
from datetime import datetime
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from faultkit import ADMIN, CENTRAL_ENV, CLIENT, entries, relay_env, remount, tmpfs
from service import (
    Service,
    drained,
    free_port,
    get_json,
    post_bulk,
    running,
    scrape,
    settle,
    start,
    stored,
    wait_until,
)

from relay.core.errors import StorageError
from relay.store.reserve import Reserve, open_with_room
from relay.store.salvage import damaged_files
from relay.store.sql import BUFFER_SCHEMA
from relay.store.sqlite import SqliteDatabase

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")


def fill_and_kill(workdir: Path, disk: Path, central: Service, batches: int) -> int:
    """A relay on ``disk`` that does not flush takes up to ``batches`` x 500 entries (until
    the disk is full: 503), then is killed. Returns the entries it accepted."""
    env = relay_env(central.url, RELAY_DATA_DIR=str(disk), RELAY_FLUSH_INTERVAL="3600")
    relay = start(workdir, env=env)
    accepted = 0
    for batch in range(batches):
        status, _ = post_bulk(relay.url, CLIENT, entries(batch))
        if status != 202:
            assert status == 503
            break
        accepted += 500
    relay.stop(signal.SIGKILL)  # a crash: nothing freed since
    return accepted


def drain(disk: Path, upstream: Service | str, **extra: str) -> dict[str, str]:
    url = upstream if isinstance(upstream, str) else upstream.url
    return relay_env(url, RELAY_DATA_DIR=str(disk), RELAY_FLUSH_INTERVAL="0.2", **extra)


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
    """A file taking whatever room the disk has left (unbuffered: nothing is left to
    flush, and fail, when it is closed)."""
    with path.open("wb", buffering=0) as ballast:
        try:
            while ballast.write(b"\0" * 65536):
                pass
        except OSError:
            pass


def backoffs(relay: Service) -> list[dict[str, Any]]:
    """The relay's "backing off" log lines: when, at which level, and the wait each
    announced."""
    found = []
    for line in relay.logs().splitlines():
        if "buffer storage failed, backing off" in line:
            entry = json.loads(line)
            at = datetime.fromisoformat(entry["ts"]).timestamp()
            found.append({"at": at, "level": entry["level"], "retry_in": entry["retry_in"]})
    return found


def test_storage_failures_back_off_and_the_relay_recovers_when_space_returns(
    tmp_path: Path,
) -> None:
    """The disk full, the reserve already gone and the WAL checkpointed to nothing: no
    write can be made. The flusher backs off, each wait twice the one before (up to
    ``backoff_max``), says so once as a warning (the rest at debug), and drains by itself
    once there is room. Its flag cache cannot write either, and still fetches and serves
    SDKs' flags."""
    with (
        tmpfs(tmp_path / "disk", "16m") as disk,
        running(tmp_path / "central", env=CENTRAL_ENV) as central,
    ):
        accepted = fill_and_kill(tmp_path / "relay", disk, central, batches=5)
        (disk / "buffer.reserve").unlink()
        pin = sqlite3.connect(disk / "buffer.db")  # a reader keeps the WAL from restarting
        pin.execute("BEGIN")
        pin.execute("SELECT count(*) FROM metrics").fetchone()
        fill(disk / "ballast")
        env = drain(disk, central, RELAY_BACKOFF_MAX="5", RELAY_LOG_LEVEL="debug")
        relay = start(tmp_path / "relay", env=env)
        try:
            wait_until(lambda: len(backoffs(relay)) >= 4, "four failed flushes")
            first, *rest = backoffs(relay)[:4]
            assert first["level"] == "warning" and {b["level"] for b in rest} == {"debug"}
            waits = [b["retry_in"] for b in (first, *rest)]
            assert waits == [min(5.0, 0.2 * 2**n) for n in range(1, 5)]
            assert all(b["at"] - a["at"] >= a["retry_in"] - 0.05 for a, b in pairwise(rest))
            # a batch cut before the disk filled may go out (its ack cannot be written: it
            # goes again later, under the same idempotency key); nothing goes twice
            assert stored(central.url, ADMIN, "disk") <= accepted
            assert get_json(f"{relay.url}/api/client/features", CLIENT)["version"] == 2
            pin.close()
            (disk / "ballast").unlink()
            settle(central, ADMIN, "disk", accepted, (relay, CLIENT))
            assert "buffer storage works again" in relay.logs()
        finally:
            assert relay.stop() == 0


def test_a_buffer_file_that_cannot_be_checked_at_start_is_left_as_it_is(tmp_path: Path) -> None:
    """A relay that closed its buffer cleanly (no WAL, no WAL index left) restarts on a
    full disk: the start-up check cannot even open the file, which says nothing about the
    file. It is left as it is (it was moved aside as damaged, its counts lost), the reserve
    gives SQLite the room for its WAL index, and the relay drains every count."""
    with (
        tmpfs(tmp_path / "disk", "8m") as disk,
        running(tmp_path / "central", env=CENTRAL_ENV) as central,
    ):
        accepted = fill_and_kill(tmp_path / "relay", disk, central, batches=4)
        with closing(sqlite3.connect(disk / "buffer.db")) as db:  # as a clean close leaves it
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        assert not Path(f"{disk / 'buffer.db'}-shm").exists()
        fill(disk / "ballast")
        with running(tmp_path / "relay", env=drain(disk, central)) as relay:
            assert "buffer file not checked for damage at start" in relay.logs()
            assert not damaged_files(disk / "buffer.db")
            settle(central, ADMIN, "disk", accepted, (relay, CLIENT))


def test_a_damaged_buffer_is_salvaged_whole_or_not_at_all(tmp_path: Path) -> None:
    """A damaged buffer file met at start on a disk with room for a part of what can be
    salvaged: it is left as it was (it was half copied into a new file, and the rest, still
    in the file moved aside, never sent), and salvaged whole once there is room."""
    with (
        tmpfs(tmp_path / "disk", "16m") as disk,
        running(tmp_path / "central", env=CENTRAL_ENV) as central,
    ):
        posted = fill_and_kill(tmp_path / "relay", disk, central, batches=20)
        buffer = disk / "buffer.db"
        with closing(sqlite3.connect(buffer)) as db:  # everything in the file itself
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        page = 4096
        with buffer.open("r+b") as file:  # one page in the middle, fixed bytes
            file.seek(buffer.stat().st_size // page // 2 * page)
            file.write(bytes(range(256)) * (page // 256))
        fill(disk / "ballast")
        room = buffer.stat().st_size // 4
        os.truncate(disk / "ballast", (disk / "ballast").stat().st_size - room)
        with pytest.raises(RuntimeError, match="cannot salvage"):
            start(tmp_path / "relay", env=drain(disk, central))
        assert not damaged_files(buffer)  # put back as it was
        (disk / "ballast").unlink()
        with running(tmp_path / "relay", env=drain(disk, central)) as relay:
            assert len(damaged_files(buffer)) == 1
            drained(central, ADMIN, relay, CLIENT)
            assert posted / 2 <= stored(central.url, ADMIN, "disk") <= posted


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_full_disk_loses_nothing_and_drains_while_still_full(
    tmp_path: Path, workers: str
) -> None:
    """Issue 20: the upstream down, SDKs fill a 6 MiB disk until 503, the relay is killed;
    restarted on the still-full disk with the upstream back, it drains (rather than backing
    off forever) and says no error at every tick (an older relay of two workers said one 60
    times in 15 s); restarted again once the disk has grown, every count it answered 202
    for has arrived, once."""
    port = free_port()
    upstream = f"http://127.0.0.1:{port}"
    with tmpfs(tmp_path / "disk", "6m") as disk:
        env = drain(disk, upstream, RELAY_WORKERS=workers)
        relay = start(tmp_path / "relay", env=env, wait_for="/health")
        accepted, batch = 0, 0
        while (status := post_bulk(relay.url, CLIENT, entries(batch))[0]) == 202:
            accepted, batch = accepted + 500, batch + 1
        assert status == 503 and accepted > 0  # the disk filled up
        relay.stop(signal.SIGKILL)
        with running(tmp_path / "central", env=CENTRAL_ENV, port=port) as central:
            relay = start(tmp_path / "full", env=env)
            try:  # still full: draining is what frees it
                settle(central, ADMIN, "disk", accepted)
                time.sleep(3)  # what the relay logs while it has nothing to do on a full disk
                assert "periodic job failed" not in relay.logs()
                assert relay.logs().count("buffer storage failed") <= 1
            finally:
                assert relay.stop() == 0
            assert not repeated_errors(relay.logs())
            remount(disk, "size=64m")
            relay = start(tmp_path / "relay", env=env)
            try:
                settle(central, ADMIN, "disk", accepted, (relay, CLIENT))
            finally:
                assert relay.stop() == 0
            assert not repeated_errors(relay.logs())


def test_workers_start_and_serve_on_a_full_disk(tmp_path: Path) -> None:
    """On the merged main a relay with two workers restarted on its full disk lost a
    worker to SIGBUS at its first request (prometheus_client's files, mapped into memory
    and grown sparse, were on that disk), and the supervisor stopped the relay: it could
    not even start to drain."""
    port = free_port()
    upstream = f"http://127.0.0.1:{port}"
    with tmpfs(tmp_path / "disk", "6m") as disk:
        env = drain(disk, upstream, RELAY_WORKERS="2")
        relay = start(tmp_path / "relay", env=env, wait_for="/health")
        batch = 0
        while post_bulk(relay.url, CLIENT, entries(batch))[0] == 202:
            batch += 1
        relay.stop(signal.SIGKILL)
        fill(disk / "ballast")  # whatever room the kill freed
        relay = start(tmp_path / "full", env=env, wait_for="/health")
        try:
            for _ in range(40):  # new connections: the kernel spreads them over both workers
                assert post_bulk(relay.url, CLIENT, entries(0))[0] in (202, 503)
                scrape(relay.url, "relay_buffer_reserve_released_total")
            assert relay.process.poll() is None, relay.logs()
            assert not list(disk.glob("prometheus*")), "metric files on the buffer's disk"
        finally:
            assert relay.stop() == 0


def repeated_errors(logs: str) -> dict[str, int]:
    """The error messages of a relay's log said more than once, with their counts."""
    said = Counter(
        line["msg"]
        for line in map(json.loads, logs.splitlines())
        if line["level"] in ("error", "critical")
    )
    return {message: n for message, n in said.items() if n > 1}


async def test_a_file_opened_at_start_waits_for_room_on_a_full_disk(tmp_path: Path) -> None:
    """Several workers share one reserve for the files they open at start, and the leader
    may take the room it left (merging another worker's shard): a file that cannot be
    opened then is tried again while the drain frees room, rather than stopping the relay
    (a two-worker relay restarted on its full disk sometimes did not start)."""
    with tmpfs(tmp_path / "disk", "2m") as disk:
        path = disk / "buffer-1.db"
        with closing(sqlite3.connect(path)) as conn:  # closed cleanly: no WAL index left
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("CREATE TABLE t (x)")
        reserve = Reserve(disk / "buffer.reserve", 64 * 1024)  # already handed back
        fill(disk / "ballast")
        refused = SqliteDatabase(path, BUFFER_SCHEMA)
        with pytest.raises(StorageError):
            await open_with_room(refused, reserve)
        loop = asyncio.get_running_loop()
        loop.call_later(1.0, (disk / "ballast").unlink)  # the drain frees room meanwhile
        waited = SqliteDatabase(path, BUFFER_SCHEMA)
        await open_with_room(waited, reserve, patience=30.0)
        await waited.close()
