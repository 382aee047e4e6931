"""Benchmarks: start relay and standalone as subprocesses, drive them, print figures.

    python bench/run.py                     # every scenario, 10 s each, 16 connections
    python bench/run.py --smoke             # tiny sizes, for CI (no figure is asserted)
    python bench/run.py relay standalone --duration 30

Load comes from ``wrk`` (Debian package) when installed, else from a small aiohttp load
generator in this file (its own CPU use is printed, so you can tell when it is the
bottleneck). Figures: requests/s, entries/s, p50/p99 latency, non-2xx count, peak RSS.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

# the tests' helpers (tests/service.py): free ports, services as subprocesses, waiting
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from service import RELAY, Service, free_port, scrape, wait_until
from service import start as start_service

ROOT = Path(__file__).resolve().parent.parent
ADMIN = "*:*.bench-admin-secret-0123456789abcdef"
CLIENT = "default:development.bench-client-secret-0123456789abcdef"
BULK = "/api/client/metrics/bulk"


# --- bodies ---


def bulk_body(features: int = 20, apps: int = 5, entries: int = 100) -> bytes:
    """The reference body of issue 5: 100 entries over 20 flags and 5 apps, plus 5
    registrations, about 17 KB. Compact JSON with millisecond ``Z`` timestamps, as Node's
    ``JSON.stringify`` and Unleash Edge write them; one flag in four carries two variants."""
    now = _now()
    metrics = [
        {
            "featureName": f"new-checkout-{i % features:02d}",
            "appName": f"web-service-{i % apps}",
            "environment": "development",
            "timestamp": now,
            "yes": 17 + i,
            "no": 3 + i % 7,
            "variants": {"blue": 5 + i, "green": 7} if i % 4 == 0 else {},
        }
        for i in range(entries)
    ]
    applications = [
        {
            "appName": f"web-service-{i}",
            "environment": "development",
            "instanceId": f"pod-{i}-7f9c8d6b5-x2k4m",
            "sdkVersion": "unleash-client-node:6.12.0",
            "strategies": ["default", "flexibleRollout", "userWithId", "remoteAddress"],
            "started": now,
            "interval": 15000,
            "connectVia": [{"appName": "edge", "instanceId": "edge-1"}],
        }
        for i in range(apps)
    ]
    return _compact({"applications": applications, "metrics": metrics})


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _compact(body: dict[str, Any]) -> bytes:
    return json.dumps(body, separators=(",", ":")).encode()


def sdk_body(toggles: int = 20) -> bytes:
    now = _now()
    return _compact(
        {
            "appName": "checkout-service",
            "instanceId": "pod-1",
            "connectionId": "c0ffee",
            "environment": "default",
            "bucket": {
                "start": now,
                "stop": now,
                "toggles": {
                    f"feature-flag-number-{i:03d}": {"yes": 10 + i, "no": i, "variants": {"a": 3}}
                    for i in range(toggles)
                },
            },
        }
    )


# --- processes ---


@dataclass
class Server:
    """A service started by ``tests/service.py``, with its memory figures."""

    name: str
    service: Service

    @property
    def url(self) -> str:
        return self.service.url

    def peak_rss_mb(self) -> float:
        """Summed over the process and its children (``workers`` > 1)."""
        return self._memory("status", "VmHWM")

    def rss_mb(self) -> float:
        return self._memory("status", "VmRSS")

    def pss_mb(self) -> float:
        """Proportional set size, summed: shared pages (the interpreter, libraries) counted
        once over the processes, as the node's memory accounting sees them."""
        return self._memory("smaps_rollup", "Pss")

    def _memory(self, source: str, field: str) -> float:
        total = 0
        pids = [self.service.process.pid]
        while pids:
            pid = pids.pop()
            try:
                text = Path(f"/proc/{pid}/{source}").read_text()
                pids += map(int, Path(f"/proc/{pid}/task/{pid}/children").read_text().split())
            except OSError:
                continue
            match = re.search(rf"^{field}:\s+(\d+) kB", text, re.M)
            total += int(match.group(1)) if match else 0
        return total / 1024

    def stop(self) -> None:
        self.service.close(timeout=60)


def start(
    name: str, workdir: Path, env: dict[str, str], program: list[str] | None = None
) -> Server:
    """Start ``relay serve`` (or ``program``, given the port as its argument) and wait until it
    answers ``/ready``; its output goes to ``workdir/name.log`` and ``name.out``."""
    port = free_port()
    command = RELAY if program is None else [*program, str(port)]
    env = {"RELAY_LOG_LEVEL": "WARNING", **env}
    service = start_service(workdir, env=env, port=port, name=name, program=command)
    return Server(name, service)


def standalone(workdir: Path, workers: int) -> Server:
    return start(
        "standalone",
        workdir / "standalone",
        {
            "RELAY_INIT_ADMIN_API_TOKENS": ADMIN,
            "RELAY_INIT_CLIENT_API_TOKENS": CLIENT,
            "RELAY_WORKERS": str(workers),
            "RELAY_SQLITE_SYNCHRONOUS": "FULL",  # 202 means durable, as deployed
        },
    )


def relay(workdir: Path, upstream: Server, workers: int, flush_interval: str = "10") -> Server:
    return start(
        "relay",
        workdir / "relay",
        {
            "RELAY_MODE": "relay",
            "RELAY_UPSTREAM_URL": upstream.url,
            "RELAY_UPSTREAM_TOKENS": CLIENT,
            "RELAY_CLIENT_TOKENS": CLIENT,
            "RELAY_FLUSH_INTERVAL": flush_interval,
            "RELAY_SQLITE_SYNCHRONOUS": os.environ.get("BENCH_SYNCHRONOUS", "FULL"),
            "RELAY_WORKERS": str(workers),
        },
    )


# --- load ---


@dataclass
class Load:
    requests: int
    seconds: float
    p50_ms: float
    p99_ms: float
    non_2xx: int
    generator: str

    @property
    def rps(self) -> float:
        return self.requests / self.seconds


def drive(url: str, body: bytes, connections: int, seconds: float, workdir: Path) -> Load:
    if shutil.which("wrk"):
        return _wrk(url, body, connections, seconds, workdir)
    return asyncio.run(_aiohttp_load(url, body, connections, seconds))


def _wrk(url: str, body: bytes, connections: int, seconds: float, workdir: Path) -> Load:
    body_file = workdir / "body.json"
    body_file.write_bytes(body)
    script = workdir / "post.lua"
    script.write_text(
        'local f = io.open("' + str(body_file) + '", "rb")\n'
        "wrk.body = f:read('*a')\nf:close()\n"
        'wrk.method = "POST"\n'
        f'wrk.headers["Authorization"] = "{CLIENT}"\n'
        'wrk.headers["Content-Type"] = "application/json"\n'
    )
    threads = min(2, connections)
    out = subprocess.run(
        [
            "wrk",
            "-t",
            str(threads),
            "-c",
            str(connections),
            "-d",
            f"{max(1, round(seconds))}s",
            "--latency",
            "-s",
            str(script),
            url,
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    requests = int(re.search(r"(\d+) requests in", out).group(1))  # type: ignore[union-attr]
    duration = re.search(r"requests in ([\d.]+)(\w+),", out)
    assert duration is not None
    secs = float(duration.group(1)) * {"s": 1, "ms": 0.001, "m": 60}[duration.group(2)]
    non_2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    return Load(
        requests,
        secs,
        _wrk_ms(out, "50%"),
        _wrk_ms(out, "99%"),
        int(non_2xx.group(1)) if non_2xx else 0,
        "wrk",
    )


def _wrk_ms(out: str, pct: str) -> float:
    match = re.search(rf"{re.escape(pct)}\s+([\d.]+)(us|ms|s)", out)
    assert match is not None
    return float(match.group(1)) * {"us": 0.001, "ms": 1, "s": 1000}[match.group(2)]


async def _aiohttp_load(url: str, body: bytes, connections: int, seconds: float) -> Load:
    import aiohttp

    latencies: list[float] = []
    non_2xx = 0
    cpu0 = time.process_time()
    deadline = time.monotonic() + seconds
    headers = {"Authorization": CLIENT, "Content-Type": "application/json"}

    async def worker(session: aiohttp.ClientSession) -> None:
        nonlocal non_2xx
        while time.monotonic() < deadline:
            t0 = time.perf_counter()
            async with session.post(url, data=body, headers=headers) as response:
                await response.read()
                if response.status >= 300:
                    non_2xx += 1
            latencies.append(time.perf_counter() - t0)

    start_time = time.monotonic()
    connector = aiohttp.TCPConnector(limit=connections)
    async with aiohttp.ClientSession(connector=connector) as session:
        await asyncio.gather(*(worker(session) for _ in range(connections)))
    elapsed = time.monotonic() - start_time
    latencies.sort()
    cpu = (time.process_time() - cpu0) / elapsed
    print(f"    (load generator: aiohttp, used {cpu:.0%} of a core)")
    return Load(
        len(latencies),
        elapsed,
        latencies[len(latencies) // 2] * 1000,
        latencies[int(len(latencies) * 0.99)] * 1000,
        non_2xx,
        "aiohttp",
    )


# --- scenarios ---


def report(name: str, load: Load, entries_per_request: int, server: Server) -> dict[str, Any]:
    row = {
        "scenario": name,
        "requests_per_s": round(load.rps),
        "entries_per_s": round(load.rps * entries_per_request),
        "p50_ms": round(load.p50_ms, 2),
        "p99_ms": round(load.p99_ms, 2),
        "non_2xx": load.non_2xx,
        "peak_rss_mb": round(server.peak_rss_mb(), 1),
        "pss_mb": round(server.pss_mb(), 1),
        "generator": load.generator,
    }
    print(json.dumps(row))
    if load.non_2xx:
        # A figure made of error answers measures nothing: fail the run (and the CI smoke).
        raise SystemExit(f"{name}: {load.non_2xx} answers were not 2xx")
    return row


def drive_bulk(server: Server, args: argparse.Namespace, workdir: Path) -> Load:
    """The reference bulk body posted to ``server`` for the run's duration."""
    url = f"{server.url}/api/client/metrics/bulk"
    return drive(url, bulk_body(), args.connections, args.duration, workdir)


def scenario_baseline(args: argparse.Namespace, workdir: Path) -> None:
    """A bare handler that only validates the body: the yardstick for the others."""
    server = start("baseline", workdir, {}, [sys.executable, str(ROOT / "bench" / "baseline.py")])
    try:
        report("baseline: validate only", drive_bulk(server, args, workdir), 100, server)
    finally:
        server.stop()


def scenario_standalone(args: argparse.Namespace, workdir: Path) -> None:
    central = standalone(workdir, args.workers)
    try:
        report("standalone bulk ingest", drive_bulk(central, args, workdir), 100, central)
    finally:
        central.stop()


def scenario_relay(args: argparse.Namespace, workdir: Path) -> None:
    central = standalone(workdir, args.workers)
    edge = relay(workdir, central, args.workers, flush_interval=str(args.flush_interval))
    try:
        before = scrape(central.url, "relay_http_requests_total", route=BULK)
        load = drive_bulk(edge, args, workdir)
        row = report("relay bulk ingest", load, 100, edge)
        after = scrape(central.url, "relay_http_requests_total", route=BULK)
        intervals = max(1.0, load.seconds / args.flush_interval)
        print(
            json.dumps(
                {
                    "scenario": "relay upstream traffic",
                    "sdk_requests": load.requests,
                    "upstream_requests": int(after - before),
                    "upstream_requests_per_interval": round((after - before) / intervals, 2),
                    "peak_rss_mb": row["peak_rss_mb"],
                }
            )
        )
    finally:
        edge.stop()
        central.stop()


def scenario_sdk(args: argparse.Namespace, workdir: Path) -> None:
    central = standalone(workdir, args.workers)
    edge = relay(workdir, central, args.workers)
    try:
        load = drive(
            f"{edge.url}/api/client/metrics", sdk_body(), args.connections, args.duration, workdir
        )
        report("relay SDK /api/client/metrics", load, 20, edge)
    finally:
        edge.stop()
        central.stop()


def scenario_drain(args: argparse.Namespace, workdir: Path) -> None:
    """Fill a relay's buffer with distinct keys while it does not flush, then restart it
    flushing and time until the standalone holds everything."""
    keys, per_post = args.drain_keys, min(4000, args.drain_keys)
    central = standalone(workdir, args.workers)
    edge = relay(workdir, central, args.workers, flush_interval="3600")
    now = datetime.now(UTC).isoformat()
    filled_pss = 0.0
    try:
        for first in range(0, keys, per_post):
            metrics = [
                {
                    "featureName": f"drain-feature-{i:08d}",
                    "appName": "drain-app",
                    "environment": "development",
                    "timestamp": now,
                    "yes": 1,
                    "no": 0,
                }
                for i in range(first, min(keys, first + per_post))
            ]
            request = urllib.request.Request(
                f"{edge.url}/api/client/metrics/bulk",
                data=_compact({"applications": [], "metrics": metrics}),
                headers={"Authorization": CLIENT, "Content-Type": "application/json"},
            )
            with urllib.request.urlopen(request, timeout=120) as response:
                assert response.status == 202
            filled_pss = max(filled_pss, edge.pss_mb())
        filled_rss = edge.peak_rss_mb()
        edge.service.stop(signal.SIGKILL)  # what is buffered stays on disk
        started = time.monotonic()
        edge = relay(workdir, central, args.workers, flush_interval="0.1")
        peak = peak_pss = 0.0

        def drained() -> bool:
            nonlocal peak, peak_pss
            peak, peak_pss = max(peak, edge.rss_mb()), max(peak_pss, edge.pss_mb())
            return scrape(central.url, "relay_metric_entries_total", outcome="accepted") >= keys

        wait_until(drained, "the drain finished", args.drain_timeout, interval=0.2)
        elapsed = time.monotonic() - started
        print(
            json.dumps(
                {
                    "scenario": "drain buffered keys into standalone",
                    "keys": keys,
                    "seconds": round(elapsed, 2),
                    "entries_per_s": round(keys / elapsed),
                    "relay_peak_rss_mb_filling": round(filled_rss, 1),
                    "relay_peak_rss_mb_draining": round(max(peak, edge.peak_rss_mb()), 1),
                    "relay_peak_pss_mb_filling": round(filled_pss, 1),
                    "relay_peak_pss_mb_draining": round(peak_pss, 1),
                }
            )
        )
    finally:
        edge.stop()
        central.stop()


SCENARIOS = {
    "baseline": scenario_baseline,
    "relay": scenario_relay,
    "standalone": scenario_standalone,
    "sdk": scenario_sdk,
    "drain": scenario_drain,
}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("scenarios", nargs="*", choices=[*SCENARIOS, []], default=[])
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--workers", type=int, default=1, help="RELAY_WORKERS of the services")
    parser.add_argument("--flush-interval", type=float, default=5.0)
    parser.add_argument("--drain-keys", type=int, default=1_000_000)
    parser.add_argument("--drain-timeout", type=float, default=600.0)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, for CI")
    args = parser.parse_args()
    if args.smoke:
        args.duration, args.connections, args.drain_keys = 1.0, 2, 2000
        args.flush_interval = 0.5
    with tempfile.TemporaryDirectory(prefix="relay-bench-") as tmp:
        for name in args.scenarios or list(SCENARIOS):
            SCENARIOS[name](args, Path(tmp) / name)


if __name__ == "__main__":
    main()
