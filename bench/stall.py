"""The ``render`` scenario of ``hostile.py`` (issue 20): what made-up client feature queries
cost the other SDKs' polls, at a standalone and at a relay in front of it, in one run.

A standalone gets ``--flags`` flags (10,000: about 8 MB of answer) through its admin API,
and a client key for every project. Then, in each mode, ``VICTIMS`` SDKs poll the whole
answer with its ETag (304s, as SDKs do between changes), first alone (the bare line), then
while ``--attackers`` connections, in another process, ask with the every-project key for
answers no SDK asked before: ``project=default&project=<random>`` (every flag), a random
``namePrefix`` (none) and ``/api/client/features/<random>`` (404), in turn. Each line gives
the victims' latency and the attackers' requests/s.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import secrets
import time
from collections.abc import Callable
from typing import Any

import aiohttp
from features import flag_strategies
from servers import ADMIN, CLIENT, Server
from wrk import latency

VICTIMS = 4
SPEC = "5.2.0"
FEATURES = "/api/client/features"


async def _populate(url: str, flags: int) -> str:
    """``flags`` flags in project ``default``, with about 800 bytes of strategies each, from
    16 connections; a client key for every project."""
    headers = {"Authorization": ADMIN}
    base = f"{url}/api/admin/projects/default/features"
    queue = list(range(flags))

    async def worker(session: aiohttp.ClientSession) -> None:
        while queue:
            i = queue.pop()
            name = f"bench-{i:05d}"
            body = {"name": name, "description": f"Benchmark flag {i}"}
            async with session.post(base, json=body, headers=headers) as response:
                assert response.status == 201, await response.text()
            path = f"{base}/{name}/environments/development/strategies"
            async with session.post(path, json=flag_strategies(i)[0], headers=headers) as response:
                assert response.status == 200, await response.text()

    async with aiohttp.ClientSession() as session:
        await asyncio.gather(*(worker(session) for _ in range(16)))
        body = {"type": "client", "environment": "development", "projects": ["*"]}
        async with session.post(f"{url}/api/admin/api-tokens", json=body, headers=headers) as r:
            secret: str = (await r.json())["secret"]
    return secret


def _attack(url: str, key: str, connections: int, seconds: float, done: Any) -> None:
    """In a process of its own, so that reading the attack's answers does not slow the
    victims' client: requests made by ``connections`` attackers in ``seconds``."""

    async def attacker(session: aiohttp.ClientSession, deadline: float) -> int:
        made = 0
        while time.monotonic() < deadline:
            made_up = secrets.token_hex(8)
            path = (
                f"{FEATURES}?project=default&project={made_up}",
                f"{FEATURES}?namePrefix={made_up}",
                f"{FEATURES}/{made_up}",
            )[made % 3]
            headers = {"Authorization": key, "Unleash-Client-Spec": SPEC}
            async with session.get(url + path, headers=headers) as response:
                while await response.content.read(1 << 20):
                    pass
            made += 1
        return made

    async def attack() -> int:
        deadline = time.monotonic() + seconds
        timeout = aiohttp.ClientTimeout(total=None)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            made = await asyncio.gather(*(attacker(session, deadline) for _ in range(connections)))
            return sum(made)

    done.put(asyncio.run(attack()))


async def _victims(url: str, etag: str, seconds: float) -> list[float]:
    """Latencies of ``VICTIMS`` SDKs polling every 50 ms with the ETag they hold."""
    samples: list[float] = []
    deadline = time.monotonic() + seconds
    headers = {"Authorization": CLIENT, "Unleash-Client-Spec": SPEC, "If-None-Match": etag}

    async def victim(session: aiohttp.ClientSession) -> None:
        while time.monotonic() < deadline:
            began = time.perf_counter()
            async with session.get(url + FEATURES, headers=headers) as response:
                assert response.status == 304, response.status
            samples.append(time.perf_counter() - began)
            await asyncio.sleep(0.05)

    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None)) as session:
        await asyncio.gather(*(victim(session) for _ in range(VICTIMS)))
    return samples


async def _answer(url: str, key: str) -> tuple[int, str]:
    headers = {"Authorization": key, "Unleash-Client-Spec": SPEC}
    timeout = aiohttp.ClientTimeout(total=120)
    async with (
        aiohttp.ClientSession(timeout=timeout) as session,
        session.get(url + FEATURES, headers=headers) as response,
    ):
        assert response.status == 200, response.status
        return len(await response.read()), response.headers["ETag"]


def _polls(server: Server, key: str, args: argparse.Namespace, attackers: int) -> dict[str, Any]:
    """The victims' latency with ``attackers`` attacking, and the attackers' requests/s."""
    size, etag = asyncio.run(_answer(server.url, CLIENT))
    asyncio.run(_answer(server.url, key))  # the every-project key's scope, fetched once
    done: Any = multiprocessing.get_context("fork").Queue()
    lead = 1.0  # the attack is under way before the victims measure
    process = None
    if attackers:
        attack = (server.url, key, attackers, args.render_seconds + 2 * lead, done)
        process = multiprocessing.get_context("fork").Process(target=_attack, args=attack)
        process.start()
        time.sleep(lead)
    victims = latency(asyncio.run(_victims(server.url, etag, args.render_seconds)))
    row: dict[str, Any] = {"answer_bytes": size, "attackers": attackers, "victim_304": victims}
    if process is not None:
        made = done.get(timeout=600)
        process.join()
        row["attacker_req_per_s"] = round(made / (args.render_seconds + 2 * lead), 1)
    return row


def scenario_render(
    args: argparse.Namespace,
    standalone_of: Callable[[], Server],
    relay_of: Callable[[Server], Server],
) -> list[dict[str, Any]]:
    """One row per mode and number of attackers; ``standalone_of`` and ``relay_of`` start
    the services (``hostile.py``'s, with its ``--code``)."""
    standalone = standalone_of()
    rows: list[dict[str, Any]] = []
    try:
        began = time.monotonic()
        key = asyncio.run(_populate(standalone.url, args.flags))
        filled = round(time.monotonic() - began, 1)
        relay = relay_of(standalone)
        try:
            for mode, server in (("standalone", standalone), ("relay", relay)):
                for attackers in (0, args.attackers):
                    row = _polls(server, key, args, attackers)
                    rows.append({"mode": mode, "flags": args.flags, **row})
        finally:
            relay.stop()
    finally:
        standalone.stop()
    rows[0]["populate_s"] = filled
    return rows
