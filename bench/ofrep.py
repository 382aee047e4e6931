"""Benchmark of OpenFeature's OFREP (``POST /ofrep/v1/evaluate/flags[/{key}]``) in both modes,
side by side with the Frontend API on the same flags and with the ceiling of the stack.

    python bench/ofrep.py                 # 3 alternated runs of 5 s per figure, 16 connections
    python bench/ofrep.py --rounds 1      # one run of each
    python bench/ofrep.py --smoke         # tiny, for CI (no figure is asserted)

The flags and keys of ``bench/frontend.py`` (100 flags of ``bench/evaluate.py``, about
100 kB of client features, and 5 in a project of their own), in a standalone and a relay
in front of it, on their default worker count. Every request posts a new user's context (a
wrk Lua script counting), as a server-side provider does for each of its users: the
Frontend API's ``POST /api/frontend/all`` (every flag, as OFREP's bulk answer lists them),
OFREP's bulk evaluation, OFREP's one-flag evaluation (the first flag: a rollout with three
constraints and JSON variants), and a repeated context whose ETag the client holds (a web
provider's refetch: 304). The ceiling is a bare aiohttp handler that reads the body and
answers the bulk answer's bytes. OFREP's rows include its counting: every flag answered is
counted and written to the store every second, as an SDK's metrics would be.

Each row prints the median run's requests/s, p50/p99, every run's requests/s, the server's
CPU per request, peak RSS, and the share of the bare handler's requests/s.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import urllib.request
from pathlib import Path
from typing import Any

from evaluate import REGIONS
from features import cpu_seconds, median
from frontend import keys, populate
from servers import ADMIN, CLIENT, Server, start
from wrk import run_wrk

PERSON_LUA = """
local n, tid = 0, 0
function setup(thread) thread:set("tid", tid); tid = tid + 1 end
local regions = {%s}
wrk.method = "POST"
wrk.headers["Authorization"] = "%s"
wrk.headers["Content-Type"] = "application/json"
function request()
  n = n + 1
  local user = tid * 1000000000 + n
  local who = %s
  local properties = '"region":"' .. regions[user %% 5 + 1] .. '","appVersion":"2.' ..
    (user %% 4) .. '.0","email":"someone' .. user .. '@Example.com","plan":"' ..
    (user %% 2 == 1 and "pro" or "free") .. '"'
  local fields = who .. ',"sessionId":"session-' .. (user %% 1000) ..
    '","appName":"web","environment":"production",'
  return wrk.format(nil, "%s", nil, '{"context":{' .. fields .. %s .. '}}')
end
"""
# each kind's person (Lua): who, then the properties at the top (OFREP) or under properties
OFREP_PERSON = ("'\"targetingKey\":\"user-' .. user .. '\"'", "properties")
FRONTEND_PERSON = (
    "'\"userId\":\"user-' .. user .. '\"'",
    "'\"properties\":{' .. properties .. '}'",
)
BULK = "/ofrep/v1/evaluate/flags"


def person(n: int) -> dict[str, Any]:
    """The Lua script's context for user ``n``, as OFREP's body holds it."""
    return {
        "targetingKey": f"user-{n}",
        "sessionId": f"session-{n % 1000}",
        "appName": "web",
        "environment": "production",
        "region": REGIONS[n % 5],
        "appVersion": f"2.{n % 4}.0",
        "email": f"someone{n}@Example.com",
        "plan": "pro" if n % 2 else "free",
    }


def post(url: str, key: str, body: Any) -> tuple[bytes, str]:
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={"Authorization": key, "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return response.read(), response.headers.get("ETag", "")


def load(
    server: Server, path: str, key: str, kind: str, args: argparse.Namespace, workdir: Path
) -> dict[str, Any]:
    """One wrk run: a new user per request (``kind`` ofrep or frontend), or (``kind`` an
    ETag) the first user's context with that ETag held."""
    if kind in ("ofrep", "frontend"):
        who, rest = OFREP_PERSON if kind == "ofrep" else FRONTEND_PERSON
        regions = ", ".join(f'"{r}"' for r in REGIONS)
        script = PERSON_LUA % (regions, key, who, path, rest)
    else:
        body = json.dumps({"context": person(1)}).replace('"', '\\"')
        script = (
            f'wrk.method = "POST"\nwrk.body = "{body}"\n'
            f'wrk.headers["Authorization"] = "{key}"\n'
            'wrk.headers["Content-Type"] = "application/json"\n'
            f"wrk.headers[\"If-None-Match\"] = '{kind}'\n"
        )
    before = cpu_seconds(server)
    done = run_wrk(server.url + path, script, args.connections, args.duration, workdir)
    used = cpu_seconds(server) - before
    return {
        "requests_per_s": round(done.rps),
        "p50_ms": round(done.p50_ms, 2),
        "p99_ms": round(done.p99_ms, 2),
        "errors": done.non_2xx,
        "cpu_us_per_request": round(1e6 * used / max(1, done.requests), 1),
    }


Served = dict[str, tuple[Server, str, str]]


def run_state(label: str, served: Served, args: argparse.Namespace, workdir: Path) -> None:
    central, client, _ = served["standalone"]
    bulk, etag = post(f"{central.url}{BULK}", client, {"context": person(1)})
    first = json.loads(bulk)["flags"][0]["key"]
    for mode, (server, client, _) in served.items():  # the same answer in every mode
        assert post(f"{server.url}{BULK}", client, {"context": person(1)}) == (bulk, etag), mode
    body_file = workdir / f"ofrep-{len(bulk)}.json"
    body_file.write_bytes(bulk)
    program = [sys.executable, __file__, "--bare", str(body_file)]
    ceiling = start("bare", workdir / "bare", {}, program)
    try:
        plan: dict[str, tuple[Server, str, str, str]] = {
            "bare POST, fixed bytes": (ceiling, BULK, client, "ofrep"),
        }
        for mode, (server, client, front) in served.items():
            plan |= {
                f"{mode} POST /api/frontend/all": (server, "/api/frontend/all", front, "frontend"),
                f"{mode} OFREP bulk": (server, BULK, client, "ofrep"),
                f"{mode} OFREP bulk, frontend key": (server, BULK, front, "ofrep"),
                f"{mode} OFREP one flag": (server, f"{BULK}/{first}", client, "ofrep"),
                f"{mode} OFREP bulk, ETag held (304)": (server, BULK, client, etag),
            }
        runs: dict[str, list[dict[str, Any]]] = {name: [] for name in plan}
        for _ in range(args.rounds):  # alternated: this machine's speed drifts
            for name, (server, path, key, kind) in plan.items():
                runs[name].append(load(server, path, key, kind, args, workdir))
        rows = {name: median(found) for name, found in runs.items()}
        ceiling_rps = max(1, rows[next(iter(rows))]["requests_per_s"])
        for name, row in rows.items():
            line = {
                "scenario": f"{name}, {label} ({len(bulk)} B of OFREP bulk answer)",
                **row,
                "peak_rss_mb": round(plan[name][0].peak_rss_mb(), 1),
                "share_of_bare": round(row["requests_per_s"] / ceiling_rps, 2),
            }
            print(json.dumps(line), flush=True)
            if row["errors"]:
                raise SystemExit(f"{name}: {row['errors']} answers were errors")
    finally:
        ceiling.stop()


def bare(body_file: Path, port: int) -> None:
    """The ceiling: an aiohttp app that reads the posted body and answers the same bytes."""
    from aiohttp import web

    body = body_file.read_bytes()

    async def answer(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(body=body, content_type="application/json")

    async def ready(request: web.Request) -> web.Response:
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_post(BULK, answer)
    app.router.add_get("/ready", ready)
    web.run_app(app, host="127.0.0.1", port=port, access_log=None, print=None)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--duration", type=float, default=5.0, help="seconds per run")
    parser.add_argument("--rounds", type=int, default=3, help="runs of each, alternated")
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, for CI")
    parser.add_argument("--bare", nargs=2, metavar=("BODY_FILE", "PORT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.bare:
        bare(Path(args.bare[0]), int(args.bare[1]))
        return
    if not shutil.which("wrk"):
        raise SystemExit("this benchmark needs wrk (apt-get install wrk)")
    sizes = (12, 2) if args.smoke else (100, 5)
    if args.smoke:
        args.duration, args.connections, args.rounds = 1.0, 2, 1
    with tempfile.TemporaryDirectory(prefix="relay-bench-ofrep-") as tmp:
        workdir = Path(tmp)
        env = {"RELAY_INIT_ADMIN_API_TOKENS": ADMIN, "RELAY_INIT_CLIENT_API_TOKENS": CLIENT}
        central = start("standalone", workdir / "standalone", env)
        servers = [central]
        try:
            populate(central.url, "default", sizes[0])
            populate(central.url, "small", sizes[1])
            states = {sizes[0]: keys(central.url, "default"), sizes[1]: keys(central.url, "small")}
            relay_env = {
                "RELAY_MODE": "relay",
                "RELAY_UPSTREAM_URL": central.url,
                "RELAY_UPSTREAM_TOKENS": CLIENT,
                "RELAY_CLIENT_TOKENS": ",".join(client for client, _ in states.values()),
                "RELAY_FRONTEND_TOKENS": ",".join(front for _, front in states.values()),
            }
            edge = start("relay", workdir / "relay", relay_env)
            servers.append(edge)
            for flags, (client, front) in states.items():
                served = {"standalone": (central, client, front), "relay": (edge, client, front)}
                run_state(f"{flags} flags", served, args, workdir)
        finally:
            for server in servers:
                server.stop()


if __name__ == "__main__":
    main()
