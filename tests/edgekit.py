"""The real program as Unleash Edge's users start it (``relay edge``, Edge's variables) in
front of a standalone holding one flag, and the report a relay sends its upstream."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from service import (
    Service,
    free_port,
    get_json,
    running,
    wait_ready,
)

from relay.cli.edge.options import OPTIONS

ADMIN = "*:*.edge-cli-admin-secret-0123456789"
DEV = "default:development.edge-cli-dev-secret-0123456789"
PROD = "default:production.edge-cli-prod-secret-0123456789"
RELAY = (sys.executable, "-m", "relay")


def relay(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The real program, run to its end, with no RELAY_* or Edge variable but ``env``."""
    edge = {o.variable for o in OPTIONS} | {"RELAY_CONFIG"}
    clean = {k: v for k, v in os.environ.items() if not k.startswith("RELAY_") and k not in edge}
    return subprocess.run(
        [*RELAY, *args], env={**clean, **(env or {})}, capture_output=True, text=True, timeout=60
    )


@contextmanager
def standalone(tmp_path: Path) -> Iterator[Service]:
    """A standalone with flag ``edgeflag``, on in development and off in production."""
    keys = {"RELAY_INIT_ADMIN_API_TOKENS": ADMIN, "RELAY_INIT_CLIENT_API_TOKENS": f"{DEV},{PROD}"}
    with running(tmp_path / "central", env=keys) as central:
        data = str(tmp_path / "central" / "data")
        for command in (["create", "edgeflag"], ["on", "edgeflag", "--environment", "development"]):
            done = relay("flags", *command, "--data-dir", data)
            assert done.returncode == 0, done.stderr
        yield central


@contextmanager
def edge(workdir: Path, *args: str, env: dict[str, str] | None = None) -> Iterator[Service]:
    """``relay ARGS`` (Edge's command line) in ``workdir``, until it is ready."""
    port = int((env or {}).get("PORT", 0)) or free_port()
    argv = args if env and "PORT" in env else ("-p", str(port), *args)
    workdir.mkdir(parents=True, exist_ok=True)
    edge_names = {o.variable for o in OPTIONS}
    clean = {
        k: v for k, v in os.environ.items() if not k.startswith("RELAY_") and k not in edge_names
    }
    log_path, out_path = workdir / "relay.log", workdir / "relay.out"
    with out_path.open("a") as out, log_path.open("a") as err:
        process = subprocess.Popen(
            [*RELAY, *argv],
            cwd=workdir,
            env={**clean, "RELAY_SQLITE_SYNCHRONOUS": "NORMAL", "RELAY_WORKERS": "1"} | (env or {}),
            stdout=out,
            stderr=err,
            text=True,
        )
    service = Service(process, port, log_path, out_path)
    try:
        wait_ready(service.url, process, details=service.logs)
        yield service
    finally:
        service.close()


def flag_of(url: str, key: str) -> bool:
    features = get_json(f"{url}/api/client/features", key)["features"]
    return next(f["enabled"] for f in features if f["name"] == "edgeflag")


EDGES_PATH = "/api/admin/metrics/edges"


def report(identifier: str, *below: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {
        "identifier": identifier,
        "appName": f"app-{identifier}",
        "edgeVersion": "19.6.2",
        "started": "2026-01-01T00:00:00Z",
        "processMetrics": {"cpuUsage": 1},  # an Unleash Edge field we ignore
        "connectedEdges": list(below),
        **fields,
    }
