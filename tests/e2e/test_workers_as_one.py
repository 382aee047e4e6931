"""A relay decides as one, however many workers it runs (``relay.api.shared``): the real
program at one worker and at two, each request on a connection of its own, so that the
kernel spreads them over the workers (``SO_REUSEPORT``) as it spreads SDKs."""

from __future__ import annotations

import json
import resource
import socket
import sqlite3
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from relaykit import ADMIN, STANDALONE_ENV, call, relay_env, stored
from service import Service, running, scrape, start, wait_until

pytestmark = pytest.mark.process

WORKERS = pytest.mark.parametrize("workers", ["1", "2"], ids=["1-worker", "2-workers"])


def status(url: str, key: str) -> tuple[int, bytes]:
    """One GET on a fresh connection: its status and body."""
    request = urllib.request.Request(url, headers={"Authorization": key, "Connection": "close"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def new_key(central: Service) -> str:
    body = {"type": "client", "environment": "development", "tokenName": "sdk"}
    code, created = call(f"{central.url}/api/admin/api-tokens", body, key=ADMIN)
    assert code == 201, created
    return str(created["secret"])


@pytest.fixture
def central(tmp_path: Path) -> Iterator[Service]:
    with running(tmp_path / "central", env=STANDALONE_ENV) as service:
        yield service


@WORKERS
def test_a_revoked_key_is_refused_by_every_worker_from_the_first_refusal(
    tmp_path: Path, central: Service, workers: str
) -> None:
    """A key the upstream revoked: once any caller got 401 for it, no later caller gets
    200, whichever worker answers (before: ``[401, 200, 401, 200]`` at two workers)."""
    key = new_key(central)
    env = relay_env(central.url, RELAY_WORKERS=workers, RELAY_KEY_CACHE_TTL="1")
    env["RELAY_CLIENT_TOKENS"] = ""  # the SDK's key is vouched for upstream
    with running(tmp_path / "relay", env=env) as relay:
        features = f"{relay.url}/api/client/features"
        assert all(status(features, key)[0] == 200 for _ in range(10))  # known everywhere
        code, _ = call(f"{central.url}/api/admin/api-tokens/sdk", key=ADMIN, method="DELETE")
        assert code == 200
        seen: list[int] = []
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and seen.count(401) < 30:
            seen.append(status(features, key)[0])
        first = seen.index(401)  # refused within the revalidation interval
        assert set(seen[first:]) == {401}, seen


POLL_EVERY = 0.02
"""Seconds between two polls: 50 a second, each to either worker (a fresh connection), see
any worker serving a body older than one another served; back to back, the poller and the
relay took a core each for the whole test."""


def poll_continuously(url: str, key: str, stop: threading.Event) -> list[tuple[float, bytes]]:
    """Answers of polls every ``POLL_EVERY``, each on a fresh connection, until ``stop``."""
    answers: list[tuple[float, bytes]] = []

    def run() -> None:
        while not stop.wait(POLL_EVERY):
            code, body = status(url, key)
            if code == 200:
                answers.append((time.monotonic(), body))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    stop.wait()
    thread.join(15)
    return answers


def enabled(body: bytes, name: str) -> bool:
    return any(f["name"] == name and f["enabled"] for f in json.loads(body)["features"])


@WORKERS
def test_flags_never_go_back_and_every_worker_serves_a_change(
    tmp_path: Path, central: Service, workers: str
) -> None:
    """While SDKs poll, a flag is turned on and off upstream: once a poll got a change, no
    later poll gets the flags from before it, and every worker serves each change within
    the refresh interval and a second (before: one worker served the old body after the
    other served the new one)."""
    flag = "/api/admin/projects/default/features"
    assert call(f"{central.url}{flag}", {"name": "checkout"}, key=ADMIN)[0] == 201
    env = relay_env(central.url, RELAY_WORKERS=workers, RELAY_FEATURES_REFRESH_INTERVAL="1")
    with running(tmp_path / "relay", env=env) as relay:
        url, key = f"{relay.url}/api/client/features", env["RELAY_UPSTREAM_TOKENS"]
        stop = threading.Event()
        collected: list[list[tuple[float, bytes]]] = []
        poller = threading.Thread(
            target=lambda: collected.append(poll_continuously(url, key, stop)), daemon=True
        )
        poller.start()
        changes = []
        for state in ("on", "off", "on"):
            time.sleep(3.5)
            path = f"{central.url}{flag}/checkout/environments/development/{state}"
            assert call(path, {}, key=ADMIN)[0] == 200
            changes.append((time.monotonic(), state == "on"))
        time.sleep(3)
        stop.set()
        poller.join(30)
    [answers] = collected
    states = [enabled(body, "checkout") for _, body in answers]
    # the flag's states as the polls saw them, repeats folded: each change once, in order
    folded = [s for i, s in enumerate(states) if i == 0 or s != states[i - 1]]
    assert folded == [False, True, False, True], folded
    ends = [at for at, _ in changes[1:]] + [float("inf")]
    for (changed_at, state), end in zip(changes, ends, strict=True):
        # within the refresh interval and a second, every poll (any worker) has the change
        late = [body for at, body in answers if changed_at + 2.0 < at < end]
        assert late and all(enabled(body, "checkout") == state for body in late)


@WORKERS
def test_the_bound_holds_for_the_relays_files_and_the_newest_counts_stay(
    tmp_path: Path, central: Service, workers: str
) -> None:
    """``buffer_max_bytes`` 2 MiB, nothing flushed meanwhile, 40,000 distinct entries from 8
    callers at once, then 10 markers: the buffer's files (WAL included) stay within the
    bound and its stated slack (measured 2.6-3.6 MB), the oldest are evicted and counted,
    and the 10 newest reach the upstream (before, at two workers: 55 MB on disk, and 3 to 6
    of the markers lost)."""
    cap = 2 * 1024 * 1024
    env = relay_env(
        central.url,
        RELAY_WORKERS=workers,
        RELAY_BUFFER_MAX_BYTES=str(cap),
        RELAY_FLUSH_INTERVAL="3600",
        RELAY_FINAL_FLUSH_TIMEOUT="120",
    )
    relay = start(tmp_path / "relay", env=env)
    data = tmp_path / "relay" / "data"
    peak = [0]
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], sum(_size(f) for f in data.glob("buffer*.db*")))
            time.sleep(0.005)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        flood = [threading.Thread(target=_post_many, args=(relay, n)) for n in range(8)]
        for thread in flood:
            thread.start()
        for thread in flood:
            thread.join(120)
        for n in range(10):
            _post(relay, [_entry(f"marker-{n}")])
        evicted = scrape(relay.url, "relay_evicted_entries_total")
    finally:
        stop.set()
        watcher.join(5)
        assert relay.stop() == 0
    assert evicted > 0
    assert peak[0] <= 2 * cap, peak[0]  # the slack docs/relays.md states for a small bound
    assert [stored(central, f"marker-{n}") for n in range(10)] == [1] * 10


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _entry(feature: str) -> dict[str, Any]:
    return {"featureName": feature, "appName": "app", "environment": "development", "yes": 1}


def _post(relay: Service, metrics: list[dict[str, Any]]) -> None:
    """As an SDK posts: a 503 (the buffer full, its key's counts paying for the room; at two
    workers their requests at once may choose the same counts) is retried with the counts."""
    body = {"applications": [], "metrics": metrics}
    for _ in range(100):
        try:
            code, _ = call(f"{relay.url}/api/client/metrics/bulk", body)
        except urllib.error.HTTPError as refused:
            refused.close()
            assert refused.code == 503, refused.code
            time.sleep(0.1)
            continue
        assert code == 202
        return
    raise AssertionError("refused 100 times")


def _post_many(relay: Service, caller: int) -> None:
    for post in range(5):
        _post(relay, [_entry(f"f-{caller}-{post}-{n:04}") for n in range(1000)])


@WORKERS
def test_stream_bounds_count_the_relay(tmp_path: Path, central: Service, workers: str) -> None:
    """``stream_max_per_key`` 4: of 8 streams of one key, 4 are held and 4 told to poll,
    however the workers share them (before: each worker held 4)."""
    env = relay_env(central.url, RELAY_WORKERS=workers, RELAY_STREAM_MAX_PER_KEY="4")
    key = env["RELAY_UPSTREAM_TOKENS"]
    with running(tmp_path / "relay", env=env) as relay:
        streams = [_open_stream(relay.port, key) for _ in range(8)]
        try:
            told = [_told_to_poll(stream) for stream in streams]
        finally:
            for stream in streams:
                stream.close()
    assert told.count(True) == 4 and told.count(False) == 4, told


def _open_stream(port: int, key: str) -> socket.socket:
    stream = socket.create_connection(("127.0.0.1", port), timeout=10)
    request = f"GET /api/client/streaming HTTP/1.1\r\nHost: relay\r\nAuthorization: {key}\r\n\r\n"
    stream.sendall(request.encode())
    return stream


def _told_to_poll(stream: socket.socket) -> bool:
    """What the stream wrote within a second of its hydration: told to poll (its hint
    comes with the hydration, then it ends), or held (nothing until a keep-alive)."""
    received, deadline = b"", time.monotonic() + 10
    while b"unleash-connected" not in received or time.monotonic() < deadline:
        stream.settimeout(max(0.01, min(1.0, deadline - time.monotonic())))
        try:
            part = stream.recv(65536)
        except TimeoutError:
            if b"unleash-connected" in received:
                return b"fetch-mode" in received
            continue
        if not part:
            break
        received += part
        if b"fetch-mode" in received:
            return True
    return b"fetch-mode" in received


@WORKERS
def test_gauges_and_backstage_describe_the_whole_relay(
    tmp_path: Path, central: Service, workers: str
) -> None:
    """Counts waiting for the upstream are in ``relay_buffer_entries`` and
    ``/internal-backstage/metricsbatch`` whichever worker answers, the outbox's included
    (before, counts cut into a batch read 0: to an operator, lost)."""
    env = relay_env(central.url, RELAY_WORKERS=workers, RELAY_FLUSH_INTERVAL="3600")
    with running(tmp_path / "relay", env=env) as relay:
        for n in range(36):
            _post(relay, [_entry(f"g-{n}")])
        wait_until(lambda: scrape(relay.url, "relay_buffer_entries") == 36)
        assert {scrape(relay.url, "relay_buffer_entries") for _ in range(8)} == {36.0}
        batches = [status(f"{relay.url}/internal-backstage/metricsbatch", "")[1] for _ in range(8)]
        assert {len(json.loads(b)["metrics"]) for b in batches} == {36}
        hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0).isoformat()
        cut = {**_entry("cut"), "timestamp": hour, "no": 0}
        with sqlite3.connect(tmp_path / "relay" / "data" / "buffer.db") as db:
            db.execute(  # as a claim leaves them: in an outbox batch, not yet sent
                "INSERT INTO outbox (environment, idempotency_key, body, entries, created_at)"
                " VALUES ('development', 'k', ?, 1, 0)",
                (json.dumps({"applications": [], "metrics": [cut]}),),
            )
        wait_until(lambda: scrape(relay.url, "relay_buffer_entries") == 37)
        batch = json.loads(status(f"{relay.url}/internal-backstage/metricsbatch", "")[1])
        assert batch["metrics"][0]["key"]["feature_name"] == "cut"  # the outbox first


@WORKERS
def test_a_standalone_answers_as_one_after_a_revoke_and_a_flag_change(
    tmp_path: Path, workers: str
) -> None:
    """A standalone's workers: once the admin API has answered a revoke or a flag change,
    every later request sees it, whichever worker answers (before: each worker read the
    revisions every second, and served the old key and flags meanwhile)."""
    with running(tmp_path, env={**STANDALONE_ENV, "RELAY_WORKERS": workers}) as standalone:
        key = new_key(standalone)
        features = f"{standalone.url}/api/client/features"
        assert {status(features, key)[0] for _ in range(10)} == {200}
        flag = f"{standalone.url}/api/admin/projects/default/features"
        assert call(flag, {"name": "checkout"}, key=ADMIN)[0] == 201
        path = f"{flag}/checkout/environments/development/on"
        assert call(path, {}, key=ADMIN)[0] == 200
        assert all(enabled(status(features, key)[1], "checkout") for _ in range(20))
        code, _ = call(f"{standalone.url}/api/admin/api-tokens/sdk", key=ADMIN, method="DELETE")
        assert code == 200
        assert {status(features, key)[0] for _ in range(20)} == {401}


def test_a_fleet_of_2000_sdks_on_one_key_streams_at_the_defaults(
    tmp_path: Path, central: Service
) -> None:
    """2,000 SDKs sharing one client key (one key per service is usual) all stream from a
    relay at its defaults (before: 1,000 streamed, 1,000 were told to poll)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 8192)), hard))
    env = relay_env(central.url)
    key = env["RELAY_UPSTREAM_TOKENS"]
    with running(tmp_path / "relay", env=env) as relay:
        streams = [_open_stream(relay.port, key) for _ in range(2000)]
        try:
            wait_until(lambda: scrape(relay.url, "relay_streams") == 2000, "2,000 streams open")
            assert scrape(relay.url, "relay_streams_turned_away_total", bound="key") == 0
        finally:
            for stream in streams:
                stream.close()


def test_keys_vouched_for_before_a_restart_are_served_after_it_with_the_upstream_down(
    tmp_path: Path,
) -> None:
    """A client key and a frontend key the upstream vouched for, then the relay restarted
    while the upstream is down: both are served from what the relay stored (before, the
    frontend key got 503 "Cannot validate the API key now" until the upstream was back)."""
    central = start(tmp_path / "central", env=STANDALONE_ENV)
    try:
        client = new_key(central)
        body = {"type": "frontend", "environment": "development", "tokenName": "web"}
        code, created = call(f"{central.url}/api/admin/api-tokens", body, key=ADMIN)
        assert code == 201
        frontend = str(created["secret"])
        env = relay_env(central.url)
        relay = start(tmp_path / "relay", env=env)
        assert status(f"{relay.url}/api/client/features", client)[0] == 200
        assert status(f"{relay.url}/api/frontend", frontend)[0] == 200
        assert relay.stop() == 0
    finally:
        central.close()
    with running(tmp_path / "relay", env=env) as relay:
        assert status(f"{relay.url}/api/client/features", client)[0] == 200
        code, answer = status(f"{relay.url}/api/frontend", frontend)
        assert code == 200, answer
