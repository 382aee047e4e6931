"""Benchmarks: start relay and standalone as subprocesses, drive them, print figures.

    python bench/run.py                     # every scenario, 10 s each, 16 connections
    python bench/run.py --smoke             # tiny sizes, for CI (no figure is asserted)
    python bench/run.py relay standalone --duration 30
    python bench/run.py baseline relay unleash --unleash /path/to/node_modules

``--workers`` is the services' ``workers`` setting, ``auto`` (their default: the cores the
process may use) unless given. ``unleash`` is a real Unleash (npm ``unleash-server`` 8.2.0
installed in the ``node_modules`` given, on the local PostgreSQL) taking the same body with
the 20 flags it names created first (Unleash drops counts of flags it does not know); it
runs only when ``--unleash`` is given.

This file holds the bodies and the scenarios; the services are started by ``servers.py``
and driven by ``wrk.py`` (``wrk`` when installed, else a small aiohttp load generator whose
own CPU use is printed, so you can tell when it is the bottleneck). Figures: requests/s,
entries/s, p50/p99 latency, non-2xx count, peak RSS.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import time
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from features import call
from servers import (
    CLIENT,
    Server,
    real_unleash,
    relay,
    scrape,
    standalone,
    start,
    wait_until,
)
from wrk import Load, drive, report

ROOT = Path(__file__).resolve().parent.parent
BULK = "/api/client/metrics/bulk"


# --- bodies ---


def bulk_body(
    features: int = 20, apps: int = 5, entries: int = 100, app: str = "web-service"
) -> bytes:
    """The reference body of issue 5: 100 entries over 20 flags and 5 apps, plus 5
    registrations, about 17 KB. Compact JSON with millisecond ``Z`` timestamps, as Node's
    ``JSON.stringify`` and Unleash Edge write them; one flag in four carries two variants.
    ``app``: the applications' name prefix (another one, other rows in the central store)."""
    now = _now()
    metrics = [
        {
            "featureName": f"new-checkout-{i % features:02d}",
            "appName": f"{app}-{i % apps}",
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
            "appName": f"{app}-{i}",
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


# --- scenarios ---


def drive_bulk(server: Server, args: argparse.Namespace, workdir: Path) -> Load:
    """The reference bulk body posted to ``server`` for the run's duration."""
    return measured(server, "/api/client/metrics/bulk", bulk_body(), args, workdir)


def measured(
    server: Server, path: str, body: bytes, args: argparse.Namespace, workdir: Path
) -> Load:
    """``body`` posted to ``server``'s ``path`` for the run's duration, with the CPU the
    server spent meanwhile."""
    cpu = server.cpu_seconds()
    load = drive(f"{server.url}{path}", body, args.connections, args.duration, workdir)
    load.server_cpu_s = server.cpu_seconds() - cpu
    return load


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
        load = measured(edge, "/api/client/metrics", sdk_body(), args, workdir)
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


def scenario_unleash(args: argparse.Namespace, workdir: Path) -> None:
    """The same body posted to a real Unleash 8.2, whose 202 comes before its counts reach
    its database (it keeps them in memory and writes them every few seconds)."""
    if args.unleash is None:
        print(json.dumps({"scenario": "unleash bulk ingest", "skipped": "no --unleash given"}))
        return
    # Unleash 8.2 answers 429 past 6,000 posts a minute to /api/client/metrics* (bulk
    # included), set by this variable (its name and CLIENT_METRICS_...'s are swapped in
    # its create-config.js): raised, so its speed is measured, not its limit
    limit = {"REGISTER_CLIENT_RATE_LIMIT_PER_MINUTE": "100000000"}
    with real_unleash(Path(args.unleash), workdir, limit) as unleash:
        for i in range(20):  # bulk_body's flags
            call(f"{unleash.url}/api/admin/projects/default/features", "POST", {
                "name": f"new-checkout-{i:02d}"
            })
        report("unleash bulk ingest", drive_bulk(unleash, args, workdir), 100, unleash)


SCENARIOS = {
    "baseline": scenario_baseline,
    "relay": scenario_relay,
    "standalone": scenario_standalone,
    "sdk": scenario_sdk,
    "drain": scenario_drain,
    "unleash": scenario_unleash,
}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("scenarios", nargs="*", choices=[*SCENARIOS, []], default=[])
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument(
        "--workers", default="auto", help="RELAY_WORKERS of the services (default: theirs)"
    )
    parser.add_argument("--unleash", help="node_modules holding unleash-server 8.2.0")
    parser.add_argument("--flush-interval", type=float, default=5.0)
    parser.add_argument("--drain-keys", type=int, default=1_000_000)
    parser.add_argument("--drain-timeout", type=float, default=600.0)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, for CI")
    parser.add_argument("--code", help="run the services from this checkout's code")
    args = parser.parse_args()
    if args.code:
        os.environ["PYTHONPATH"] = str(Path(args.code).resolve())  # the services inherit it
    if args.smoke:
        args.duration, args.connections, args.drain_keys = 1.0, 2, 2000
        args.flush_interval = 0.5
    with tempfile.TemporaryDirectory(prefix="relay-bench-") as tmp:
        for name in args.scenarios or list(SCENARIOS):
            SCENARIOS[name](args, Path(tmp) / name)


if __name__ == "__main__":
    main()
