"""The real SDKs on the delta protocol through a relay (real processes) in front of the
standalone: Python and Node streaming, Node polling ``/api/client/delta``. A flag turned off
and on reaches them (the time it took is printed, not asserted); they keep their flags while
the upstream is away and get what changed meanwhile once it returns; after a restart of the
relay they resume at the revision it kept (``Last-Event-ID``), not from a hydration."""

from __future__ import annotations

import contextlib
import http.client
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import DEV_KEY
from sdkdelta import KEYS, turn, with_flags
from sdks import quiet_sdk_logs
from service import Service, relay_env, running, scrape, start, wait_until
from watchers import NodeWatcher, PythonWatcher, Watcher

pytestmark = pytest.mark.process

TOGGLES = ["checkout", "search"]
DELTA = "/api/client/delta"
STREAM = "/api/client/streaming"
INTERVAL = "0.5"  # the relay polls its upstream this often


def relay_in_front(upstream: Service, workdir: Path, port: int | None = None) -> Service:
    """A relay polling ``upstream`` every ``INTERVAL``: started, for the caller to close."""
    env = relay_env(upstream.url, DEV_KEY, RELAY_FEATURES_REFRESH_INTERVAL=INTERVAL)
    return start(workdir, env=env, port=port, name="relay")


def watchers(
    url: str, node_sdk: Path, tmp_path: Path, polling: bool = True
) -> list[tuple[Watcher, str]]:
    """The streaming SDKs, and with ``polling`` the Node SDK polling the delta. Only those
    asked for are started: one started and dropped was a Node process left running, whose
    pipes and process warnings failed later tests."""
    quiet_sdk_logs()
    started = [
        (PythonWatcher(url, DEV_KEY, TOGGLES, tmp_path), "python, streaming"),
        (NodeWatcher(node_sdk, url, DEV_KEY, TOGGLES, {"type": "streaming"}), "node, streaming"),
    ]
    if polling:
        delta = {"type": "polling", "format": "delta"}
        node = NodeWatcher(node_sdk, url, DEV_KEY, TOGGLES, delta, refreshInterval=200)
        started.append((node, "node, delta"))
    return started


def follow_changes(sdks: list[tuple[Watcher, str]], url: str) -> None:
    """Every SDK sees the initial flags, then each of a few changes made at ``url``."""
    for watcher, _ in sdks:
        watcher.arrival({"checkout": True, "search": False}, 0.0)
    for name, on, state in (
        ("checkout", False, {"checkout": False, "search": False}),
        ("search", True, {"checkout": False, "search": True}),
        ("checkout", True, {"checkout": True, "search": True}),
    ):
        changed = turn(url, name, on)
        for watcher, what in sdks:
            took = watcher.arrival(state, changed)
            print(f"{what} through a relay: {name} {on} reached the SDK in {took * 1000:.0f} ms")


def turn_off_while_down(standalone: Path, name: str) -> None:
    """``relay flags off`` on a stopped standalone's database."""
    data = standalone / "data"
    command = [sys.executable, "-m", "relay", "flags", "off", name, "--data-dir", str(data)]
    done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=60)
    assert done.returncode == 0, done.stderr


def test_sdks_follow_changes_through_a_relay_and_an_outage_of_its_upstream(
    tmp_path: Path, node_sdk: Path
) -> None:
    sdks: list[tuple[Watcher, str]] = []
    with contextlib.ExitStack() as stack:
        standalone = stack.enter_context(with_flags(tmp_path))
        relay = relay_in_front(standalone, tmp_path / "relay")
        stack.callback(relay.close)
        stack.callback(lambda: [watcher.close() for watcher, _ in sdks])
        sdks += watchers(relay.url, node_sdk, tmp_path)
        follow_changes(sdks, standalone.url)
        assert scrape(relay.url, "relay_streams") == 2
        standalone.close()
        # the upstream is gone: the streams stay open, the SDKs keep their flags
        time.sleep(2 * float(INTERVAL) + 1)
        assert scrape(relay.url, "relay_streams") == 2
        for watcher, _ in sdks:
            assert watcher.state() == {"checkout": True, "search": True}
        late = PythonWatcher(relay.url, DEV_KEY, TOGGLES, tmp_path)  # hydrated from the copy
        sdks.append((late, "python, started during the outage"))
        late.arrival({"checkout": True, "search": True}, 0.0)
        turn_off_while_down(tmp_path / "standalone", "checkout")
        started = time.monotonic()
        with running(tmp_path / "standalone", env=KEYS, port=standalone.port, name="again"):
            for watcher, what in sdks:
                took = watcher.arrival({"checkout": False, "search": True}, started)
                print(f"{what}: a change made while the upstream was down, {took:.1f} s after")


def test_sdks_resume_at_the_revision_a_restarted_relay_kept(tmp_path: Path, node_sdk: Path) -> None:
    """The relay restarts on its data directory: the streaming SDKs reconnect with
    ``Last-Event-ID`` and are brought up to date with events, not a hydration."""
    with with_flags(tmp_path) as standalone:
        relay = relay_in_front(standalone, tmp_path / "relay")
        sdks = watchers(relay.url, node_sdk, tmp_path, polling=False)
        try:
            for watcher, _ in sdks:
                watcher.arrival({"checkout": True, "search": False}, 0.0)
            relay.close()
            with contextlib.closing(
                relay_in_front(standalone, tmp_path / "relay", relay.port)
            ) as again:
                changed = turn(standalone.url, "search", True)
                for watcher, what in sdks:
                    took = watcher.arrival({"checkout": True, "search": True}, changed)
                    print(f"{what}: a change after the relay restarted, {took:.1f} s")
                assert scrape(again.url, "relay_streams_opened_total", start="replay") == 2
                assert scrape(again.url, "relay_streams_opened_total", start="hydration") == 0
        finally:
            for watcher, _ in sdks:
                watcher.close()


def test_a_chain_of_relays_follows_the_upstreams_stream(tmp_path: Path, node_sdk: Path) -> None:
    """Two relays in a chain with the default refresh interval (15 s), the first with two
    workers: each relay follows its upstream's stream, one stream per scope whatever its
    workers, so a change reaches the SDKs at the end of the chain well within the interval
    (the times printed)."""
    with contextlib.ExitStack() as stack:
        standalone = stack.enter_context(with_flags(tmp_path))
        first = stack.enter_context(
            running(
                tmp_path / "first",
                env=relay_env(standalone.url, DEV_KEY, RELAY_WORKERS="2"),
                name="first",
            )
        )
        second = stack.enter_context(
            running(tmp_path / "second", env=relay_env(first.url, DEV_KEY), name="second")
        )
        sdks = watchers(second.url, node_sdk, tmp_path, polling=False)
        stack.callback(lambda: [watcher.close() for watcher, _ in sdks])
        for watcher, _ in sdks:
            watcher.arrival({"checkout": True, "search": False}, 0.0)
        wait_until(lambda: scrape(first.url, "relay_streams") == 1, "the second relay following")
        for on in (False, True):
            changed = turn(standalone.url, "checkout", on)
            for watcher, what in sdks:
                took = watcher.arrival({"checkout": on, "search": False}, changed)
                print(f"{what}, two relays: checkout {on} arrived in {took * 1000:.0f} ms")
        assert scrape(standalone.url, "relay_streams") == 1  # the first relay's, one scope
        assert scrape(second.url, "relay_streams") == 2  # the SDKs'
        assert fetches(standalone) <= 2  # a first fetch (and a claim's): then the stream


def fetches(service: Service) -> float:
    return scrape(service.url, "relay_http_requests_total", route="/api/client/features")


def test_sdks_on_every_worker_of_a_relay_get_each_change(tmp_path: Path, node_sdk: Path) -> None:
    """A relay with two workers polling its upstream's delta (the standalone's stream refused
    by ``stream_max`` 0: it hints ``fetch-mode: polling``): one worker fetches each change,
    the other takes the copy and its revision from ``cache.db`` and wakes its streams;
    whichever worker the SDKs stream from, each change reaches them."""
    with contextlib.ExitStack() as stack:
        standalone = stack.enter_context(with_flags(tmp_path, RELAY_STREAM_MAX="0"))
        env = relay_env(
            standalone.url, DEV_KEY, RELAY_WORKERS="2", RELAY_FEATURES_REFRESH_INTERVAL=INTERVAL
        )
        relay = stack.enter_context(running(tmp_path / "relay", env=env, name="relay"))
        sdks = watchers(relay.url, node_sdk, tmp_path, polling=False)
        sdks += watchers(relay.url, node_sdk, tmp_path / "more", polling=False)
        stack.callback(lambda: [watcher.close() for watcher, _ in sdks])
        for watcher, _ in sdks:
            watcher.arrival({"checkout": True, "search": False}, 0.0)
        for i in range(4):
            on = i % 2 == 1
            changed = turn(standalone.url, "checkout", on)
            for watcher, what in sdks:
                took = watcher.arrival({"checkout": on, "search": False}, changed)
                print(f"{what}, a relay of 2 workers: checkout {on} in {took * 1000:.0f} ms")
        assert scrape(relay.url, "relay_streams") == 4
        assert scrape(standalone.url, "relay_streams_turned_away_total", bound="service") >= 1
        # polled by the delta protocol: the events since the last poll, not every flag
        assert scrape(standalone.url, "relay_http_requests_total", route=DELTA) > 4
        assert fetches(standalone) == 0


def test_a_scope_first_asked_for_by_an_sdk_is_followed_at_once(tmp_path: Path) -> None:
    """A relay refreshing every 60 s, its SDK's key in no ``client_tokens``: the scope is
    followed upstream as soon as the relay first serves it, not from its first claimed
    refresh a minute later, so a change reaches the SDK's stream from its first
    connection."""
    with contextlib.ExitStack() as stack:
        standalone = stack.enter_context(with_flags(tmp_path))
        env = relay_env(standalone.url, DEV_KEY, RELAY_FEATURES_REFRESH_INTERVAL="60")
        relay = stack.enter_context(running(tmp_path / "relay", env=env, name="relay"))
        port = int(relay.url.rsplit(":", 1)[1])
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
        stack.callback(connection.close)
        connection.request("GET", STREAM, headers={"Authorization": DEV_KEY})
        response = connection.getresponse()
        assert response.status == 200
        assert next_event(response)[0] == "unleash-connected"
        wait_until(lambda: scrape(standalone.url, "relay_streams") == 1, "followed", timeout=20)
        turn(standalone.url, "checkout", False)
        kind, data = next_event(response)  # within the socket's 20 s, a third of an interval
        assert kind == "unleash-updated"
        [updated] = json.loads(data)["events"]
        assert (updated["feature"]["name"], updated["feature"]["enabled"]) == ("checkout", False)


def next_event(response: http.client.HTTPResponse) -> tuple[str, str]:
    """The next server-sent event's name and data (comments skipped)."""
    fields: dict[str, str] = {}
    while True:
        line = response.readline()
        assert line, "the stream ended"
        if line == b"\n" and "event" in fields:
            return fields["event"], fields["data"]
        name, _, value = line.decode().rstrip("\n").partition(": ")
        fields[name] = value
