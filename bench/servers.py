"""The services under benchmark, as subprocesses, with their memory figures.

Every benchmark starts its services here (``run.py``, ``hostile.py``, ``features.py``). The
work is done by the tests' helpers (``tests/service.py``: free ports, the real ``relay
serve``, waiting, scraping), which this module puts on the import path and passes on.
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

# the tests' helpers (tests/service.py): free ports, services as subprocesses, waiting; and
# their PostgreSQL (tests/pg.py: a throwaway database on the local cluster), for pg_scale.py
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import pg
from service import RELAY, Service, free_port, scrape, wait_until
from service import start as start_service

__all__ = [
    "ADMIN",
    "CLIENT",
    "Server",
    "pg",
    "real_unleash",
    "relay",
    "scrape",
    "standalone",
    "start",
    "wait_until",
]

ADMIN = "*:*.bench-admin-secret-0123456789abcdef"
CLIENT = "default:development.bench-client-secret-0123456789abcdef"


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

    def uss_mb(self) -> float:
        """Pages of the service's processes alone (private, clean or dirty), summed."""
        return self._memory("smaps_rollup", "Private_Clean") + self._memory(
            "smaps_rollup", "Private_Dirty"
        )

    def processes(self) -> int:
        return len(self._proc("stat"))

    def cpu_seconds(self) -> float:
        """User + system CPU time used so far, summed over the process and its children: the
        machine is shared, so CPU per request is the figure that stays put when req/s drift."""
        total = 0
        for text in self._proc("stat"):
            fields = text.rsplit(")", 1)[1].split()  # after the command name, which may hold spaces
            total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15)
        return total / os.sysconf("SC_CLK_TCK")

    def _memory(self, source: str, field: str) -> float:
        total = 0
        for text in self._proc(source):
            match = re.search(rf"^{field}:\s+(\d+) kB", text, re.M)
            total += int(match.group(1)) if match else 0
        return total / 1024

    def _proc(self, source: str) -> list[str]:
        """``/proc/<pid>/<source>`` of the process and of each of its descendants."""
        texts, pids = [], [self.service.process.pid]
        while pids:
            pid = pids.pop()
            try:
                texts.append(Path(f"/proc/{pid}/{source}").read_text())
                pids += map(int, Path(f"/proc/{pid}/task/{pid}/children").read_text().split())
            except OSError:
                continue
        return texts

    def stop(self) -> None:
        self.service.close(timeout=60)


def start(
    name: str,
    workdir: Path,
    env: dict[str, str],
    program: list[str] | None = None,
    wait_for: str = "/ready",
    workers: int | None = 1,
) -> Server:
    """Start ``relay serve`` (or ``program``, given the port as its argument) and wait until it
    answers ``wait_for``; its output goes to ``workdir/name.log`` and ``name.out``.
    ``workers``: as ``tests/service.py`` (None: the mode's default)."""
    port = free_port()
    command = RELAY if program is None else [*program, str(port)]
    env = {"RELAY_LOG_LEVEL": "WARNING", **env}
    service = start_service(
        workdir, env=env, port=port, name=name, program=command, wait_for=wait_for, workers=workers
    )
    return Server(name, service)


def standalone(workdir: Path, workers: int | str) -> Server:
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


def relay(
    workdir: Path,
    upstream: Server,
    workers: int | str,
    flush_interval: str = "10",
    extra: dict[str, str] | None = None,
) -> Server:
    """``extra``: more settings (``RELAY_...``)."""
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
            **(extra or {}),
        },
    )


@contextmanager
def real_unleash(
    modules: Path, workdir: Path, extra: dict[str, str] | None = None
) -> Iterator[Server]:
    """A real Unleash server (npm ``unleash-server`` in ``modules``, run by
    ``tests/unleash_server.js``) on a throwaway database of the local PostgreSQL, dropped
    after, with the benchmarks' admin and client keys; ``extra``: more of its variables."""
    problem = pg.ensure_server()
    if problem is not None:
        raise SystemExit(f"PostgreSQL unreachable: {problem}")
    database = asyncio.run(pg.create_database())
    env = {
        **pg.unleash_env(database),
        "INIT_ADMIN_API_TOKENS": ADMIN,
        "INIT_CLIENT_API_TOKENS": CLIENT,
        "NODE_PATH": str(modules),
        "NODE_ENV": "production",
        **(extra or {}),
    }
    script = Path(__file__).resolve().parent.parent / "tests" / "unleash_server.js"
    try:
        server = start("unleash", workdir / "unleash", env, ["node", str(script)], "/health")
        try:
            yield server
        finally:
            server.stop()
    finally:
        asyncio.run(pg.drop_database(database))
