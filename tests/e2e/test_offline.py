"""Offline mode (``relay serve --mode offline``): flags from a file in either of Unleash
Edge's formats, to the real Python and Node SDKs, a changed file picked up and a broken one
not, only the configured keys, metrics answered 202 and counted, dropped or kept. The real
program in a subprocess."""

from __future__ import annotations

import json
import sqlite3
import urllib.error
from pathlib import Path
from typing import Any

import pytest
from conftest import DEV_KEY
from sdks import Check, node_evaluate, python_evaluate, quiet_sdk_logs
from service import RELAY, free_port, get_json, running, scrape, wait_until

pytestmark = pytest.mark.process

FRONTEND_KEY = "default:development.frontend-offline-0123456789"
OTHER_KEY = "default:development.not-configured-0123456789"

FULL = {
    "version": 2,
    "features": [
        {
            "name": "full-on",
            "enabled": True,
            "project": "default",
            "strategies": [
                {
                    "name": "default",
                    "constraints": [{"contextName": "userId", "operator": "IN", "values": ["7"]}],
                }
            ],
        },
        {"name": "full-off", "enabled": False, "project": "default", "strategies": []},
        {"name": "elsewhere", "enabled": True, "project": "other", "strategies": []},
    ],
}
SIMPLE = {"simple-on": {"enabled": True, "variant": "blue"}, "simple-off": {"enabled": False}}


def offline_env(file: Path, **extra: str) -> dict[str, str]:
    return {
        "RELAY_MODE": "offline",
        "RELAY_BOOTSTRAP_FILE": str(file),
        "RELAY_CLIENT_TOKENS": DEV_KEY,
        "RELAY_FRONTEND_TOKENS": FRONTEND_KEY,
        **extra,
    }


def names(url: str, key: str = DEV_KEY) -> list[str]:
    return sorted(f["name"] for f in get_json(f"{url}/api/client/features", key)["features"])


def test_full_format_with_both_sdks(tmp_path: Path, node_sdk: Path) -> None:
    """A client features answer: each key sees its projects' flags, evaluated by the SDKs
    with their strategies."""
    quiet_sdk_logs()
    file = tmp_path / "features.json"
    file.write_text(json.dumps(FULL))
    checks = [
        Check("full-on", {"userId": "7"}),
        Check("full-on", {"userId": "8"}),
        Check("full-off", {"userId": "7"}),
        Check("elsewhere"),  # project "other": not the key's
    ]
    with running(tmp_path, env=offline_env(file)) as relay:
        assert names(relay.url) == ["full-off", "full-on"]
        assert python_evaluate(relay.url, DEV_KEY, checks, tmp_path) == [True, False, False, False]
        assert node_evaluate(node_sdk, relay.url, DEV_KEY, checks) == [True, False, False, False]


def test_simple_format_with_both_sdks(tmp_path: Path, node_sdk: Path) -> None:
    """Edge's simple format: on or off for everyone, with the variant named."""
    quiet_sdk_logs()
    file = tmp_path / "simple.json"
    file.write_text(json.dumps(SIMPLE))
    checks = [Check("simple-on", {"userId": "1"}), Check("simple-off", {"userId": "1"})]
    variant = [Check("simple-on", {"userId": "1"}, variant=True)]
    with running(tmp_path, env=offline_env(file)) as relay:
        assert python_evaluate(relay.url, DEV_KEY, checks, tmp_path) == [True, False]
        assert node_evaluate(node_sdk, relay.url, DEV_KEY, checks) == [True, False]
        [py_variant] = python_evaluate(relay.url, DEV_KEY, variant, tmp_path)
        [node_variant] = node_evaluate(node_sdk, relay.url, DEV_KEY, variant)
        assert py_variant["name"] == node_variant["name"] == "blue"
        toggles = get_json(f"{relay.url}/api/frontend", FRONTEND_KEY)["toggles"]
        assert [(t["name"], t["variant"]["name"]) for t in toggles] == [("simple-on", "blue")]


def test_reload_picks_up_a_change_and_keeps_the_copy_past_a_broken_file(tmp_path: Path) -> None:
    file = tmp_path / "simple.json"
    file.write_text(json.dumps(SIMPLE))
    env = offline_env(file, RELAY_RELOAD_INTERVAL="0.2", RELAY_LOG_FORMAT="text")
    with running(tmp_path, env=env) as relay:
        assert names(relay.url) == ["simple-off", "simple-on"]
        file.write_text(json.dumps({"added": {"enabled": True}}))
        wait_until(lambda: names(relay.url) == ["added"], "the changed file served")
        broken = file.with_suffix(".new")  # whole, then in place: never read empty
        broken.write_text('{"half": {"enabled": tr')
        broken.replace(file)
        wait_until(lambda: "bootstrap file not reloaded" in relay.logs(), "the error logged")
        assert names(relay.url) == ["added"]
        file.write_text(json.dumps(FULL))
        wait_until(lambda: names(relay.url) == ["full-off", "full-on"], "fixed file served")
        assert relay.logs().count("bootstrap file not reloaded") == 1


def test_a_file_swapped_for_a_fifo_is_not_read_and_the_service_answers(tmp_path: Path) -> None:
    """A named pipe (or a device) in the file's place has no end: reading it would block the
    process for good. It is refused like a broken file, the copy held is served."""
    import contextlib
    import os

    file = tmp_path / "simple.json"
    file.write_text(json.dumps(SIMPLE))
    env = offline_env(file, RELAY_RELOAD_INTERVAL="0.2", RELAY_LOG_FORMAT="text")
    with running(tmp_path, env=env) as relay:
        file.unlink()
        os.mkfifo(file)
        try:
            wait_until(lambda: "not a regular file" in relay.logs(), "the FIFO refused")
            assert names(relay.url) == ["simple-off", "simple-on"]
        finally:  # a reader blocked on the FIFO (the bug) sees its end, so the test can stop
            with contextlib.suppress(OSError):  # ENXIO: no reader, nothing to unblock
                os.close(os.open(file, os.O_WRONLY | os.O_NONBLOCK))


def test_a_large_file_is_reloaded_while_requests_are_answered(tmp_path: Path) -> None:
    """Reading a changed file of some MB, and rendering and comparing each scope's answer, is
    seconds of work: done in a thread, requests that come meanwhile are answered, not held
    until it ends. Shown by the answers' gaps: the longest is a part of the reload's time
    (one parse held by the thread), never all of it (the event loop blocked throughout)."""
    import itertools
    import threading
    import time

    file = tmp_path / "features.json"
    file.write_text(json.dumps(SIMPLE))
    scopes = [DEV_KEY, *(f"p{i}:development.offline-reload-key-{i}-0123456789" for i in range(3))]
    big = {
        "version": 2,
        "features": [
            {
                "name": f"flag-{i:05d}",
                "enabled": True,
                "project": f"p{i % 3}",
                "strategies": [
                    {
                        "name": "default",
                        "constraints": [
                            {"contextName": "userId", "operator": "IN", "values": [str(i)] * 40}
                        ],
                    }
                ],
            }
            for i in range(12_000)
        ],
    }
    env = offline_env(
        file,
        RELAY_RELOAD_INTERVAL="0.2",
        RELAY_LOG_FORMAT="text",
        RELAY_CLIENT_TOKENS=",".join(scopes),
    )
    with running(tmp_path, env=env) as relay:
        answered: list[float] = []
        stop = threading.Event()

        def probe() -> None:
            while not stop.is_set():
                get_json(f"{relay.url}/health")
                answered.append(time.monotonic())

        thread = threading.Thread(target=probe)
        thread.start()
        try:
            wait_until(lambda: len(answered) > 10, "health answered")
            changed = time.monotonic()
            file.write_text(json.dumps(big))
            wait_until(lambda: "bootstrap file reloaded" in relay.logs(), "the file reloaded")
            reloaded = time.monotonic()
            time.sleep(0.5)
        finally:
            stop.set()
            thread.join()
        assert len(names(relay.url, scopes[1])) == 4000
    times = [changed, *(t for t in answered if t > changed)]
    longest = max(b - a for a, b in itertools.pairwise(times))
    assert longest < (reloaded - changed) / 2, (longest, reloaded - changed)


def _post_metrics(url: str, key: str) -> int:
    import urllib.error
    import urllib.request

    body = {
        "appName": "offline-test",
        "instanceId": "i-1",
        "bucket": {
            "start": "2026-01-01T00:00:00Z",
            "stop": "2026-01-01T00:01:00Z",
            "toggles": {"simple-on": {"yes": 3, "no": 1}},
        },
    }
    request = urllib.request.Request(
        f"{url}/api/client/metrics",
        data=json.dumps(body).encode(),
        headers={"Authorization": key, "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


@pytest.mark.parametrize("kept", [False, True])
def test_only_configured_keys_and_metrics_counted(tmp_path: Path, kept: bool) -> None:
    file = tmp_path / "simple.json"
    file.write_text(json.dumps(SIMPLE))
    env = offline_env(file, RELAY_LOG_FORMAT="json")
    if kept:
        env["RELAY_OFFLINE_METRICS"] = "keep"
    with running(tmp_path, env=env) as relay:
        assert _post_metrics(relay.url, OTHER_KEY) == 401
        with pytest.raises(Exception, match="401"):
            get_json(f"{relay.url}/api/client/features", OTHER_KEY)
        assert _post_metrics(relay.url, DEV_KEY) == 202
        accepted = scrape(relay.url, "relay_metric_entries_total", outcome="accepted")
        assert accepted == 1
        lines = relay.logs().splitlines()
        started = [json.loads(line) for line in lines if line.startswith("{")]
        said = next(line["metrics"] for line in started if "bootstrap_file" in line)
    assert ("kept in" in said) is kept
    if kept:
        with sqlite3.connect(tmp_path / "data" / "buffer.db") as db:
            [(yes,)] = db.execute("SELECT sum(yes) FROM metrics").fetchall()
        assert yes == 3


@pytest.mark.parametrize(
    ("content", "extra", "says"),
    [
        ('{"features": 1}', {}, "bootstrap_file cannot be served"),
        (None, {}, "No such file"),
        ("{}", {"RELAY_CLIENT_TOKENS": "", "RELAY_FRONTEND_TOKENS": ""}, "set one"),
    ],
)
def test_start_refused_without_flags_or_keys(
    tmp_path: Path, content: str | None, extra: dict[str, str], says: str
) -> None:
    import os
    import subprocess

    file = tmp_path / "features.json"
    if content is not None:
        file.write_text(content)
    env: dict[str, Any] = {k: v for k, v in os.environ.items() if not k.startswith("RELAY_")}
    env.update(offline_env(file, RELAY_PORT=str(free_port()), **extra))
    done = subprocess.run(
        [*RELAY], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert says in done.stderr
    assert DEV_KEY not in done.stderr


def test_any_string_is_an_offline_key_as_in_edge(tmp_path: Path) -> None:
    """Edge's offline mode takes any string as a key (``EdgeToken::offline_token``): one
    without Unleash's form is a wildcard that sees every flag of the file, client and
    frontend alike; one in Unleash's form (a short secret too) sees its project only. The
    form is Edge's ``relay offline --client-tokens``, not only relay's variables."""
    file = tmp_path / "features.json"
    file.write_text(json.dumps(FULL))
    scoped = "default:development.ci"  # too short a secret for relay's keys: Edge scopes it
    env = {"BOOTSTRAP_FILE": str(file)}
    edge = (
        "-i",
        "127.0.0.1",
        "offline",
        "--client-tokens",
        f"ci-token-1,{scoped}",
        "--frontend-tokens",
        "browser token",
    )
    program = (RELAY[0], "-m", "relay")
    with running(tmp_path, *edge, env=env, program=program) as relay:
        assert names(relay.url, "ci-token-1") == ["elsewhere", "full-off", "full-on"]
        assert names(relay.url, "Bearer ci-token-1") == ["elsewhere", "full-off", "full-on"]
        assert names(relay.url, scoped) == ["full-off", "full-on"]
        toggles = get_json(f"{relay.url}/api/frontend/all", "browser token")["toggles"]
        assert sorted(t["name"] for t in toggles) == ["elsewhere", "full-off", "full-on"]
        refused = [
            ("ci-token-2", "/api/client/features", 401),  # not configured
            ("browser token", "/api/client/features", 403),  # a frontend key
            ("ci-token-1", "/api/frontend", 403),  # a client key
        ]
        for key, path, status in refused:
            with pytest.raises(urllib.error.HTTPError) as refusal:
                get_json(f"{relay.url}{path}", key)
            refusal.value.close()
            assert refusal.value.code == status, (key, path)
        assert _post_metrics(relay.url, "ci-token-1") == 202
        assert "ci-token-1" not in relay.logs()


def test_a_multi_project_offline_key_is_refused_by_name(tmp_path: Path) -> None:
    """``[]:development.x`` names no project: with nobody to ask which, it is refused at
    start rather than taken for every project or for none."""
    import os
    import subprocess

    file = tmp_path / "features.json"
    file.write_text(json.dumps(FULL))
    env: dict[str, Any] = {k: v for k, v in os.environ.items() if not k.startswith("RELAY_")}
    env.update(offline_env(file, RELAY_CLIENT_TOKENS="[]:development.secret-x"))
    done = subprocess.run(
        [*RELAY], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert "multi-project" in done.stderr and "secret-x" not in done.stderr
