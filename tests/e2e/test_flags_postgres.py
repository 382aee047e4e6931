"""Flags on PostgreSQL shared by several standalone instances (real processes): a write to
either is served by the other within the poll interval, names are taken once across them,
and an instance that cannot read the database keeps serving the flags it has."""

from __future__ import annotations

import asyncio
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pg
import pytest
from conftest import ADMIN_KEY, DEV_KEY, assert_error, auth, standalone_settings
from flagkit import FEATURES, client_features, create_flag, env_path, http, served, turn
from service import Service, eventually, running

from relay.app import build_app
from relay.central.flags.serving import POLL_INTERVAL

BOUND = 2 * POLL_INTERVAL  # docs/api.md: a write is served everywhere within about this
DEADLINE = 30.0  # what the test waits at most (slow CI machines), reported apart


def enabled(url: str, flag: str) -> bool | None:
    status, body = http("GET", f"{url}/api/client/features", key=DEV_KEY)
    assert status == 200, body
    return {f["name"]: f["enabled"] for f in body["features"]}.get(flag)


def converge(url: str, flag: str, want: bool) -> float:
    """Seconds until ``url`` serves ``flag`` as ``want``."""
    started = time.monotonic()
    while enabled(url, flag) is not want:
        assert time.monotonic() - started < DEADLINE, f"{url} never served {flag}={want}"
        time.sleep(0.02)
    return time.monotonic() - started


def env(url: str) -> dict[str, str]:
    return {
        "RELAY_DATABASE_URL": url,
        "RELAY_INIT_ADMIN_API_TOKENS": ADMIN_KEY,
        "RELAY_INIT_CLIENT_API_TOKENS": DEV_KEY,
    }


def test_two_instances_converge_after_a_write_to_either(tmp_path: Path, postgres_url: str) -> None:
    with (
        running(tmp_path / "a", env=env(postgres_url), name="a") as a,
        running(tmp_path / "b", env=env(postgres_url), name="b") as b,
    ):
        create = f"{a.url}{FEATURES.format(project='default')}"
        assert http("POST", create, {"name": "checkout"})[0] == 201
        assert enabled(b.url, "checkout") is False and enabled(a.url, "checkout") is False
        times = []
        for writer, reader, state in ((a, b, "on"), (b, a, "off"), (a, b, "on")):
            assert http("POST", f"{writer.url}{env_path('checkout')}/{state}")[0] == 200
            times.append(converge(reader.url, "checkout", state == "on"))
        print(f"served by the other instance after {[round(t, 3) for t in times]} s")
        # the bound stated in docs/api.md, met in most of the trials (CI machines stall)
        assert sorted(times)[1] <= BOUND, times


def test_a_name_is_taken_once_across_instances(tmp_path: Path, postgres_url: str) -> None:
    with (
        running(tmp_path / "a", env=env(postgres_url), name="a") as a,
        running(tmp_path / "b", env=env(postgres_url), name="b") as b,
    ):
        names = [f"race-{i}" for i in range(20)]
        path = FEATURES.format(project="default")

        def create(args: tuple[Service, str]) -> int:
            service, name = args
            return http("POST", f"{service.url}{path}", {"name": name})[0]

        with ThreadPoolExecutor(8) as pool:
            statuses = list(pool.map(create, [(s, n) for n in names for s in (a, b)]))
        assert sorted(statuses) == [201] * 20 + [409] * 20
        status, listed = http("GET", f"{b.url}{path}")
        assert status == 200 and sorted(f["name"] for f in listed["features"]) == sorted(names)


async def test_flags_are_served_while_the_database_cannot_be_read(
    aiohttp_client: Any, tmp_path: Path, postgres_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="relay.central.flags.serving")
    client = await aiohttp_client(
        build_app(standalone_settings(tmp_path, database_url=postgres_url, database_timeout=2))
    )
    await create_flag(client, "checkout")
    await turn(client, "checkout")
    status, before, etag = await client_features(client)
    assert status == 200
    name = pg.name_of(postgres_url)
    await pg.admin(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false')
    await pg.admin(
        f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}'"
    )
    try:
        await asyncio.sleep(3 * POLL_INTERVAL)  # polls fail meanwhile: none may stop serving
        for _ in range(5):
            assert (await client_features(client))[1] == before
            assert (await client_features(client, etag=etag))[0] == 304
        response = await client.post(
            FEATURES.format(project="default"), json={"name": "x"}, headers=auth(ADMIN_KEY)
        )
        assert response.status == 503  # writes need the database: SDKs and operators retry
        assert_error(await response.json(), "ServiceUnavailableError")
    finally:
        await pg.admin(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')
    messages = [r.getMessage() for r in caplog.records if r.name == "relay.central.flags.serving"]
    assert messages.count("flags cannot be read: serving the last snapshot") == 1, messages

    def readable() -> bool:
        return "flags readable again" in caplog.text

    await eventually(readable, within=DEADLINE)  # the next poll, with nothing written
    await turn(client, "checkout", on=False)

    async def off() -> bool:
        return (await served(client))["checkout"]["enabled"] is False

    await eventually(off, within=DEADLINE)
