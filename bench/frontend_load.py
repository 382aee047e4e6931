"""The ``scopes`` and ``evaluate`` scenarios of ``hostile.py`` (issue 33): what a caller
holding only frontend keys makes the Frontend API spend, and what it costs the SDKs
polling the same standalone, side by side with their idle figure.

- ``scopes``: two projects of ``--scope-flags`` flags (100: each scope's client features
  about 9.3 MB, a constraint of 1,000 values of 90 bytes per flag) and a frontend key for
  each; one connection asks ``/api/frontend`` with the two keys in turn. Before issue 33
  each request recompiled (the budget counted 8 times the bytes): the compiles, the
  frontend answers per second, and the polls' latency.
- ``evaluate``: five ``REGEX`` flags of large programs (``.{1000,}``, ``(?:.?){1000}z``...)
  and 20 flags of 1,000-value case-insensitive ``STR_CONTAINS``; one connection posts a
  context whose property is 4,096 CJK characters. The attacker's requests per second and
  time per request, and the polls' latency.

The victims: ``VICTIMS`` SDKs polling ``/api/client/features`` with their ETag (304s)
every 50 ms, first alone (``idle``), then during the load.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
from servers import ADMIN, CLIENT, Server, scrape, start
from wrk import latency

VICTIMS = 4
PATHOLOGICAL = [".{1000,}", "(?:.?){1000}z", "(?:.{1,3}){300}x", "(?:漢|字){1000}", "(?:.?){900}y"]
CJK = "".join(random.Random(33).choice("漢字한글ひらカタ") for _ in range(4096))


async def _admin(session: aiohttp.ClientSession, url: str, body: Any, ok: int = 200) -> Any:
    async with session.post(url, json=body, headers={"Authorization": ADMIN}) as response:
        assert response.status in (ok, 200, 201), (url, response.status, await response.text())
        return await response.json() if response.content_length != 0 else None


async def _flags(base: str, project: str, strategies: list[dict[str, Any]]) -> str:
    """Flags of ``strategies`` (one each) in ``project`` (made when not ``default``), on in
    development, from 8 connections; a frontend key for the project."""
    async with aiohttp.ClientSession() as session:
        if project != "default":
            await _admin(session, f"{base}/api/admin/projects", {"id": project, "name": project})
            environments = f"{base}/api/admin/projects/{project}/environments"
            await _admin(session, environments, {"environment": "development"})
        features = f"{base}/api/admin/projects/{project}/features"
        queue = list(enumerate(strategies))

        async def worker() -> None:
            while queue:
                i, strategy = queue.pop()
                name = f"{project}-{i:04d}"
                await _admin(session, features, {"name": name})
                flag = f"{features}/{name}/environments/development"
                await _admin(session, f"{flag}/strategies", strategy)
                await _admin(session, f"{flag}/on", None)

        await asyncio.gather(*(worker() for _ in range(8)))
        body = {"type": "frontend", "environment": "development", "projects": [project]}
        made = await _admin(session, f"{base}/api/admin/api-tokens", body)
        return str(made["secret"])


def _constraint(**fields: Any) -> dict[str, Any]:
    return {"name": "default", "parameters": {}, "constraints": [fields]}


async def _victims(url: str, stop: asyncio.Event) -> list[float]:
    """``VICTIMS`` SDKs polling with their ETag every 50 ms until ``stop``: latencies."""
    samples: list[float] = []
    headers = {"Authorization": CLIENT, "Unleash-Client-Spec": "5.2.0"}

    async def sdk(session: aiohttp.ClientSession) -> None:
        etag = ""
        while not stop.is_set():
            began = time.perf_counter()
            async with session.get(
                f"{url}/api/client/features", headers={**headers, "If-None-Match": etag}
            ) as response:
                await response.read()
            if etag:  # not the first, full, fetch (18 MB in ``scopes``): the 304s
                samples.append(time.perf_counter() - began)
            etag = response.headers.get("ETag", etag)
            await asyncio.sleep(0.05)

    async with aiohttp.ClientSession() as session:
        await asyncio.gather(*(sdk(session) for _ in range(VICTIMS)))
    return samples


async def _measure(
    url: str, seconds: float, attack: Callable[[aiohttp.ClientSession], Awaitable[None]] | None
) -> tuple[list[float], int, float]:
    """The victims' latencies over ``seconds``, with ``attack`` run in a loop meanwhile:
    and how many attacks were done, in how long."""
    stop = asyncio.Event()
    done = 0
    watching = asyncio.create_task(_victims(url, stop))
    began = time.monotonic()
    timeout = aiohttp.ClientTimeout(total=120)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        while time.monotonic() - began < seconds:
            if attack is None:
                await asyncio.sleep(0.1)
                continue
            await attack(session)
            done += 1
    took = time.monotonic() - began
    stop.set()
    return await watching, done, took


def _row(label: str, samples: list[float], done: int, took: float, **more: Any) -> dict[str, Any]:
    row: dict[str, Any] = {"load": label, "sdk_polls": latency(samples)}
    if done:
        row |= {
            "attacks_per_s": round(done / took, 1),
            "ms_per_attack": round(1000 * took / done, 1),
        }
    return row | more


def _service(workdir: Path, args: argparse.Namespace) -> Server:
    env = {
        "RELAY_INIT_ADMIN_API_TOKENS": ADMIN,
        "RELAY_INIT_CLIENT_API_TOKENS": CLIENT,
        "RELAY_LOG_LEVEL": "WARNING",
        "RELAY_SQLITE_SYNCHRONOUS": "NORMAL",
    }
    if args.code:
        env["PYTHONPATH"] = args.code
    return start("standalone", workdir / "standalone", env)


def scenario_scopes(args: argparse.Namespace, workdir: Path) -> list[dict[str, Any]]:
    server = _service(workdir, args)
    try:
        keys = []
        for project in ("one", "two"):
            strategies = [
                _constraint(
                    contextName="userId",
                    operator="IN",
                    values=[f"{project}-{i}-{k}-".ljust(90, "x") for k in range(args.values)],
                )
                for i in range(args.scope_flags)
            ]
            keys.append(asyncio.run(_flags(server.url, project, strategies)))
        turn = iter(range(1 << 62))

        async def alternate(session: aiohttp.ClientSession) -> None:
            key = keys[next(turn) % 2]
            url = f"{server.url}/api/frontend?userId=u"
            async with session.get(url, headers={"Authorization": key}) as response:
                assert response.status == 200, response.status
                await response.read()

        rows = [_row("idle", *asyncio.run(_measure(server.url, args.load_seconds, None)))]
        before = scrape(server.url, "relay_frontend_compiles_total")
        measured = asyncio.run(_measure(server.url, args.load_seconds, alternate))
        compiles = scrape(server.url, "relay_frontend_compiles_total") - before
        rows.append(_row("two scopes alternating", *measured, compiles=int(compiles)))
        for row in rows:
            row["scope_bytes"] = args.scope_flags * (args.values * 93 + 200)
        return rows
    finally:
        server.stop()


def scenario_evaluate(args: argparse.Namespace, workdir: Path) -> list[dict[str, Any]]:
    server = _service(workdir, args)
    try:
        r = random.Random(4)
        strategies = [
            _constraint(contextName="v", operator="REGEX", value=pattern)
            for pattern in PATHOLOGICAL
        ]
        strategies += [
            _constraint(
                contextName="v",
                operator="STR_CONTAINS",
                caseInsensitive=True,
                values=["".join(r.choice("漢字한글ab") for _ in range(12)) for _ in range(1000)],
            )
            for _ in range(args.contains_flags)
        ]
        key = asyncio.run(_flags(server.url, "default", strategies))
        body = {"context": {"userId": "u", "properties": {"v": CJK}}}

        async def hostile(session: aiohttp.ClientSession) -> None:
            url = f"{server.url}/api/frontend"
            async with session.post(url, json=body, headers={"Authorization": key}) as response:
                assert response.status == 200, response.status
                await response.read()

        rows = [_row("idle", *asyncio.run(_measure(server.url, args.load_seconds, None)))]
        measured = asyncio.run(_measure(server.url, args.load_seconds, hostile))
        rows.append(_row("4,096 CJK characters, one connection", *measured))
        return rows
    finally:
        server.stop()
