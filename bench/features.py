"""Benchmark of ``GET /api/client/features``: a relay serving from its flag cache, the
standalone behind it answering the same request directly, and the ceiling of the stack.

    python bench/features.py                 # 3 alternated runs of 5 s per figure, 16 connections
    python bench/features.py --workers 2     # relay and standalone with RELAY_WORKERS=2
    python bench/features.py --smoke         # tiny, for CI (no figure is asserted)

A standalone gets 100 flags in project ``default`` through its admin API (about 100 kB in
Unleash's format) and 2 in project ``small`` (about 2 kB), and a client key for each; a
relay in front of it has both keys. Side by side in one run, the same bytes are served by a
bare aiohttp handler (``--bare``, below: it only compares the ETag and answers the bytes),
by the relay and by the standalone, as 200s and as 304s to ``If-None-Match``, in alternated
runs (the machine's speed drifts). Each row prints the median run's requests/s and p50/p99
latency, every run's requests/s, and the share of the bare handler's requests/s.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import urllib.request
from pathlib import Path
from typing import Any

from servers import ADMIN, CLIENT, Server, start
from wrk import run_wrk

FLAGS = 100
SPEC = "5.2.0"


def call(url: str, method: str, body: Any = None, headers: dict[str, str] | None = None) -> Any:
    request = urllib.request.Request(
        url,
        data=None if body is None else json.dumps(body).encode(),
        method=method,
        headers={"Authorization": ADMIN, "Content-Type": "application/json", **(headers or {})},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        raw = response.read()
        return json.loads(raw) if raw else None


def flag_strategies(i: int) -> list[dict[str, Any]]:
    """About 1 kB a flag once served: a rollout with constraints and two variants, and a
    user list."""
    return [
        {
            "name": "flexibleRollout",
            "parameters": {"rollout": str(i % 100), "stickiness": "userId"},
            "constraints": [
                {
                    "contextName": "region",
                    "operator": "IN",
                    "values": ["eu-west", "eu-north", "us-east"],
                },
                {"contextName": "appVersion", "operator": "SEMVER_GTE", "value": f"2.{i % 10}.0"},
            ],
            "variants": [
                {
                    "name": "control",
                    "weight": 500,
                    "weightType": "variable",
                    "stickiness": "userId",
                },
                {
                    "name": "treatment",
                    "weight": 500,
                    "weightType": "variable",
                    "stickiness": "userId",
                    "payload": {
                        "type": "json",
                        "value": json.dumps({"layout": f"grid-{i}", "limit": 25}),
                    },
                },
            ],
        },
        {
            "name": "userWithId",
            "parameters": {"userIds": ",".join(str(1000 + i + k) for k in range(12))},
        },
    ]


def populate(url: str, flags: int) -> None:
    for i in range(flags):
        name = f"bench-{i:03d}"
        call(
            f"{url}/api/admin/projects/default/features",
            "POST",
            {"name": name, "description": f"Benchmark flag {i}"},
        )
        for strategy in flag_strategies(i):
            call(
                f"{url}/api/admin/projects/default/features/{name}/environments/development/strategies",
                "POST",
                strategy,
            )
        call(
            f"{url}/api/admin/projects/default/features/{name}/environments/development/on", "POST"
        )


def populate_small(url: str, flags: int) -> str:
    """Project ``small`` with ``flags`` flags on in development; a client key for it."""
    call(f"{url}/api/admin/projects", "POST", {"id": "small", "name": "Small"})
    call(f"{url}/api/admin/projects/small/environments", "POST", {"environment": "development"})
    for i in range(flags):
        base = f"{url}/api/admin/projects/small/features"
        call(base, "POST", {"name": f"small-{i}", "description": f"Small flag {i}"})
        for strategy in flag_strategies(i):
            call(f"{base}/small-{i}/environments/development/strategies", "POST", strategy)
        call(f"{base}/small-{i}/environments/development/on", "POST")
    body = {"type": "client", "environment": "development", "projects": ["small"]}
    secret: str = call(f"{url}/api/admin/api-tokens", "POST", body)["secret"]
    return secret


def _flags(body: bytes) -> Any:
    answer = json.loads(body)
    return {k: v for k, v in answer.items() if k != "meta"} | {"etag": answer["meta"]["etag"]}


def fetch(url: str, key: str) -> tuple[bytes, str]:
    request = urllib.request.Request(
        url, headers={"Authorization": key, "Unleash-Client-Spec": SPEC}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return response.read(), response.headers["ETag"]


def wrk(
    url: str, key: str, etag: str | None, connections: int, seconds: float, workdir: Path
) -> dict[str, Any]:
    lines = [
        'wrk.method = "GET"',
        f'wrk.headers["Authorization"] = "{key}"',
        f'wrk.headers["Unleash-Client-Spec"] = "{SPEC}"',
    ]
    if etag is not None:
        lines.append(f"wrk.headers[\"If-None-Match\"] = '{etag}'")
    load = run_wrk(url, "\n".join(lines) + "\n", connections, seconds, workdir)
    return {
        "requests_per_s": round(load.rps),
        "p50_ms": round(load.p50_ms, 2),
        "p99_ms": round(load.p99_ms, 2),
        "errors": load.non_2xx,
    }


def cpu_seconds(server: Server) -> float:
    """CPU time (user + system) of the server and its worker processes so far."""
    total, pids = 0.0, [server.service.process.pid]
    while pids:
        pid = pids.pop()
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            pids += map(int, Path(f"/proc/{pid}/task/{pid}/children").read_text().split())
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def measure(
    server: Server, url: str, key: str, etag: str | None, args: argparse.Namespace, workdir: Path
) -> dict[str, Any]:
    """One wrk run, and the server's CPU time per answer: unlike requests/s, that does not
    move when other processes take the machine's cores."""
    before = cpu_seconds(server)
    row = wrk(url, key, etag, args.connections, args.duration, workdir)
    used = cpu_seconds(server) - before
    row["cpu_us_per_request"] = round(1e6 * used / max(1, row["requests_per_s"] * args.duration), 1)
    return row


def median(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run with the median requests/s (its latencies with it), and all runs' rates."""
    ordered = sorted(runs, key=lambda run: run["requests_per_s"])
    middle = dict(ordered[len(ordered) // 2])
    middle["runs"] = [run["requests_per_s"] for run in runs]
    middle["cpu_us_per_request"] = sorted(run["cpu_us_per_request"] for run in runs)[len(runs) // 2]
    middle["errors"] = sum(run["errors"] for run in runs)
    return middle


def bare(body_file: Path, etag: str, port: int) -> None:
    """The ceiling: an aiohttp app whose only work is comparing the ETag and answering the
    same bytes (``--bare``), on the client features path and the Frontend API's."""
    from aiohttp import web

    body = body_file.read_bytes()

    async def features(request: web.Request) -> web.Response:
        if request.headers.get("If-None-Match") == etag:
            return web.Response(status=304, headers={"ETag": etag})
        return web.Response(body=body, content_type="application/json", headers={"ETag": etag})

    async def ready(request: web.Request) -> web.Response:
        return web.Response(text="ok")

    app = web.Application()
    for path in ("/api/client/features", "/api/frontend"):
        app.router.add_get(path, features)
    app.router.add_get("/ready", ready)
    web.run_app(app, host="127.0.0.1", port=port, access_log=None, print=None)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--duration", type=float, default=5.0, help="seconds per run")
    parser.add_argument("--rounds", type=int, default=3, help="runs of each, alternated")
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, for CI")
    parser.add_argument(
        "--bare", nargs=3, metavar=("BODY_FILE", "ETAG", "PORT"), help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    if args.bare:
        bare(Path(args.bare[0]), args.bare[1], int(args.bare[2]))
        return
    if not shutil.which("wrk"):
        raise SystemExit("this benchmark needs wrk (apt-get install wrk)")
    flags = 12 if args.smoke else FLAGS
    if args.smoke:
        args.duration, args.connections, args.rounds = 1.0, 2, 1
    with tempfile.TemporaryDirectory(prefix="relay-bench-features-") as tmp:
        workdir = Path(tmp)
        env = {
            "RELAY_INIT_ADMIN_API_TOKENS": ADMIN,
            "RELAY_INIT_CLIENT_API_TOKENS": CLIENT,
            "RELAY_WORKERS": str(args.workers),
        }
        central = start("standalone", workdir / "standalone", env)
        servers: list[Server] = [central]
        try:
            populate(central.url, flags)
            small = populate_small(central.url, 2)
            edge = start("relay", workdir / "relay", relay_env(central, [CLIENT, small], args))
            servers.append(edge)
            for label, key in ((f"{flags} flags", CLIENT), ("2 flags", small)):
                run_scope(label, key, {"relay": edge, "standalone": central}, args, workdir)
        finally:
            for server in servers:
                server.stop()


def relay_env(central: Server, keys: list[str], args: argparse.Namespace) -> dict[str, str]:
    return {
        "RELAY_MODE": "relay",
        "RELAY_UPSTREAM_URL": central.url,
        "RELAY_UPSTREAM_TOKENS": CLIENT,
        "RELAY_CLIENT_TOKENS": ",".join(keys),
        "RELAY_WORKERS": str(args.workers),
    }


def run_scope(
    label: str, key: str, served: dict[str, Server], args: argparse.Namespace, workdir: Path
) -> None:
    """The rows of one scope's answer: bare, relay and standalone, 200 and 304."""
    path = "/api/client/features"
    body, etag = fetch(f"{served['standalone'].url}{path}", key)
    relayed, relayed_etag = fetch(f"{served['relay'].url}{path}", key)
    # the same answer: the same ETag and flags (meta.revisionId is each server's own: a relay
    # following its upstream's delta has the upstream's last event id, not the scope's)
    assert (relayed_etag, _flags(relayed)) == (etag, _flags(body))
    body_file = workdir / f"body-{len(body)}.json"
    body_file.write_bytes(body)
    program = [sys.executable, str(Path(__file__).resolve()), "--bare", str(body_file), etag]
    ceiling = start("bare", workdir / "bare", {}, program)
    try:
        assert fetch(f"{ceiling.url}{path}", key)[0] == body
        targets = {"bare": ceiling, **served}
        for status, sent in (("200", None), ("304", etag)):
            runs: dict[str, list[dict[str, Any]]] = {name: [] for name in targets}
            for _ in range(args.rounds):  # alternated: this machine's speed drifts
                for name, server in targets.items():
                    row = measure(server, f"{server.url}{path}", key, sent, args, workdir)
                    runs[name].append(row)
            rows = {name: median(found) for name, found in runs.items()}
            for name, row in rows.items():
                share = row["requests_per_s"] / max(1, rows["bare"]["requests_per_s"])
                scenario = f"{name} GET {path}, {label} ({len(body)} B), {status}"
                workers = args.workers if name != "bare" else 1
                line = {"scenario": scenario, **row, "share_of_bare": round(share, 2)}
                print(json.dumps({**line, "workers": workers}))
                if row["errors"]:
                    raise SystemExit(f"{name}: {row['errors']} answers were errors")
    finally:
        ceiling.stop()


if __name__ == "__main__":
    main()
