"""Benchmark of the Frontend API (``GET /api/frontend``) in both modes, side by side with the
client features path of the same flags and with the ceiling of the stack.

    python bench/frontend.py                 # 3 alternated runs of 5 s per figure, 16 connections
    python bench/frontend.py --rounds 1      # one run of each
    python bench/frontend.py --smoke         # tiny, for CI (no figure is asserted)
    python bench/frontend.py --code /tmp/old # and a standalone of another checkout's code

A standalone gets 100 flags in project ``default`` through its admin API (the flags of
``bench/evaluate.py``: a ``flexibleRollout`` with three constraints, a segment and two
variants with JSON payloads, and a ``userWithId`` list; every tenth off; about 100 kB of
client features) and 5 in project ``small``, a client key and a frontend key for each; a
relay in front of it has the four keys. For each state and mode, in alternated runs (this
VM's speed drifts): ``/api/client/features`` (the client key), ``/api/frontend`` with a new
user on every request (a wrk Lua script counting), with one context repeated (a browser
polling), and with that context plus a property no flag reads that changes on every request
(the same evaluation, but every answer a miss of the answer cache: the cache's worth is the
difference), with that context less its ``sessionId`` (the server adds a random one; an
answer that did not read it is kept), and a bare aiohttp handler answering the repeated
context's bytes (the ceiling).
Each row prints the median run's requests/s, p50/p99, every run's requests/s, the server's
CPU per request and requests per CPU-second (what Edge's per-CPU figures compare with), peak
RSS, and the share of the bare handler's requests/s.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path
from typing import Any
from urllib.parse import quote

from evaluate import REGIONS, flag, typical
from features import call, cpu_seconds, fetch, median
from servers import ADMIN, CLIENT, Server, real_unleash, start, wait_until
from wrk import run_wrk

EDGE_PER_CPU = {100: 6_900, 5: 39_000}
"""Unleash Edge's published requests/s per CPU on ~100 kB (350 flags) and on 5 flags."""


def populate(url: str, project: str, flags: int) -> None:
    """``flags`` flags of ``bench/evaluate.py`` in ``project``'s development, on or off as
    there (its dependencies left out: the admin API makes none; see ``portable``)."""
    if project != "default":
        call(f"{url}/api/admin/projects", "POST", {"id": project, "name": project})
        body = {"environment": "development"}
        call(f"{url}/api/admin/projects/{project}/environments", "POST", body)
    segments = segment_ids(url)
    base = f"{url}/api/admin/projects/{project}/features"
    for i in range(flags):
        feature = flag(i)
        name = f"{project}-{feature['name']}"
        body = {"name": name, "description": feature["description"]}
        call(base, "POST", body | {"impressionData": feature["impressionData"]})
        for strategy in map(portable, feature["strategies"]):
            given = [segments[n] for n in strategy.get("segments", [])]
            strategy = {**strategy, "segments": given} if given else strategy
            call(f"{base}/{name}/environments/development/strategies", "POST", strategy)
        if feature["enabled"]:
            call(f"{base}/{name}/environments/development/on", "POST")


def portable(strategy: dict[str, Any]) -> dict[str, Any]:
    """A ``userWithId`` list as a ``default`` strategy with a ``userId IN`` constraint (the
    same answers): Unleash 8 makes no ``userWithId`` strategy any more."""
    if strategy["name"] != "userWithId":
        return strategy
    users = strategy["parameters"]["userIds"].split(",")
    constraint = {"contextName": "userId", "operator": "IN", "values": users}
    return {"name": "default", "parameters": {}, "constraints": [constraint]}


def segment_ids(url: str) -> dict[int, int]:
    """The segments ``bench/evaluate.py``'s flags name (1 to 3), made once."""
    found = call(f"{url}/api/admin/segments", "GET")["segments"]
    if not found:
        plan = {"contextName": "plan", "operator": "IN", "values": ["pro"]}
        for n in (1, 2, 3):
            body = {"name": f"pro-{n}", "constraints": [plan]}
            found.append(call(f"{url}/api/admin/segments", "POST", body))
    return {n: segment["id"] for n, segment in zip((1, 2, 3), found, strict=True)}


def keys(url: str, project: str) -> tuple[str, str]:
    """A client key and a frontend key for ``project``'s development."""
    made = []
    for kind in ("client", "frontend"):
        body = {
            "type": kind,
            "tokenName": f"bench-{kind}",
            "environment": "development",
            "projects": [project],
        }
        made.append(call(f"{url}/api/admin/api-tokens", "POST", body)["secret"])
    return made[0], made[1]


QUERY_LUA = """
local n, tid = 0, 0
function setup(thread) thread:set("tid", tid); tid = tid + 1 end
local regions = {%s}
function request()
  n = n + 1
  local user = tid * 1000000000 + n
  local query = %s
  return wrk.format(nil, "/api/frontend?" .. query)
end
"""


def query(n: int) -> str:
    """A browser SDK's context for user ``n``, as ``bench/evaluate.py``'s ``context``."""
    return (
        f"appName=web&environment=production&userId=user-{n}&sessionId=session-{n % 1000}"
        f"&properties[region]={REGIONS[n % 5]}&properties[appVersion]=2.{n % 4}.0"
        f"&properties[email]={quote(f'someone{n}@Example.com')}"
        f"&properties[plan]={'pro' if n % 2 else 'free'}"
    )


def lua_query(varying: str, repeated: str) -> str:
    """A Lua expression of ``query``: a new user per request, or (``varying = "nonce"``) the
    ``repeated`` context with a property no flag reads."""
    if varying == "nonce":
        return f'"{repeated}&nonce=" .. user'
    return (
        '"appName=web&environment=production&userId=user-" .. user .. "&sessionId=session-"'
        ' .. (user % 1000) .. "&properties[region]=" .. regions[user % 5 + 1]'
        ' .. "&properties[appVersion]=2." .. (user % 4) .. ".0"'
        ' .. "&properties[email]=someone" .. user .. "%40Example.com"'
        ' .. "&properties[plan]=" .. (user % 2 == 1 and "pro" or "free")'
    )


def load(url: str, key: str, varying: str | None, args: argparse.Namespace, workdir: Path) -> Any:
    """One wrk run: ``url`` as it is, or a context made per request (``varying``)."""
    script = f'wrk.headers["Authorization"] = "{key}"\n'
    script += 'wrk.headers["Unleash-Client-Spec"] = "5.2.0"\n'
    if varying is not None:
        regions = ", ".join(f'"{r}"' for r in REGIONS)
        script += QUERY_LUA % (regions, lua_query(varying, url.split("?", 1)[1]))
    return run_wrk(url, script, args.connections, args.duration, workdir)


def measure(
    server: Server, url: str, key: str, varying: str | None, args: argparse.Namespace, workdir: Path
) -> dict[str, Any]:
    before = cpu_seconds(server)
    done = load(url, key, varying, args, workdir)
    used = cpu_seconds(server) - before
    return {
        "requests_per_s": round(done.rps),
        "p50_ms": round(done.p50_ms, 2),
        "p99_ms": round(done.p99_ms, 2),
        "errors": done.non_2xx,
        "cpu_us_per_request": round(1e6 * used / max(1, done.requests), 1),
    }


def toggles(answer: bytes) -> list[tuple[str, str]]:
    """An answer's toggles by name and variant: what Unleash's and ours must agree on."""
    return sorted((t["name"], t["variant"]["name"]) for t in json.loads(answer)["toggles"])


Served = dict[str, tuple[Server, str, str]]
"""Each mode's server, with its client key and frontend key of the state."""


def run_state(
    label: str, flags: int, served: Served, args: argparse.Namespace, workdir: Path
) -> None:
    """The rows of one state: bare, and per mode client features and three frontend loads."""
    central, client, front = served["standalone"]
    document, _ = fetch(f"{central.url}/api/client/features", client)
    repeated = query(typical(json.loads(document)))
    path = f"/api/frontend?{repeated}"
    bare = "/api/frontend?" + "&".join(
        part for part in repeated.split("&") if not part.startswith("sessionId=")
    )  # the server adds a random session, as Unleash does
    answer, etag = fetch(f"{central.url}{path}", front)
    for mode, (server, _, key) in served.items():  # the same answers in both modes
        url = f"{server.url}{path}"
        if mode in ("unleash", "before"):  # the same toggles (once Unleash has the flags)
            wait_until(lambda u=url, k=key: toggles(fetch(u, k)[0]) == toggles(answer))
        else:
            assert fetch(url, key) == (answer, etag)
    body_file = workdir / f"frontend-{len(answer)}.json"
    body_file.write_bytes(answer)
    program = [sys.executable, str(Path(__file__).parent / "features.py"), "--bare"]
    ceiling = start("bare", workdir / "bare", {}, [*program, str(body_file), etag])
    try:
        plan: dict[str, tuple[Server, str, str, str | None]] = {
            "bare GET /api/frontend, fixed bytes": (ceiling, path, front, None),
        }
        for mode, (server, client, front) in served.items():
            plan |= {
                f"{mode} GET /api/client/features": (server, "/api/client/features", client, None),
                f"{mode} GET /api/frontend, new context": (server, path, front, "user"),
                f"{mode} GET /api/frontend, repeated context": (server, path, front, None),
                f"{mode} GET /api/frontend, repeated, cache missed": (server, path, front, "nonce"),
                f"{mode} GET /api/frontend, repeated, no sessionId": (server, bare, front, None),
            }
        runs: dict[str, list[dict[str, Any]]] = {name: [] for name in plan}
        for _ in range(args.rounds):  # alternated: this machine's speed drifts
            for name, (server, target, key, varying) in plan.items():
                runs[name].append(measure(server, server.url + target, key, varying, args, workdir))
        rows = {name: median(found) for name, found in runs.items()}
        for name, row in rows.items():
            server = plan[name][0]
            share = row["requests_per_s"] / max(1, rows[next(iter(rows))]["requests_per_s"])
            line = {
                "scenario": f"{name}, {label} ({len(document)} B of client features)",
                **row,
                "requests_per_cpu_s": round(1e6 / max(1.0, row["cpu_us_per_request"])),
                "edge_per_cpu": EDGE_PER_CPU.get(flags),
                "peak_rss_mb": round(server.peak_rss_mb(), 1),
                "share_of_bare": round(share, 2),
            }
            print(json.dumps(line), flush=True)
            if row["errors"]:
                raise SystemExit(f"{name}: {row['errors']} answers were errors")
    finally:
        ceiling.stop()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--duration", type=float, default=5.0, help="seconds per run")
    parser.add_argument("--rounds", type=int, default=3, help="runs of each, alternated")
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, for CI")
    parser.add_argument(
        "--unleash",
        type=Path,
        metavar="NODE_MODULES",
        help="also a real Unleash (npm unleash-server installed there; the local PostgreSQL)",
    )
    parser.add_argument(
        "--code", type=Path, help="also a standalone of this checkout's code (``before``)"
    )
    args = parser.parse_args()
    if not shutil.which("wrk"):
        raise SystemExit("this benchmark needs wrk (apt-get install wrk)")
    sizes = (12, 2) if args.smoke else (100, 5)
    if args.smoke:
        args.duration, args.connections, args.rounds = 1.0, 2, 1
    with (
        tempfile.TemporaryDirectory(prefix="relay-bench-frontend-") as tmp,
        ExitStack() as stack,
    ):
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
            before = None
            if args.code is not None:  # another checkout's code, populated the same
                old = {**env, "PYTHONPATH": str(args.code)}
                before = start("before", workdir / "before", old)
                servers.append(before)
                populate(before.url, "default", sizes[0])
                populate(before.url, "small", sizes[1])
                olds = {sizes[0]: keys(before.url, "default"), sizes[1]: keys(before.url, "small")}
            unleash = None
            if args.unleash is not None:
                unleash = stack.enter_context(real_unleash(args.unleash, workdir))
                populate(unleash.url, "default", sizes[0])
            for flags, (client, front) in states.items():
                served = {"standalone": (central, client, front), "relay": (edge, client, front)}
                if before is not None:
                    served["before"] = (before, *olds[flags])
                if unleash is not None and flags == sizes[0]:
                    served["unleash"] = (unleash, *keys(unleash.url, "default"))
                run_state(f"{flags} flags", flags, served, args, workdir)
        finally:
            for server in servers:
                server.stop()


if __name__ == "__main__":
    main()
