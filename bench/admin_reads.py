"""What admin reads cost a standalone holding a large state (issue 20): one JSON line per read.

    python bench/admin_reads.py                          # 400,000 instances, 2,000,000 names
    python bench/admin_reads.py --instances 40000 --names 200000
    python bench/admin_reads.py --code /tmp/old          # the same against another checkout
    python bench/admin_reads.py --smoke                  # tiny sizes, for CI (no figure asserted)

The state is written straight into the SQLite file of a standalone started once (its schema),
so it is built in seconds: ``--instances`` registrations over applications of 1,000
instances each, and ``--names`` feature names with counts in the current hour, plus 150 flags.
Then, for each read, on a fresh process (so its peak memory is the read's): the read's time
and bytes, the server's peak RSS, and the latency of an SDK polling its flags meanwhile
(max and p99), the figure a stalled event loop shows.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import aiohttp
from servers import ADMIN, CLIENT, Server, start

READS = {
    "api_applications": "/api/admin/metrics/applications",
    "page_applications": "/applications",
    "page_relays": "/relays",
    "page_home": "/",
}


def serve(workdir: Path, args: argparse.Namespace) -> Server:
    env = {"RELAY_INIT_ADMIN_API_TOKENS": ADMIN, "RELAY_INIT_CLIENT_API_TOKENS": CLIENT}
    if args.code:
        env["PYTHONPATH"] = args.code
    return start("standalone", workdir, env)


def fill(db: Path, instances: int, names: int) -> None:
    now = time.time()
    hour = int(now) // 3600 * 3600
    via = json.dumps([["edge", "relay-1"]])
    with sqlite3.connect(db) as conn:
        conn.executemany(
            "INSERT INTO registrations (app_name, environment, instance_id, connect_via,"
            ' sdk_version, strategies, "interval", started, first_seen, last_seen)'
            " VALUES (?, 'development', ?, ?, 'unleash-client-node:6.0.0', '[\"default\"]',"
            " 15, NULL, ?, ?)",
            ((f"app-{i // 1000:04d}", f"i-{i:07d}", via, now, now + i) for i in range(instances)),
        )
        conn.executemany(
            "INSERT INTO metrics (feature_name, app_name, environment, hour, yes, no)"
            " VALUES (?, 'app', 'development', ?, 1, 0)",
            ((f"name-{n:08d}", hour) for n in range(names)),
        )


async def _read(url: str, path: str) -> dict[str, Any]:
    samples: list[float] = []
    stop = asyncio.Event()

    async def poll(session: aiohttp.ClientSession) -> None:
        while not stop.is_set():
            began = time.perf_counter()
            async with session.get(f"{url}/api/client/features", headers={"Authorization": CLIENT}):
                pass
            samples.append(time.perf_counter() - began)
            await asyncio.sleep(0.01)

    timeout = aiohttp.ClientTimeout(total=600)
    jar = aiohttp.CookieJar(unsafe=True)  # the session cookie of 127.0.0.1
    async with (
        aiohttp.ClientSession(timeout=timeout, cookie_jar=jar) as admin,
        aiohttp.ClientSession() as sdk,
    ):
        signed = await admin.post(f"{url}/login", data={"key": ADMIN, "next": "/"})
        assert signed.status == 200, signed.status
        polling = asyncio.create_task(poll(sdk))
        await asyncio.sleep(1)
        before = len(samples)
        began = time.perf_counter()
        async with admin.get(url + path, headers={"Authorization": ADMIN}) as response:
            body = await response.read()
            status = response.status
        took = time.perf_counter() - began
        await asyncio.sleep(0.5)
        stop.set()
        await polling
    during = sorted(samples[before:]) or [0.0]
    return {
        "status": status,
        "read_s": round(took, 2),
        "bytes": len(body),
        "poll_p99_ms": round(during[int(0.99 * (len(during) - 1))] * 1000, 1),
        "poll_max_ms": round(during[-1] * 1000, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--instances", type=int, default=400_000)
    parser.add_argument("--names", type=int, default=2_000_000)
    parser.add_argument("--code", help="run the service from this checkout's code")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes (CI)")
    args = parser.parse_args()
    if args.smoke:
        args.instances, args.names = 2_000, 5_000
    with tempfile.TemporaryDirectory(prefix="relay-admin-reads-") as tmp:
        workdir = Path(tmp)
        server = serve(workdir, args)
        try:
            for n in range(150):
                body = json.dumps({"name": f"flag-{n:03d}"}).encode()
                _post(f"{server.url}/api/admin/projects/default/features", body)
        finally:
            server.stop()
        [db] = workdir.rglob("relay.db")
        fill(db, args.instances, args.names)
        for name, path in READS.items():
            server = serve(workdir, args)
            try:
                idle = server.peak_rss_mb()
                figures = asyncio.run(_read(server.url, path))
                figures |= {"peak_rss_mb_idle": round(idle, 1)}
                figures |= {"peak_rss_mb": round(server.peak_rss_mb(), 1)}
            finally:
                server.stop()
            print(json.dumps({"read": name, **figures}), flush=True)


def _post(url: str, body: bytes) -> None:
    headers = {"Authorization": ADMIN, "Content-Type": "application/json"}
    with urllib.request.urlopen(urllib.request.Request(url, body, headers), timeout=30) as r:
        assert r.status == 201, r.status


if __name__ == "__main__":
    sys.exit(main())
