"""The shared test helpers, also imported by ``bench/servers.py``: free ports, the real ``relay``
program as a subprocess on one, waiting until a condition holds, and reading what a running
service reports (its Prometheus metrics, the counts a standalone stored).

Standard library and prometheus-client only, nothing of ``relay`` and nothing of pytest, so
the benchmark can use it as it is.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from prometheus_client.parser import text_string_to_metric_families

WAIT = 60.0
"""How long a wait may take before it fails: generous, since a loaded CI machine is slow and a
condition that holds ends its wait at once."""
POLL = 0.05
"""The pause between two checks of ``wait_until``: most ask a service over HTTP, and its
answers cost CPU that the tests share."""
POLL_IN_PROCESS = 0.02
"""The pause between two checks of ``eventually``, on the test's own event loop."""

_ports = random.SystemRandom()


def free_port() -> int:
    """A loopback port nothing listens on now, picked at random below the kernel's ephemeral
    range: ports in that range also go to outgoing connections and to ``bind(0)``, which could
    take one between this call and the service binding it (tests run in parallel)."""
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    while True:
        port = _ports.randrange(10_000, low)
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port


# --- waiting ---


class _Deadline:
    """The deadline logic of both waits: a condition is checked until it holds, and fails
    with ``what`` (and ``details()``, e.g. logs) once ``timeout`` seconds have passed."""

    def __init__(self, timeout: float, what: str, details: Callable[[], str] | None) -> None:
        self._end = time.monotonic() + timeout
        self._timeout = timeout
        self._what = what
        self._details = details

    def met(self, result: object) -> bool:
        if result:
            return True
        if time.monotonic() > self._end:
            details = f"\n{self._details()}" if self._details else ""
            raise AssertionError(f"not within {self._timeout:g}s: {self._what}{details}")
        return False


def wait_until(
    check: Callable[[], object],
    what: str = "condition",
    timeout: float = WAIT,
    details: Callable[[], str] | None = None,
    interval: float = POLL,
) -> None:
    """Poll ``check`` every ``interval`` seconds until it returns something true."""
    deadline = _Deadline(timeout, what, details)
    while not deadline.met(check()):
        time.sleep(interval)


async def eventually(
    check: Callable[[], Awaitable[object]] | Callable[[], object],
    what: str = "condition",
    within: float = WAIT,
    details: Callable[[], str] | None = None,
) -> None:
    """``wait_until`` on the running event loop: ``check`` may be a coroutine function."""
    deadline = _Deadline(within, what, details)
    while True:
        result = check()
        if inspect.isawaitable(result):
            result = await result
        if deadline.met(result):
            return
        await asyncio.sleep(POLL_IN_PROCESS)


# --- services as subprocesses ---


@dataclass
class Service:
    process: subprocess.Popen[Any]
    port: int
    log_path: Path
    out_path: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def logs(self) -> str:
        return self.log_path.read_text()

    def stdout(self) -> str:
        return self.out_path.read_text()

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30) -> int:
        if self.process.poll() is None:
            self.process.send_signal(sig)
        return self.process.wait(timeout)

    def close(self, timeout: float = 30) -> None:
        """Stop it gracefully, or kill it if it has not exited within ``timeout``."""
        try:
            self.stop(signal.SIGTERM, timeout)
        except subprocess.TimeoutExpired:
            self.stop(signal.SIGKILL)


def answers(url: str) -> bool:
    """Whether ``url`` answers 200 now."""
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status == 200
    except OSError:  # refused, reset, timed out, or an HTTP error status
        return False


def wait_ready(
    url: str,
    process: subprocess.Popen[Any],
    timeout: float = WAIT,
    path: str = "/ready",
    details: Callable[[], str] | None = None,
) -> None:
    """Wait until ``process`` answers 200 on ``url + path``; fail at once if it exits."""

    def ready() -> bool:
        if process.poll() is not None:
            more = f"\n{details()}" if details else ""
            raise AssertionError(f"exited with {process.returncode}, before {url} was ready{more}")
        return answers(f"{url}{path}")

    wait_until(ready, f"{url}{path} answers 200", timeout, details)


RELAY = (sys.executable, "-m", "relay", "serve")


def start(
    workdir: Path,
    *args: str,
    env: dict[str, str] | None = None,
    port: int | None = None,
    name: str = "relay",
    wait_for: str = "/ready",
    program: Sequence[str] = RELAY,
    workers: int | None = 1,
) -> Service:
    """Start ``relay serve`` (or ``program``) in ``workdir`` with only the given RELAY_*
    variables set, and wait until it answers ``wait_for``. ``workers``: one process unless
    a test asks (``RELAY_WORKERS`` in ``env`` wins); None: the mode's default, as users run
    it."""
    port = port or free_port()
    clean = {k: v for k, v in os.environ.items() if not k.startswith("RELAY_")}
    clean.update(env or {})
    clean.setdefault("RELAY_PORT", str(port))
    clean.setdefault("RELAY_HOST", "127.0.0.1")
    clean.setdefault("RELAY_SQLITE_SYNCHRONOUS", "NORMAL")
    if workers is not None:
        clean.setdefault("RELAY_WORKERS", str(workers))
    workdir.mkdir(parents=True, exist_ok=True)
    log_path, out_path = workdir / f"{name}.log", workdir / f"{name}.out"
    with out_path.open("a") as out, log_path.open("a") as err:
        process = subprocess.Popen(
            [*program, *args], cwd=workdir, env=clean, stdout=out, stderr=err, text=True
        )
    service = Service(process, port, log_path, out_path)
    try:
        wait_ready(service.url, process, path=wait_for)
    except Exception:
        service.stop(signal.SIGKILL)
        raise RuntimeError(f"{name} failed to start:\n{service.logs()}") from None
    return service


@contextmanager
def running(workdir: Path, *args: str, **kwargs: Any) -> Iterator[Service]:
    service = start(workdir, *args, **kwargs)
    try:
        yield service
    finally:
        service.close()


def relay_env(upstream: str, key: str, **extra: str) -> dict[str, str]:
    """Settings of a test relay: flushes every 200 ms with ``key``, short backoffs."""
    return {
        "RELAY_MODE": "relay",
        "RELAY_UPSTREAM_URL": upstream,
        "RELAY_UPSTREAM_TOKENS": key,
        "RELAY_FLUSH_INTERVAL": "0.2",
        "RELAY_BACKOFF_MAX": "0.5",
        **extra,
    }


# --- what a running service reports ---


def post_bulk(url: str, key: str, metrics: list[dict[str, Any]]) -> tuple[int, Any]:
    """POST ``metrics`` to ``url``'s bulk endpoint: the status, and the JSON error body if any."""
    request = urllib.request.Request(
        f"{url}/api/client/metrics/bulk",
        data=json.dumps({"applications": [], "metrics": metrics}).encode(),
        headers={"Authorization": key, "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, None
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def get_json(url: str, key: str | None = None) -> Any:
    """The JSON body of a GET answered 2xx (an error status raises ``HTTPError``)."""
    request = urllib.request.Request(url, headers={"Authorization": key} if key else {})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.load(response)


def raw_path(feature: str, hours_back: int | None = None) -> str:
    """Where a standalone answers the counts it stored of ``feature``. The name is
    percent-encoded, dots too: "." and ".." are feature names there, not path steps."""
    segment = quote(feature, safe="").replace(".", "%2E")
    query = "" if hours_back is None else f"?hoursBack={hours_back}"
    return f"/api/admin/client-metrics/features/{segment}/raw{query}"


def stored(url: str, admin_key: str, feature: str) -> int:
    """The yes counts a standalone at ``url`` stored of ``feature`` (in the last 48 hours),
    over every page of the answer."""
    total, page = 0, raw_path(feature)
    while page:
        answer = get_json(f"{url}{page}", admin_key)
        total += sum(row["yes"] for row in answer["data"])
        page = answer.get("next")
    return total


def sample(text: str, name: str, **labels: str) -> float:
    """The sum of the samples ``name`` with these labels in a Prometheus text exposition."""
    return sum(
        s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == name and labels.items() <= s.labels.items()
    )


def scrape(url: str, name: str, **labels: str) -> float:
    """``sample`` of the metrics a service at ``url`` exposes now."""
    with urllib.request.urlopen(f"{url}/internal-backstage/metrics", timeout=10) as response:
        return sample(response.read().decode(), name, **labels)


def settle(
    central: Service,
    admin_key: str,
    feature: str,
    expected: int,
    relay: tuple[Service, str] | None = None,
    within: float = WAIT,
) -> None:
    """Wait until the standalone ``central`` stored ``expected`` yes counts of ``feature``,
    then make sure that nothing more arrives: nothing was sent twice.

    ``relay`` is the running relay that sent them, with a client key of environment
    ``development``. A marker count is posted to it and must arrive as well: its flusher
    sends every batch of its outbox before it batches newer counts, so once the marker is
    stored, the relay has sent everything it held, whatever it might send twice. Without
    ``relay``, the relay has exited (after a final flush that waited for its answers) and
    sends nothing more.
    """
    wait_until(
        lambda: stored(central.url, admin_key, feature) >= expected,
        f"{expected} counts of {feature} stored",
        within,
    )
    if relay is not None:
        drained(central, admin_key, *relay)
    assert stored(central.url, admin_key, feature) == expected


def drained(central: Service, admin_key: str, relay: Service, key: str) -> None:
    """Wait until the running ``relay`` has sent the standalone ``central`` everything it
    held: a marker count posted to it (with ``key``, a client key of environment
    ``development``) arrives after all of it, since its flusher sends every batch of its
    outbox, in order, before it batches newer counts."""
    marker = f"settled-{uuid.uuid4().hex[:8]}"
    entry = {"featureName": marker, "appName": "settle", "environment": "development"}
    assert post_bulk(relay.url, key, [{**entry, "yes": 1}])[0] == 202
    wait_until(lambda: stored(central.url, admin_key, marker) >= 1, "the relay sent all it held")
