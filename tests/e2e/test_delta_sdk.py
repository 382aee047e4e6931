"""The real SDKs on the delta protocol against the standalone (a real process): Node's
``unleash-client`` polling ``/api/client/delta``, and (``test_streaming_sdk.py``) Node and
Python streaming. A flag turned off and on reaches them; the time it took is printed (the
issue's bound, under 1 s at the standalone, is shown by these figures, not asserted)."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from http.client import HTTPConnection
from pathlib import Path

import pg
import pytest
from conftest import DEV_KEY
from sdkdelta import KEYS, turn, with_flags
from sdks import quiet_sdk_logs
from service import Service, running, scrape
from watchers import NodeWatcher, PythonWatcher, Watcher

pytestmark = pytest.mark.process


@pytest.fixture
def standalone(tmp_path: Path) -> Iterator[Service]:
    with with_flags(tmp_path) as service:
        yield service


def follows_changes(watcher: Watcher, url: str, what: str) -> None:
    """The SDK sees the initial flags, then each of a few changes, in order."""
    watcher.arrival({"checkout": True, "search": False}, 0.0)
    for name, on, state in (
        ("checkout", False, {"checkout": False, "search": False}),
        ("search", True, {"checkout": False, "search": True}),
        ("checkout", True, {"checkout": True, "search": True}),
    ):
        took = watcher.arrival(state, turn(url, name, on))
        turned = "on" if on else "off"
        print(f"{what}: {name} turned {turned} reached the SDK in {took * 1000:.0f} ms")


def test_node_sdk_polling_delta(standalone: Service, node_sdk: Path) -> None:
    mode = {"type": "polling", "format": "delta"}
    watcher = NodeWatcher(
        node_sdk, standalone.url, DEV_KEY, ["checkout", "search"], mode, refreshInterval=200
    )
    try:
        follows_changes(watcher, standalone.url, "node, delta polling every 200 ms")
    finally:
        watcher.close()
    polls = scrape(standalone.url, "relay_http_requests_total", route="/api/client/delta")
    assert polls > 3  # by the delta protocol, not the client features answer
    assert scrape(standalone.url, "relay_http_requests_total", route="/api/client/features") == 0


def test_node_sdk_streaming(standalone: Service, node_sdk: Path) -> None:
    watcher = NodeWatcher(
        node_sdk, standalone.url, DEV_KEY, ["checkout", "search"], {"type": "streaming"}
    )
    try:
        follows_changes(watcher, standalone.url, "node, streaming")
        assert watcher.modes == ["streaming"]  # it never fell back to polling
    finally:
        watcher.close()
    assert scrape(standalone.url, "relay_http_requests_total", route="/api/client/features") == 0


def test_python_sdk_streaming(standalone: Service, tmp_path: Path) -> None:
    quiet_sdk_logs()
    watcher = PythonWatcher(standalone.url, DEV_KEY, ["checkout", "search"], tmp_path)
    try:
        follows_changes(watcher, standalone.url, "python, streaming")
    finally:
        watcher.close()


def test_sdks_past_the_stream_bound_still_get_flags(tmp_path: Path, node_sdk: Path) -> None:
    """Past ``stream_max`` (0 here: no stream has room) the Node SDK is told to poll, and
    follows changes by polling; the Python SDK (which never polls) has its flags."""
    with with_flags(tmp_path, RELAY_STREAM_MAX="0") as service:
        toggles = ["checkout", "search"]
        node = NodeWatcher(
            node_sdk, service.url, DEV_KEY, toggles, {"type": "streaming"}, refreshInterval=200
        )
        quiet_sdk_logs()
        python = PythonWatcher(service.url, DEV_KEY, toggles, tmp_path)
        try:
            python.arrival({"checkout": True, "search": False}, 0.0)
            follows_changes(node, service.url, "node, told to poll")
            assert node.modes[-1] == "polling"  # switched by the hint, once it had flags
        finally:
            node.close()
            python.close()
        assert scrape(service.url, "relay_streams_turned_away_total", bound="service") >= 2
        assert scrape(service.url, "relay_http_requests_total", route="/api/client/features") > 0


def test_a_change_through_another_instance_reaches_streaming_sdks(
    tmp_path: Path, node_sdk: Path, request: pytest.FixtureRequest
) -> None:
    """Two standalone instances on one PostgreSQL: SDKs streaming from one see a flag
    changed through the other (announced by the database as the write commits)."""
    request.getfixturevalue("postgres_server")
    database = asyncio.run(pg.create_database())
    url = {"RELAY_DATABASE_URL": pg.url_of(database)}
    toggles = ["checkout", "search"]
    try:
        with (
            with_flags(tmp_path / "a", **url) as writer,
            running(tmp_path / "b", env={**url}, name="reader") as reader,
        ):
            quiet_sdk_logs()
            python = PythonWatcher(reader.url, DEV_KEY, toggles, tmp_path)
            node = NodeWatcher(node_sdk, reader.url, DEV_KEY, toggles, {"type": "streaming"})
            try:
                for watcher in (python, node):
                    watcher.arrival({"checkout": True, "search": False}, 0.0)
                changed = turn(writer.url, "checkout", False)
                for watcher, what in ((python, "python"), (node, "node")):
                    took = watcher.arrival({"checkout": False, "search": False}, changed)
                    print(f"{what}, streaming from another instance: {took * 1000:.0f} ms")
            finally:
                python.close()
                node.close()
            assert scrape(reader.url, "relay_flag_revision_notifications_total") > 0
    finally:
        asyncio.run(pg.drop_database(database))


def test_sdks_reconnect_with_last_event_id_and_lose_nothing(tmp_path: Path, node_sdk: Path) -> None:
    """The standalone stops; a flag is turned off meanwhile (``relay flags`` on its
    database); it starts again on the same port: the SDKs reconnect with ``Last-Event-ID``,
    get the events they missed (not a hydration), and have the change."""
    toggles = ["checkout", "search"]
    with with_flags(tmp_path) as first:
        port = first.port
        quiet_sdk_logs()
        python = PythonWatcher(first.url, DEV_KEY, toggles, tmp_path)
        node = NodeWatcher(node_sdk, first.url, DEV_KEY, toggles, {"type": "streaming"})
        for watcher in (python, node):
            watcher.arrival({"checkout": True, "search": False}, 0.0)
    try:
        data = tmp_path / "standalone" / "data"
        off = subprocess.run(
            [sys.executable, "-m", "relay", "flags", "off", "checkout", "--data-dir", str(data)],
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
        assert off.returncode == 0, off.stderr
        started = time.monotonic()
        with running(tmp_path / "standalone", env=KEYS, port=port, name="again") as again:
            for watcher, what in ((python, "python"), (node, "node")):
                took = watcher.arrival({"checkout": False, "search": False}, started)
                print(f"{what}: a change made while the server was down, {took:.1f} s after")
            assert scrape(again.url, "relay_streams_opened_total", start="replay") == 2
            assert scrape(again.url, "relay_streams_opened_total", start="hydration") == 0
    finally:
        python.close()
        node.close()


def test_shutdown_ends_streams_at_once(tmp_path: Path) -> None:
    """SIGTERM with a stream open: the stream ends and the process exits, not held for
    its ``shutdown_timeout`` (60 s here) by a stream that would never end by itself."""
    with with_flags(tmp_path, RELAY_SHUTDOWN_TIMEOUT="60") as service:
        connection = HTTPConnection("127.0.0.1", service.port, timeout=30)
        connection.request("GET", "/api/client/streaming", headers={"Authorization": DEV_KEY})
        response = connection.getresponse()
        assert response.status == 200
        assert response.readline() == b"event: unleash-connected\n"
        assert service.stop(signal.SIGTERM, timeout=30) == 0
        assert b"event: unleash-updated" not in response.read()  # read to its end
        connection.close()


def test_a_change_through_another_worker_reaches_streaming_sdks(
    tmp_path: Path, node_sdk: Path
) -> None:
    """Two workers on one SQLite file: whichever worker takes a write and whichever holds a
    stream, the SDKs see each change (the times printed: a worker holding streams reads
    the revision every 0.2 s)."""
    toggles = ["checkout", "search"]
    with with_flags(tmp_path, RELAY_WORKERS="2") as service:
        quiet_sdk_logs()
        watchers = [
            PythonWatcher(service.url, DEV_KEY, toggles, tmp_path),
            NodeWatcher(node_sdk, service.url, DEV_KEY, toggles, {"type": "streaming"}),
        ]
        try:
            for watcher in watchers:
                watcher.arrival({"checkout": True, "search": False}, 0.0)
            for i in range(6):
                on = i % 2 == 1
                changed = turn(service.url, "checkout", on)
                for watcher, what in zip(watchers, ("python", "node"), strict=True):
                    took = watcher.arrival({"checkout": on, "search": False}, changed)
                    print(f"{what}, 2 workers: checkout {on} arrived in {took * 1000:.0f} ms")
        finally:
            for watcher in watchers:
                watcher.close()
