"""Central ingest on one PostgreSQL as standalone instances are added (issue 25).

    python bench/pg_scale.py                  # N = 1, 2, 4 instances, 10 s each, 16 connections
    python bench/pg_scale.py --instances 1 2 --duration 30
    python bench/pg_scale.py --smoke          # tiny sizes, for CI (no figure is asserted)
    python bench/pg_scale.py --keys distinct --no-idempotency-keys

For each N: a fresh database on the machine's PostgreSQL 15 cluster (as the tests make them,
``tests/pg.py``), N ``relay serve`` standalone instances on it (``RELAY_WORKERS=1``, each on
its own port, started one after the other so the first migrates), and the reference bulk
body posted to all of them at once, the connections split evenly, so the offered load is the
same for every N. Each request carries an ``Idempotency-Key`` of its own, as relays send
(``--no-idempotency-keys``: none, as the figures before issue 37 were taken). Printed per N:
requests/s and entries/s summed, the median p50 and worst p99 of the instances, the CPU (in
cores) of the instances, of the PostgreSQL backends serving this database and of
PostgreSQL's background processes (WAL writer, checkpointer: shared with whatever else uses
the cluster), how busy the machine's cores were (every process's, the other users' too),
what reached PostgreSQL: commits/s, rows written/s, WAL bytes/s and per entry (WAL is
counted for the whole cluster: what it wrote in ``--idle`` seconds before the load, other
users of the cluster, is subtracted), and what this database's active backends were
waiting on, sampled every 50 ms during the load (``Lock:transactionid``: a row lock held by
another transaction; ``CPU``: none). Everything shares the machine's cores; see
``bench/README.md`` for what that limits.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
from run import BULK, bulk_body
from servers import ADMIN, CLIENT, Server, pg, start
from wrk import Load, drive, run_wrk

ENTRIES = 100  # of the reference bulk body


@dataclass
class PgSample:
    """What PostgreSQL reports at one moment: the counters a run's figures are differences of."""

    at: float
    commits: int
    rows: int  # inserted + updated in this database
    wal_bytes: int  # the cluster's WAL position
    cpu: dict[str, float]  # CPU seconds: "backend" (this database's), "background" (the cluster's)
    machine: tuple[int, int]  # the machine's busy and total clock ticks, every process's


def _machine_ticks() -> tuple[int, int]:
    """Busy and total ticks of all the machine's cores (/proc/stat): whether the machine,
    every process on it included, was the limit."""
    fields = [int(f) for f in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle, iowait
    return sum(fields) - idle, sum(fields)


def _cpu_seconds(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:  # gone meanwhile, or PostgreSQL is on another machine
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def pg_sample(url: str, database: str) -> PgSample:
    conn = await asyncpg.connect(url, timeout=10)
    try:
        stats = await conn.fetchrow(
            "SELECT xact_commit, tup_inserted + tup_updated AS rows FROM pg_stat_database"
            " WHERE datname = $1",
            database,
        )
        wal = await conn.fetchval("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn")
        activity = await conn.fetch(
            "SELECT pid, datname = $1 AND backend_type = 'client backend' AS ours,"
            " backend_type <> 'client backend' AS background FROM pg_stat_activity"
            " WHERE pid <> pg_backend_pid()",
            database,
        )
    finally:
        await conn.close()
    cpu = {"backend": 0.0, "background": 0.0}
    for row in activity:
        kind = "backend" if row["ours"] else "background" if row["background"] else None
        if kind:
            cpu[kind] += _cpu_seconds(row["pid"])
    assert stats is not None
    return PgSample(
        time.monotonic(), stats["xact_commit"], stats["rows"], int(wal), cpu, _machine_ticks()
    )


class WaitSampler:
    """What this database's active client backends wait on, sampled every ``interval``
    seconds on a connection of its own until stopped: one count per backend and sample."""

    def __init__(self, database: str, interval: float = 0.05) -> None:
        self.counts: Counter[str] = Counter()
        self.samples = 0
        self._database = database
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._sample()), daemon=True)

    def __enter__(self) -> WaitSampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(30)

    async def _sample(self) -> None:
        conn = await asyncpg.connect(pg.ADMIN_URL, timeout=10)
        try:
            while not self._stop.is_set():
                rows = await conn.fetch(
                    "SELECT coalesce(wait_event_type || ':' || wait_event, 'CPU') AS waiting"
                    " FROM pg_stat_activity WHERE datname = $1 AND state = 'active'"
                    " AND backend_type = 'client backend' AND pid <> pg_backend_pid()",
                    self._database,
                )
                self.samples += 1
                self.counts.update(row["waiting"] for row in rows)
                await asyncio.sleep(self._interval)
        finally:
            await conn.close()

    def top(self, n: int = 5) -> dict[str, int]:
        return dict(self.counts.most_common(n))


def instances(workdir: Path, url: str, count: int) -> list[Server]:
    """``count`` standalone instances on one database, started one after the other."""
    started: list[Server] = []
    try:
        for i in range(count):
            started.append(
                start(
                    f"standalone-{i}",
                    workdir / f"standalone-{i}",
                    {
                        "RELAY_DATABASE_URL": url,
                        "RELAY_INIT_ADMIN_API_TOKENS": ADMIN,
                        "RELAY_INIT_CLIENT_API_TOKENS": CLIENT,
                        "RELAY_WORKERS": "1",
                    },
                )
            )
    except BaseException:
        for server in started:
            server.stop()
        raise
    return started


def load_all(servers: list[Server], args: argparse.Namespace, workdir: Path) -> list[Load]:
    """The reference bulk body posted to every server at once, the connections split evenly.
    ``--keys distinct``: each server gets its own application names, so no two instances
    upsert the same rows; ``shared``: all post the same ones, as sidecars of one fleet do."""
    bodies = [
        bulk_body(app="web-service" if args.keys == "shared" else f"web-service-{index}")
        for index in range(len(servers))
    ]
    connections = max(1, args.connections // len(servers))

    def one(index: int) -> Load:
        own = workdir / f"load-{index}"
        own.mkdir(parents=True, exist_ok=True)
        url = f"{servers[index].url}{BULK}"
        if args.idempotency_keys:
            return keyed(url, bodies[index], connections, args.duration, own, index)
        return drive(url, bodies[index], connections, args.duration, own)

    with ThreadPoolExecutor(len(servers)) as pool:
        return list(pool.map(one, range(len(servers))))


def keyed(
    url: str, body: bytes, connections: int, seconds: float, workdir: Path, index: int
) -> Load:
    """``body`` posted by wrk with an ``Idempotency-Key`` of its own on every request, as
    relays send them: ``<run>-<load>-<thread>-<n>``, never sent twice."""
    body_file = workdir / "body.json"
    body_file.write_bytes(body)
    run = f"{os.getpid()}-{time.monotonic_ns()}-{index}"
    script = f"""
local threads = 0
function setup(thread) threads = threads + 1; thread:set("id", threads) end
function init(args)
  local f = io.open("{body_file}", "rb")
  wrk.body = f:read("*a")
  f:close()
  wrk.method = "POST"
  wrk.headers["Authorization"] = "{CLIENT}"
  wrk.headers["Content-Type"] = "application/json"
  sent = 0
end
function request()
  sent = sent + 1
  wrk.headers["Idempotency-Key"] = "{run}-" .. id .. "-" .. sent
  return wrk.format()
end
"""
    return run_wrk(url, script, connections, seconds, workdir)


def measure(count: int, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    database = asyncio.run(pg.create_database())
    url = pg.url_of(database)
    try:
        servers = instances(workdir, url, count)
        try:
            # the cluster's WAL without our load (other users of the cluster), to subtract
            idle = asyncio.run(pg_sample(pg.ADMIN_URL, database))
            time.sleep(args.idle)
            cpu0 = [s.cpu_seconds() for s in servers]
            before = asyncio.run(pg_sample(pg.ADMIN_URL, database))
            with WaitSampler(database) as waits:
                loads = load_all(servers, args, workdir)
            after = asyncio.run(pg_sample(pg.ADMIN_URL, database))
            cpu = sum(s.cpu_seconds() - c for s, c in zip(servers, cpu0, strict=True))
        finally:
            for server in servers:
                server.stop()
    finally:
        asyncio.run(pg.drop_database(database))
    idle_wal = (before.wal_bytes - idle.wal_bytes) / (before.at - idle.at)
    return figures(count, args, loads, before, after, cpu, idle_wal, waits)


def figures(
    count: int,
    args: argparse.Namespace,
    loads: list[Load],
    before: PgSample,
    after: PgSample,
    instances_cpu: float,
    idle_wal: float,
    waits: WaitSampler,
) -> dict[str, Any]:
    """``idle_wal``: bytes/s the cluster wrote before the load, subtracted from the WAL figures."""
    elapsed = after.at - before.at
    rps = sum(load.rps for load in loads)
    entries = rps * ENTRIES
    wal = max(0.0, (after.wal_bytes - before.wal_bytes) / elapsed - idle_wal)
    row = {
        "scenario": "standalone instances on one PostgreSQL",
        "instances": count,
        "keys": args.keys,
        "idempotency_keys": args.idempotency_keys,
        "requests_per_s": round(rps),
        "entries_per_s": round(entries),
        "p50_ms": round(statistics.median(load.p50_ms for load in loads), 2),
        "p99_ms": round(max(load.p99_ms for load in loads), 2),
        "non_2xx": sum(load.non_2xx for load in loads),
        "instances_cpu_cores": round(instances_cpu / elapsed, 2),
        "pg_backend_cpu_cores": round(
            (after.cpu["backend"] - before.cpu["backend"]) / elapsed, 2
        ),
        "machine_busy": round(
            (after.machine[0] - before.machine[0]) / max(1, after.machine[1] - before.machine[1]),
            2,
        ),
        "load_average": round(os.getloadavg()[0], 1),
        "pg_background_cpu_cores": round(
            (after.cpu["background"] - before.cpu["background"]) / elapsed, 2
        ),
        "pg_commits_per_s": round((after.commits - before.commits) / elapsed),
        "pg_rows_written_per_s": round((after.rows - before.rows) / elapsed),
        "wal_kb_per_s": round(wal / 1024),
        "wal_kb_per_s_idle": round(idle_wal / 1024),
        "wal_bytes_per_entry": round(wal / entries, 1) if entries else None,
        "pg_rows_per_request": round((after.rows - before.rows) / (rps * elapsed), 1)
        if rps
        else None,
        "pg_backend_us_per_request": round(
            (after.cpu["backend"] - before.cpu["backend"]) / (rps * elapsed) * 1e6, 1
        )
        if rps
        else None,
        "pg_backend_us_per_row": round(
            (after.cpu["backend"] - before.cpu["backend"]) / (after.rows - before.rows) * 1e6, 1
        )
        if after.rows > before.rows
        else None,
        "wait_samples": waits.samples,
        "waits": waits.top(),
        "generator": loads[0].generator,
    }
    print(json.dumps(row), flush=True)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--instances", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument(
        "--keys",
        choices=["shared", "distinct"],
        default="shared",
        help="the instances upsert the same rows, or each its own",
    )
    parser.add_argument("--connections", type=int, default=16, help="in all, split evenly")
    parser.add_argument(
        "--idempotency-keys",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="an Idempotency-Key of its own on every request, as relays send",
    )
    parser.add_argument(
        "--idle", type=float, default=3.0, help="seconds the cluster's WAL is read without load"
    )
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, for CI")
    args = parser.parse_args()
    if args.smoke:
        args.instances, args.duration, args.connections, args.idle = [1, 2], 1.0, 2, 0.2
    problem = pg.ensure_server()
    if problem:
        raise SystemExit(f"no PostgreSQL: {problem}")
    failed = []
    with tempfile.TemporaryDirectory(prefix="relay-bench-pg-") as tmp:
        for count in args.instances:
            row = measure(count, args, Path(tmp) / f"n{count}")
            if row["non_2xx"]:
                failed.append(count)
    if failed:
        # A figure made of error answers measures nothing: fail the run (and the CI smoke).
        raise SystemExit(f"answers not 2xx with {failed} instances")


if __name__ == "__main__":
    main()
