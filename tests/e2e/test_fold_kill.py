"""Issue 37: standalone instances on one PostgreSQL killed -9 while they ingest and while
they fold: every acknowledged count is read back exactly once, from every instance, with
the idempotency keys relays send (a resend to another instance is a replay there)."""

from __future__ import annotations

import asyncio
import json
import signal
import threading
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from conftest import ADMIN_KEY, DEV_KEY, bulk, metric
from foldkit import blocked_fold
from service import Service, eventually, start, wait_until
from service import stored as stored_counts


class FleetLoad:
    """Relays posting to a fleet of instances: each request with an Idempotency-Key of its
    own, sent again with that key to the next instance until one answers 202 (a request
    whose answer a crash lost may have committed: the key makes the resend a replay). Every
    other request is also sent to a second instance once acknowledged: a replay there."""

    def __init__(self, urls: list[str], clients: int = 4) -> None:
        self.urls = urls
        self.accepted = 0
        self.replays = 0
        self._clients = clients
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        for number in range(self._clients):
            thread = threading.Thread(target=self._client, args=(number,), daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(120)
            assert not thread.is_alive(), "a request was never acknowledged"

    def wait_accepted(self, more: int) -> None:
        target = self.accepted + more
        wait_until(lambda: self.accepted >= target, f"{more} more requests acknowledged")

    def _client(self, number: int) -> None:
        sent = 0
        while not self._stop.is_set():
            sent += 1
            key = f"{number}-{sent}-{uuid.uuid4().hex[:8]}"
            body = bulk([metric("fleet", app=f"client-{number}", yes=1)])
            at = self._until_accepted(body, key, sent)
            with self._lock:
                self.accepted += 1
            if sent % 2 == 0:  # the same request to another instance: counted once
                self._until_accepted(body, key, at + 1)
                with self._lock:
                    self.replays += 1

    def _until_accepted(self, body: dict[str, Any], key: str, start: int) -> int:
        """The index of the instance that answered 202."""
        for attempt in range(start, start + 2400):
            url = self.urls[attempt % len(self.urls)]
            try:
                status = call(f"{url}/api/client/metrics/bulk", DEV_KEY, body, key)
            except OSError:  # refused or reset: that instance is down
                status = 0
            if status == 202:
                return attempt
            time.sleep(0.05)
        raise AssertionError("no instance acknowledged a request for two minutes")


def call(url: str, key: str, body: dict[str, Any], idempotency_key: str) -> int:
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={
            "Authorization": key,
            "Content-Type": "application/json",
            "Idempotency-Key": idempotency_key,
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return int(error.code)


@pytest.mark.process
def test_kill_9_of_any_instance_mid_load_and_mid_fold_loses_and_doubles_nothing(
    tmp_path: Path, postgres_url: str
) -> None:
    env = {
        "RELAY_DATABASE_URL": postgres_url,
        "RELAY_INIT_ADMIN_API_TOKENS": ADMIN_KEY,
        "RELAY_INIT_CLIENT_API_TOKENS": DEV_KEY,
    }
    names = ["a", "b", "c"]
    services = {name: start(tmp_path / name, env=env, name=name) for name in names}
    urls = [services[name].url for name in names]  # the load's: a restarted one's new URL
    load = FleetLoad(urls)
    load.start()
    try:
        for victim in ["a", "b", "c", "a"]:  # whatever each was doing: ingesting, folding
            load.wait_accepted(30)
            services[victim].stop(signal.SIGKILL)
            services[victim] = start(tmp_path / victim, env=env, name=victim)
            urls[names.index(victim)] = services[victim].url
        load.wait_accepted(30)
        asyncio.run(_kill_all_mid_fold(services, tmp_path, env, postgres_url))
        urls[:] = [services[name].url for name in names]
        load.wait_accepted(30)
        load.stop()
        for name in names:  # every instance reads every acknowledged count, once
            assert stored_counts(services[name].url, ADMIN_KEY, "fleet") == load.accepted
        assert load.replays > 0
    finally:
        load.stop()
        for service in services.values():
            service.close()


async def _kill_all_mid_fold(
    services: dict[str, Service], tmp_path: Path, env: dict[str, str], url: str
) -> None:
    """Every instance killed while one's fold pass has deleted log rows and waits, before
    its commit, on rows the test holds (the others wait for the fold lock); then started
    again once the test lets go."""
    blocker, watcher = await asyncpg.connect(url), await asyncpg.connect(url)
    try:
        await eventually(
            lambda: watcher.fetchval("SELECT count(*) FROM metrics WHERE feature_name = 'fleet'"),
            "counts folded, so that the test can hold their rows",
        )
        holding = blocker.transaction()
        await holding.start()
        await blocker.execute("SELECT * FROM metrics WHERE feature_name = 'fleet' FOR UPDATE")
        await blocked_fold(watcher)
        for service in services.values():
            service.stop(signal.SIGKILL)
        await holding.rollback()
    finally:
        await blocker.close()
        await watcher.close()
    for name in list(services):
        services[name] = await asyncio.to_thread(start, tmp_path / name, env=env, name=name)
