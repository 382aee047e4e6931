"""Memory of a relay beside a bare aiohttp + pydantic process, measured in one run: idle once
started, and again after a load (bulk posts, then SDK polls of the flags), at the mode's
default number of workers and at 1 and 2. PSS and RSS are summed over a service's processes
(the supervisor's included): PSS counts the pages the workers share once, as the node's
memory accounting does.

    python bench/memory.py                    # a relay at its default, 1 and 2 workers
    python bench/memory.py --code /tmp/old    # the relays from another checkout's code
    python bench/memory.py --smoke            # a short load, for CI (no figure asserted)

The bare process is ``bench/baseline.py`` (aiohttp, the bulk model, one handler) under the
same load. The relay's upstream is a standalone, not measured.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from run import bulk_body
from servers import CLIENT, Server, start
from wrk import drive

ROOT = Path(__file__).resolve().parent.parent
BULK = "/api/client/metrics/bulk"


def figures(server: Server) -> dict[str, float]:
    """PSS (shared pages split between the processes mapping them: lower while other Python
    processes run on the machine), RSS, and USS (pages of the service's own alone)."""
    return {
        "pss_mb": round(server.pss_mb(), 1),
        "rss_mb": round(server.rss_mb(), 1),
        "uss_mb": round(server.uss_mb(), 1),
    }


def polls(url: str, count: int) -> None:
    """``count`` SDK polls of the flags, as an SDK makes them."""
    for _ in range(count):
        request = urllib.request.Request(
            f"{url}/api/client/features", headers={"Authorization": CLIENT}
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            response.read()


def measure(
    name: str, server: Server, args: argparse.Namespace, workdir: Path, poll: bool
) -> dict[str, Any]:
    time.sleep(args.settle)
    idle = figures(server)
    load = drive(f"{server.url}{BULK}", bulk_body(), 16, args.seconds, workdir)
    if poll:
        polls(server.url, args.polls)
    time.sleep(args.settle)
    return {
        "service": name,
        "idle": idle,
        "loaded": figures(server),
        "requests": load.requests,
        "non_2xx": load.non_2xx,
        "processes": server.processes(),
    }


def git_commit(code: Path) -> str:
    try:
        out = subprocess.run(
            ["git", "-C", str(code), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        )
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return out.stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="bulk load per service")
    parser.add_argument("--polls", type=int, default=2_000, help="SDK polls after it")
    parser.add_argument("--settle", type=float, default=3.0, help="seconds before a reading")
    parser.add_argument("--code", help="run the relays from this checkout's code")
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    if args.smoke:
        args.seconds, args.polls, args.settle = 1.0, 20, 0.5
    code = Path(args.code) if args.code else ROOT
    env = {"PYTHONPATH": str(code)} if args.code else {}
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        program = [sys.executable, str(ROOT / "bench" / "baseline.py")]
        bare = start("baseline", workdir / "baseline", {}, program=program)
        try:
            rows.append(measure("bare aiohttp + pydantic", bare, args, workdir, poll=False))
        finally:
            bare.stop()
        upstream = start(
            "standalone",
            workdir / "standalone",
            {"RELAY_INIT_CLIENT_API_TOKENS": CLIENT, "RELAY_WORKERS": "1"},
        )
        try:
            for workers in (None, 1, 2):
                settings = {
                    "RELAY_MODE": "relay",
                    "RELAY_UPSTREAM_URL": upstream.url,
                    "RELAY_UPSTREAM_TOKENS": CLIENT,
                    "RELAY_CLIENT_TOKENS": CLIENT,
                    **env,
                }
                if workers is not None:
                    settings["RELAY_WORKERS"] = str(workers)
                name = f"relay, workers {workers or 'default'}"
                server = start("relay", workdir / f"relay-{workers}", settings, workers=None)
                try:
                    rows.append(measure(name, server, args, workdir, poll=True))
                finally:
                    server.stop()
        finally:
            upstream.stop()
    bare_pss, bare_rss = rows[0]["idle"]["pss_mb"], rows[0]["idle"]["rss_mb"]
    for row in rows:
        row["idle_pss_vs_bare"] = round(row["idle"]["pss_mb"] / bare_pss, 2)
        row["idle_rss_vs_bare"] = round(row["idle"]["rss_mb"] / bare_rss, 2)
        row["commit"] = git_commit(code) if row["service"].startswith("relay") else None
        print(json.dumps(row))


if __name__ == "__main__":
    main()
