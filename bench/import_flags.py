"""What an import of flags in Unleash's format costs a standalone (issue 23): one JSON line.

    python bench/import_flags.py                 # 250 flags (the most one import takes)
    python bench/import_flags.py --flags 100
    python bench/import_flags.py --smoke         # tiny, for CI (no figure is asserted)

A standalone (SQLite, one worker) imports ``--flags`` flags, each with a gradual rollout
and a constraint, turned on, into an empty project, then the same file again (every flag
overwritten). Meanwhile an SDK polls its flags and posts metrics as fast as answered: their
slowest answers show what waits for the import's one transaction (flag writes and, on
SQLite, metric writes) and what does not (reads of flags, served from memory).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
from servers import ADMIN, CLIENT, standalone

from relay.wire.transfer import MAX_IMPORT_FLAGS


def file(flags: int) -> dict[str, Any]:
    names = [f"flag-{i}" for i in range(flags)]
    rollout = {"rollout": "50", "stickiness": "default"}
    country = {"contextName": "country", "operator": "IN", "values": ["NO", "SE"]}
    return {
        "features": [{"name": n} for n in names],
        "featureStrategies": [
            {
                "name": "flexibleRollout",
                "featureName": n,
                "parameters": {**rollout, "groupId": n},
                "constraints": [country],
            }
            for n in names
        ],
        "featureEnvironments": [{"name": n, "enabled": True} for n in names],
    }


async def sdk(session: aiohttp.ClientSession, url: str, stop: asyncio.Event) -> dict[str, float]:
    """The slowest poll and metrics post while ``stop`` is not set, in seconds."""
    slowest = {"poll": 0.0, "metrics": 0.0}
    metrics = {
        "appName": "bench",
        "instanceId": "1",
        "bucket": {
            "start": "2026-01-01T00:00:00Z",
            "stop": "2026-01-01T00:00:10Z",
            "toggles": {"flag-0": {"yes": 1, "no": 0}},
        },
    }
    headers = {"Authorization": CLIENT}
    while not stop.is_set():
        for kind, call in (
            ("poll", session.get(f"{url}/api/client/features", headers=headers)),
            ("metrics", session.post(f"{url}/api/client/metrics", json=metrics, headers=headers)),
        ):
            started = time.monotonic()
            async with call as response:
                await response.read()
                assert response.status < 300, (kind, response.status)
            slowest[kind] = max(slowest[kind], time.monotonic() - started)
    return slowest


async def measure(url: str, flags: int) -> dict[str, Any]:
    body = {"project": "default", "environment": "development", "data": file(flags)}
    raw = json.dumps(body).encode()
    figures: dict[str, Any] = {"flags": flags, "body_bytes": len(raw)}
    async with aiohttp.ClientSession() as session:
        for run in ("import_new_s", "import_again_s"):
            stop = asyncio.Event()
            polling = asyncio.create_task(sdk(session, url, stop))
            started = time.monotonic()
            async with session.post(
                f"{url}/api/admin/features-batch/import",
                data=raw,
                headers={"Authorization": ADMIN, "Content-Type": "application/json"},
            ) as response:
                assert response.status == 200, await response.text()
            figures[run] = round(time.monotonic() - started, 2)
            stop.set()
            slowest = await polling
            figures[f"{run[:-2]}_slowest_poll_s"] = round(slowest["poll"], 3)
            figures[f"{run[:-2]}_slowest_metrics_s"] = round(slowest["metrics"], 3)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--flags", type=int, default=MAX_IMPORT_FLAGS)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, for CI")
    args = parser.parse_args()
    if args.smoke:
        args.flags = 10
    with tempfile.TemporaryDirectory() as workdir:
        server = standalone(Path(workdir), workers=1)
        try:
            print(json.dumps(asyncio.run(measure(server.url, args.flags))))
        finally:
            server.stop()


if __name__ == "__main__":
    main()
