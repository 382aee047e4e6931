"""PostgreSQL only: several instances on one database, and a database that goes away.

The behaviour both backends share is tested by the API tests, which run on each
(``backend`` in conftest.py); here is what only a shared server can show.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pg
import pytest
from conftest import (
    ADMIN_KEY,
    DEV_KEY,
    PROD_KEY,
    assert_error,
    auth,
    bulk,
    metric,
    standalone_settings,
)
from flagkit import http
from service import Service, eventually, free_port, running, start

from relay.app import build_app
from relay.central.usage import UsageReader
from relay.central.usage_records import SqlUsageRecords
from relay.core.ingest_batch import IdempotencyKey, IngestBatch, MetricKey
from relay.store.fold import Folder
from relay.store.metrics import MetricsStore
from relay.store.postgres import PostgresDatabase, numbered
from relay.store.sql import CENTRAL_SCHEMA, migration_scripts

FEATURES = [f"f{i}" for i in range(5)]


def retry_key(key: str) -> IdempotencyKey:
    """The same request sent again with its key: one caller, one fingerprint."""
    return IdempotencyKey("caller", key, "fingerprint")


def call(
    url: str, key: str, body: dict[str, Any] | None = None, headers: dict[str, str] | None = None
) -> tuple[int, Any]:
    return http("POST" if body is not None else "GET", url, body, key, headers)


def service_env(url: str) -> dict[str, str]:
    return {
        "RELAY_DATABASE_URL": url,
        "RELAY_INIT_ADMIN_API_TOKENS": ADMIN_KEY,
        "RELAY_INIT_CLIENT_API_TOKENS": f"{DEV_KEY},{PROD_KEY}",
        "RELAY_COMMIT_MAX_REQUESTS": "16",
    }


def test_numbered_placeholders() -> None:
    assert numbered("SELECT ? WHERE a = ? AND b IN (?, ?)") == (
        "SELECT $1 WHERE a = $2 AND b IN ($3, $4)"
    )


async def test_instances_starting_together_migrate_once(postgres_url: str) -> None:
    databases = [PostgresDatabase(postgres_url, CENTRAL_SCHEMA, 2, 10) for _ in range(4)]
    await asyncio.gather(*(db.open() for db in databases))
    try:
        rows = await databases[0].fetch_all("SELECT version FROM schema_migrations ORDER BY 1")
        expected = sorted(v for v, _ in migration_scripts(CENTRAL_SCHEMA, root="pg"))
        assert [row[0] for row in rows] == expected
    finally:
        for db in databases:
            await db.close()


async def test_replays_are_caught_across_instances_and_counts_add_up(postgres_url: str) -> None:
    """Two stores (as two instances) on one database take the same keys at once."""
    databases = [PostgresDatabase(postgres_url, CENTRAL_SCHEMA, 4, 10) for _ in range(2)]
    for db in databases:
        await db.open()
    stores = [MetricsStore(db, 8, 3600, logged=True) for db in databases]
    reader = UsageReader(SqlUsageRecords(databases[0]), Folder(databases[0], None).caught_up)
    for store in stores:
        store.start()

    def batch(feature: str) -> IngestBatch:
        one = IngestBatch()
        # several keys per batch, in different orders: sorted upserts cannot deadlock
        for name in FEATURES if feature == "up" else list(reversed(FEATURES)):
            one.add_count(MetricKey("app", "development", name, 3600), 1, 0, {"v": 1})
        return one

    try:
        writes = [
            stores[i % 2].write(batch("up" if i % 3 else "down"), retry_key(f"key-{i // 2}"))
            for i in range(200)
        ]
        applied = await asyncio.gather(*writes)
        assert sum(applied) == 100  # each key sent to both instances, applied once
        for feature in FEATURES:
            [row] = await reader.raw_metrics(feature, 0)
            assert (row.yes, row.variants) == (100, {"v": 100})
    finally:
        for store, db in zip(stores, databases, strict=True):
            await store.stop()
            await db.close()


@pytest.mark.process
def test_two_processes_on_one_database(tmp_path: Path, postgres_url: str) -> None:
    with ThreadPoolExecutor(2) as pool:  # started at once: their migrations race
        starting = [
            pool.submit(start, tmp_path / name, env=service_env(postgres_url), name=name)
            for name in ("a", "b")
        ]
        services: list[Service] = [future.result() for future in starting]
    try:
        _concurrent_posts_are_all_counted(services)
        _add_environment_at_once_is_one_200_and_one_409(services)
    finally:
        for service in services:
            service.stop()
    for service in services:
        assert "Traceback" not in service.logs()


def _concurrent_posts_are_all_counted(services: list[Service]) -> None:
    acknowledged: Counter[str] = Counter()
    lock = threading.Lock()

    def sender(worker: int) -> None:
        for i in range(25):
            service = services[(worker + i) % 2]
            counts = {f: (worker + i + n) % 4 + 1 for n, f in enumerate(FEATURES)}
            body = bulk([metric(f, yes=c) for f, c in counts.items()])
            status, _ = call(f"{service.url}/api/client/metrics/bulk", DEV_KEY, body)
            if status == 202:
                with lock:
                    acknowledged.update(counts)

    def replayer(worker: int) -> None:
        """The same Idempotency-Key to both instances: applied once."""
        for i in range(10):
            body = bulk([metric("replayed", yes=1)])
            for service in services:
                headers = {"Idempotency-Key": f"replay-{worker}-{i}"}
                url = f"{service.url}/api/client/metrics/bulk"
                assert call(url, DEV_KEY, body, headers)[0] == 202

    threads = [threading.Thread(target=sender, args=(w,)) for w in range(6)]
    threads += [threading.Thread(target=replayer, args=(w,)) for w in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert sum(acknowledged.values()) > 0
    for feature in [*FEATURES, "replayed"]:
        url = f"{services[1].url}/api/admin/client-metrics/features/{feature}/raw"
        status, body = call(url, ADMIN_KEY)
        assert status == 200
        stored = sum(row["yes"] for row in body["data"])
        assert stored == (acknowledged[feature] if feature != "replayed" else 20), feature


def _add_environment_at_once_is_one_200_and_one_409(services: list[Service]) -> None:
    for n in range(5):
        name = f"staging-{n}"
        status, _ = call(
            f"{services[0].url}/api/admin/environments", ADMIN_KEY, {"name": name, "type": "test"}
        )
        assert status == 201
        barrier = threading.Barrier(2)

        def add(
            service: Service, environment: str = name, barrier: threading.Barrier = barrier
        ) -> int:
            barrier.wait()
            url = f"{service.url}/api/admin/projects/default/environments"
            return call(url, ADMIN_KEY, {"environment": environment})[0]

        with ThreadPoolExecutor(2) as pool:
            statuses = sorted(pool.map(add, services))
        assert statuses == [200, 409], (name, statuses)


async def test_database_going_away_is_503_then_recovers(
    postgres_url: str, aiohttp_client: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    name = pg.name_of(postgres_url)
    settings = standalone_settings(tmp_path, database_url=postgres_url, database_timeout=3)
    client = await aiohttp_client(build_app(settings))
    url = "/api/client/metrics/bulk"
    assert (await client.post(url, json=bulk([metric(yes=1)]), headers=auth(DEV_KEY))).status == 202

    await pg.admin(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false')
    await pg.admin(
        f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}'"
    )
    began = time.monotonic()
    for _ in range(20):  # the broken pooled connection, then refused new ones
        response = await client.post(url, json=bulk([metric(yes=10)]), headers=auth(DEV_KEY))
        assert response.status == 503
        assert_error(await response.json(), "ServiceUnavailableError")
    response = await client.get("/api/admin/projects/default", headers=auth(ADMIN_KEY))
    assert response.status == 503
    logged = [r for r in caplog.records if r.getMessage() == "storage unavailable"]
    # a line a second at most: anyone can make requests fail while storage is down
    assert 1 <= len(logged) <= time.monotonic() - began + 1

    await pg.admin(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')
    response = await client.post(url, json=bulk([metric(yes=100)]), headers=auth(DEV_KEY))
    assert response.status == 202
    response = await client.get(
        "/api/admin/client-metrics/features/f1/raw", headers=auth(ADMIN_KEY)
    )
    assert [row["yes"] for row in (await response.json())["data"]] == [101]


async def test_database_down_at_start_is_503_and_not_ready_until_it_returns(
    postgres_url: str, aiohttp_client: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    name = pg.name_of(postgres_url)
    await pg.admin(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false')
    settings = standalone_settings(tmp_path, database_url=postgres_url, database_timeout=3)
    client = await aiohttp_client(build_app(settings))
    assert (await client.get("/health")).status == 200
    assert (await client.get("/ready")).status == 503
    url = "/api/client/metrics/bulk"
    response = await client.post(url, json=bulk([metric(yes=1)]), headers=auth(DEV_KEY))
    assert response.status == 503
    assert_error(await response.json(), "ServiceUnavailableError")
    assert "database unavailable at start-up" in caplog.text

    await pg.admin(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')

    async def ready() -> bool:
        return bool((await client.get("/ready")).status == 200)

    await eventually(ready)
    response = await client.post(url, json=bulk([metric(yes=7)]), headers=auth(DEV_KEY))
    assert response.status == 202
    response = await client.get(
        "/api/admin/client-metrics/features/f1/raw", headers=auth(ADMIN_KEY)
    )
    assert [row["yes"] for row in (await response.json())["data"]] == [7]


@pytest.mark.process
def test_a_replica_started_without_its_database_stays_up_and_never_prints_the_password(
    tmp_path: Path,
) -> None:
    url = f"postgresql://relay:do-not-print-me@127.0.0.1:{free_port()}/relay"
    env = {"RELAY_DATABASE_URL": url, "RELAY_DATABASE_TIMEOUT": "1", "RELAY_LOG_FORMAT": "text"}
    service = start(tmp_path, env=env, wait_for="/health")  # up, but not ready
    try:
        assert call(f"{service.url}/ready", DEV_KEY)[0] == 503
        status, body = call(f"{service.url}/api/client/metrics/bulk", DEV_KEY, bulk([]))
        assert status == 503 and body["name"] == "ServiceUnavailableError"
    finally:
        assert service.stop() == 0
    logs = service.logs()
    assert "database unavailable at start-up" in logs
    assert "do-not-print-me" not in logs + service.stdout()


@pytest.mark.process
def test_keys_create_uses_the_database(tmp_path: Path, postgres_url: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RELAY_")}
    env["RELAY_DATABASE_URL"] = postgres_url
    command = [sys.executable, "-m", "relay", "keys", "create", "--type", "admin"]
    result = subprocess.run(
        command, env=env, capture_output=True, text=True, timeout=60, cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    secret = result.stdout.strip()
    with running(tmp_path, env={"RELAY_DATABASE_URL": postgres_url}) as service:
        assert call(f"{service.url}/api/admin/projects/default", secret)[0] == 200


async def test_listening_through_an_outage_logs_it_once(caplog: pytest.LogCaptureFixture) -> None:
    """A PostgreSQL that hangs up on every connection: the listener tries again every second
    and says so once, not once a second for as long as the outage lasts."""
    attempts = 0

    async def hang_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal attempts
        attempts += 1
        writer.close()

    server = await asyncio.start_server(hang_up, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    db = PostgresDatabase(f"postgresql://relay@127.0.0.1:{port}/relay", [], timeout=2.0)
    listening = asyncio.create_task(db.listen("flag_changes", lambda _: None))
    try:
        await eventually(lambda: attempts >= 3, "three attempts to listen")
    finally:
        listening.cancel()
        server.close()
    warned = [r for r in caplog.records if r.getMessage() == "cannot listen for changes"]
    assert len(warned) == 1
