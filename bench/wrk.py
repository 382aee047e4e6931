"""Load on one URL for a while, and the JSON line a benchmark prints of it.

``drive`` posts one body from many connections with ``wrk`` (Debian package) when it is
installed, else with a small aiohttp load generator, which prints its own CPU use so you
can tell when it is the bottleneck. ``report`` prints the figures of a run (requests/s,
entries/s, p50/p99 latency, peak memory of the server) and fails on any answer not 2xx.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import shutil
import statistics
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from servers import CLIENT, Server


@dataclass
class Load:
    requests: int
    seconds: float
    p50_ms: float
    p99_ms: float
    non_2xx: int
    generator: str
    server_cpu_s: float | None = None  # the server's CPU time over the run, when measured

    @property
    def rps(self) -> float:
        return self.requests / self.seconds


def latency(samples: list[float]) -> dict[str, float]:
    """Count, p50, p99 and max of latencies in seconds, in milliseconds."""
    ordered = sorted(samples) or [0.0]
    return {
        "n": len(samples),
        "p50_ms": round(statistics.median(ordered) * 1000, 2),
        "p99_ms": round(ordered[max(0, math.ceil(len(ordered) * 0.99) - 1)] * 1000, 2),
        "max_ms": round(ordered[-1] * 1000, 2),
    }


def drive(url: str, body: bytes, connections: int, seconds: float, workdir: Path) -> Load:
    if shutil.which("wrk"):
        return _wrk(url, body, connections, seconds, workdir)
    return asyncio.run(_aiohttp_load(url, body, connections, seconds))


def _wrk(url: str, body: bytes, connections: int, seconds: float, workdir: Path) -> Load:
    body_file = workdir / "body.json"
    body_file.write_bytes(body)
    script = (
        'local f = io.open("' + str(body_file) + '", "rb")\n'
        "wrk.body = f:read('*a')\nf:close()\n"
        'wrk.method = "POST"\n'
        f'wrk.headers["Authorization"] = "{CLIENT}"\n'
        'wrk.headers["Content-Type"] = "application/json"\n'
    )
    return run_wrk(url, script, connections, seconds, workdir)


def run_wrk(url: str, script: str, connections: int, seconds: float, workdir: Path) -> Load:
    """``wrk`` against ``url`` with a Lua ``script`` setting the method, headers and body."""
    script_file = workdir / "load.lua"
    script_file.write_text(script)
    out = subprocess.run(
        [
            "wrk",
            "-t",
            str(min(2, connections)),
            "-c",
            str(connections),
            "-d",
            f"{max(1, round(seconds))}s",
            "--latency",
            "-s",
            str(script_file),
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


def report(name: str, load: Load, entries_per_request: int, server: Server) -> dict[str, Any]:
    row = {
        "scenario": name,
        "requests_per_s": round(load.rps),
        "entries_per_s": round(load.rps * entries_per_request),
        "p50_ms": round(load.p50_ms, 2),
        "p99_ms": round(load.p99_ms, 2),
        "non_2xx": load.non_2xx,
        "cpu_us_per_request": (
            round(load.server_cpu_s / load.requests * 1e6) if load.server_cpu_s else None
        ),
        "peak_rss_mb": round(server.peak_rss_mb(), 1),
        "pss_mb": round(server.pss_mb(), 1),
        "generator": load.generator,
    }
    print(json.dumps(row))
    if load.non_2xx:
        # A figure made of error answers measures nothing: fail the run (and the CI smoke).
        raise SystemExit(f"{name}: {load.non_2xx} answers were not 2xx")
    return row
