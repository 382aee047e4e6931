"""What hostile callers cost the service (issue 14): one JSON line per scenario.

    python bench/hostile.py                       # gzip, validate, guess, raw, render
    python bench/hostile.py render --flags 10000  # made-up flag queries, both modes
    python bench/hostile.py raw --rows 1000000    # a larger history
    python bench/hostile.py slow                  # 200 slow bodies; takes about a minute
    python bench/hostile.py scopes evaluate       # frontend keys: big scopes, costly values
    python bench/hostile.py --code /tmp/old       # the same against another checkout's code
    python bench/hostile.py --smoke               # tiny sizes, for CI (no figure asserted)

Scenarios, each on fresh ``relay serve`` processes (``bench/servers.py`` starts them):

- ``gzip``: 100 bodies labelled gzip that are not, to ``/edge/validate`` without a key, at
  log level INFO: the answers' statuses and the bytes they add to the log.
- ``validate``: one ``/edge/validate`` of 100 made-up keys to a relay: the calls it makes to
  its upstream.
- ``guess``: made-up admin keys from 16 connections for 5 s, while one caller with the
  valid key reads a project: statuses, guesses checked per second, the valid caller's
  latency.
- ``raw``: ``--rows`` rows of one feature, then reading them all through
  ``.../raw?hoursBack=744`` (following ``next``) while an SDK posts one small body at a
  time: read time, bytes, the server's peak memory (restarted before the read, so the peak
  is the read's), and the ingest latency during the read against before it.
- ``slow``: 200 connections to a relay's add-environment pass-through with a 100,000-byte
  ``Content-Length`` sent at a byte a second: how many are still open 45 s later.
- ``render``: ``--flags`` flags (10,000: about 8 MB of answer); SDKs polling with their
  ETag, alone and while ``--attackers`` connections ask for made-up ``project``,
  ``namePrefix`` and flag names, at a standalone and at a relay (``bench/stall.py``): the
  polls' latency and the attackers' requests/s, a line each.
- ``counts`` (issue 33, row 1, ``bench/counts_flood.py``): an SDK's ``--sdk-counts`` counts,
  then ``--flood-posts`` frontend-key posts of ``--flood-names`` made-up names into a
  ``--buffer-mib`` buffer flushing nothing: the flood's statuses, and how many of the SDK's
  counts reach the upstream.
- ``scopes`` and ``evaluate`` (issue 33, ``bench/frontend_load.py``): one connection holding
  frontend keys, alternating two scopes of ``--scope-flags`` large flags (about 8.4 MB of
  client features each), or posting a 4,096-character CJK value against five large REGEX
  programs and ``--contains-flags`` 1,000-value STR_CONTAINS flags: its requests/s, the
  compiles, and SDK polls' latency beside their idle figure.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import secrets
import socket
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import counts_flood
import frontend_load
import stall
from servers import ADMIN, CLIENT, Server, scrape, start
from wrk import latency

RAW = "/api/admin/client-metrics/features/hot/raw?hoursBack=744"


def services(workdir: Path, args: argparse.Namespace, log_level: str = "WARNING") -> Server:
    env = {
        "RELAY_INIT_ADMIN_API_TOKENS": ADMIN,
        "RELAY_INIT_CLIENT_API_TOKENS": CLIENT,
        "RELAY_LOG_LEVEL": log_level,
        "RELAY_SQLITE_SYNCHRONOUS": "NORMAL",
    }
    if args.code:
        env["PYTHONPATH"] = args.code
    return start("standalone", workdir / "standalone", env)


def a_relay(workdir: Path, upstream: Server, args: argparse.Namespace) -> Server:
    env = {"RELAY_MODE": "relay", "RELAY_UPSTREAM_URL": upstream.url}
    env |= {"RELAY_UPSTREAM_TOKENS": CLIENT, "RELAY_SQLITE_SYNCHRONOUS": "NORMAL"}
    if args.code:
        env["PYTHONPATH"] = args.code
    return start("relay", workdir / "relay", env)


def made_up(count: int) -> list[str]:
    return [f"default:development.{secrets.token_hex(16)}" for _ in range(count)]


def post(url: str, body: bytes, headers: dict[str, str]) -> int:
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return int(error.code)


def scenario_gzip(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    server = services(workdir, args, log_level="INFO")
    log = workdir / "standalone" / "standalone.log"
    try:
        before = log.stat().st_size
        headers = {"Content-Type": "application/json", "Content-Encoding": "gzip"}
        statuses = Counter(
            post(f"{server.url}/edge/validate", b"not gzip", headers) for _ in range(args.requests)
        )
        time.sleep(0.5)
        grown = log.stat().st_size - before
    finally:
        server.stop()
    return {"statuses": dict(statuses), "log_bytes_per_request": round(grown / args.requests)}


def scenario_validate(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    upstream = services(workdir, args)
    relay = a_relay(workdir, upstream, args)
    try:
        route = "/edge/validate"
        before = scrape(upstream.url, "relay_http_requests_total", route=route)
        body = json.dumps({"tokens": made_up(100)}).encode()
        status = post(f"{relay.url}/edge/validate", body, {"Content-Type": "application/json"})
        calls = scrape(upstream.url, "relay_http_requests_total", route=route) - before
    finally:
        relay.stop()
        upstream.stop()
    return {"keys": 100, "status": status, "upstream_calls": int(calls)}


async def _guess(url: str, seconds: float) -> tuple[Counter[int], list[float]]:
    statuses: Counter[int] = Counter()
    valid: list[float] = []
    deadline = time.monotonic() + seconds

    async def guesser(session: aiohttp.ClientSession) -> None:
        while time.monotonic() < deadline:
            headers = {"Authorization": made_up(1)[0].replace("default:development", "*:*")}
            async with session.get(url, headers=headers) as response:
                statuses[response.status] += 1

    async def caller(session: aiohttp.ClientSession) -> None:
        while time.monotonic() < deadline:
            began = time.perf_counter()
            async with session.get(url, headers={"Authorization": ADMIN}) as response:
                assert response.status == 200, response.status
            valid.append(time.perf_counter() - began)
            await asyncio.sleep(0.01)

    async with aiohttp.ClientSession() as session:
        await asyncio.gather(caller(session), *(guesser(session) for _ in range(16)))
    return statuses, valid


def scenario_guess(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    server = services(workdir, args)
    try:
        statuses, valid = asyncio.run(_guess(f"{server.url}/api/admin/projects/default", 5.0))
    finally:
        server.stop()
    return {
        "statuses": dict(statuses),
        "keys_checked_per_s": round(statuses[401] / 5.0),
        "refused_unchecked_per_s": round(statuses[429] / 5.0),
        "valid_caller": latency(valid),
    }


def _fill(server: Server, rows: int) -> None:
    """``rows`` rows of feature ``hot``: one app each, 5,000 to a request (under 1 MiB)."""
    headers = {"Authorization": CLIENT, "Content-Type": "application/json"}
    now = datetime.now(UTC).isoformat()
    for start_at in range(0, rows, 5_000):
        metrics = [
            {
                "featureName": "hot",
                "appName": f"app-{i:07d}",
                "environment": "development",
                "timestamp": now,
                "yes": 1,
                "no": 0,
            }
            for i in range(start_at, min(rows, start_at + 5_000))
        ]
        body = json.dumps({"applications": [], "metrics": metrics}).encode()
        assert post(f"{server.url}/api/client/metrics/bulk", body, headers) == 202


async def _read_while_ingesting(url: str) -> dict[str, Any]:
    body = json.dumps(
        {
            "applications": [],
            "metrics": [
                {"featureName": "probe", "appName": "a", "environment": "development", "yes": 1}
            ],
        }
    ).encode()
    headers = {"Authorization": CLIENT, "Content-Type": "application/json"}
    reading = asyncio.Event()
    samples: dict[bool, list[float]] = {False: [], True: []}
    stop = asyncio.Event()

    async def probe(session: aiohttp.ClientSession) -> None:
        while not stop.is_set():
            began = time.perf_counter()
            async with session.post(f"{url}/api/client/metrics/bulk", data=body, headers=headers):
                pass
            samples[reading.is_set()].append(time.perf_counter() - began)
            await asyncio.sleep(0.01)

    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=600)) as session:
        probing = asyncio.create_task(probe(session))
        await asyncio.sleep(2)
        reading.set()
        began, size, rows, pages, next_url = time.perf_counter(), 0, 0, 0, RAW
        while next_url:
            async with session.get(url + next_url, headers={"Authorization": ADMIN}) as response:
                raw = await response.read()
            # not parsed: json.loads of a page would hold this loop, and the probe's figures
            size, rows, pages = size + len(raw), rows + raw.count(b'"featureName"'), pages + 1
            tail = raw.rfind(b',"next":')
            next_url = json.loads(raw[tail + 8 : -1]) if tail > 0 else None
        took = time.perf_counter() - began
        reading.clear()
        await asyncio.sleep(1)
        stop.set()
        await probing
    return {
        "read_s": round(took, 2),
        "rows": rows,
        "pages": pages,
        "bytes": size,
        "ingest_before": latency(samples[False]),
        "ingest_during_read": latency(samples[True]),
    }


def scenario_raw(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    server = services(workdir, args)
    try:
        _fill(server, args.rows)
    finally:
        server.stop()
    server = services(workdir, args)  # a fresh process: its peak memory is the read's
    try:
        idle = server.peak_rss_mb()
        figures = asyncio.run(_read_while_ingesting(server.url))
        figures["peak_rss_mb_idle"] = round(idle, 1)
        figures["peak_rss_mb"] = round(server.peak_rss_mb(), 1)
    finally:
        server.stop()
    return figures


def _slow_body(port: int, sockets: list[socket.socket]) -> None:
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(
        b"POST /api/admin/projects/default/environments HTTP/1.1\r\nHost: x\r\n"
        b"Authorization: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{"
    )
    sockets.append(sock)


def _still_open(sock: socket.socket) -> bool:
    sock.setblocking(False)
    try:
        while data := sock.recv(65536):  # an answer, then the server's close
            del data
        return False
    except BlockingIOError:
        return True
    except OSError:
        return False


def scenario_slow(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    upstream = services(workdir, args)
    relay = a_relay(workdir, upstream, args)
    sockets: list[socket.socket] = []
    try:
        for _ in range(args.connections):
            _slow_body(relay.port, sockets)
        deadline = time.monotonic() + args.slow_seconds
        while time.monotonic() < deadline:
            for sock in sockets:
                with contextlib.suppress(OSError):  # closed by the server: as it should be
                    sock.send(b" ")
            time.sleep(1)
        open_after = sum(_still_open(sock) for sock in sockets)
    finally:
        for sock in sockets:
            sock.close()
        relay.stop()
        upstream.stop()
    return {"connections": len(sockets), "seconds": args.slow_seconds, "still_open": open_after}


def scenario_counts(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    upstream = services(workdir, args)
    try:
        return counts_flood.scenario_counts(args, workdir, upstream, args.code)
    finally:
        upstream.stop()


def scenario_render(args: argparse.Namespace, workdir: Path) -> list[dict[str, Any]]:
    return stall.scenario_render(
        args, lambda: services(workdir, args), lambda upstream: a_relay(workdir, upstream, args)
    )


SCENARIOS: dict[str, Callable[[argparse.Namespace, Path], dict[str, Any] | list[dict[str, Any]]]]
SCENARIOS = {
    "gzip": scenario_gzip,
    "validate": scenario_validate,
    "guess": scenario_guess,
    "raw": scenario_raw,
    "slow": scenario_slow,
    "render": scenario_render,
    "counts": scenario_counts,
    "scopes": frontend_load.scenario_scopes,
    "evaluate": frontend_load.scenario_evaluate,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("scenarios", nargs="*", choices=[[], *SCENARIOS], default=[])
    parser.add_argument("--rows", type=int, default=300_000)
    parser.add_argument("--requests", type=int, default=100)
    parser.add_argument("--connections", type=int, default=200)
    parser.add_argument("--slow-seconds", type=float, default=45.0)
    parser.add_argument("--flags", type=int, default=10_000)
    parser.add_argument("--attackers", type=int, default=8)
    parser.add_argument("--render-seconds", type=float, default=10.0)
    parser.add_argument("--scope-flags", type=int, default=100)
    parser.add_argument("--values", type=int, default=1000)
    parser.add_argument("--contains-flags", type=int, default=20)
    parser.add_argument("--load-seconds", type=float, default=6.0)
    parser.add_argument("--buffer-mib", type=int, default=1)
    parser.add_argument("--sdk-counts", type=int, default=2_220)
    parser.add_argument("--flood-posts", type=int, default=40)
    parser.add_argument("--flood-names", type=int, default=2_000)
    parser.add_argument("--code", help="run the services from this checkout's code")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes (CI)")
    args = parser.parse_args()
    chosen = args.scenarios or [
        *("gzip", "validate", "guess", "raw", "render", "counts", "scopes", "evaluate")
    ]
    if args.smoke:
        args.rows, args.requests, args.connections, args.slow_seconds = 2_000, 5, 5, 2.0
        args.flags, args.attackers, args.render_seconds = 30, 2, 1.0
        args.scope_flags, args.values, args.contains_flags, args.load_seconds = 3, 20, 2, 1.0
        args.sdk_counts, args.flood_posts, args.flood_names = 222, 4, 200
    with tempfile.TemporaryDirectory(prefix="relay-hostile-") as tmp:
        for name in chosen:
            figures = SCENARIOS[name](args, Path(tmp) / name)
            for row in figures if isinstance(figures, list) else [figures]:
                print(json.dumps({"scenario": name, **row}), flush=True)


if __name__ == "__main__":
    sys.exit(main())
