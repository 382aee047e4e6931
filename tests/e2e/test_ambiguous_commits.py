"""Issue 13, item 7: commits whose answer is lost.

PostgreSQL connections cut from the server side while requests commit: a request whose
transaction committed but whose answer did not arrive is answered 503. A caller that
retries with its ``Idempotency-Key`` is counted once; so is the relay's own flush, which
resends a batch under the key it was cut with (and never splits it on a 5xx).
"""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pg
from faultkit import ADMIN, CLIENT, check_clean
from load import Load
from service import relay_env as service_relay_env
from service import running, settle, wait_until


def cut_connections(database: str, stop: threading.Event) -> None:
    """Terminate the service's PostgreSQL connections every few milliseconds."""
    sql = (
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
        f" WHERE datname = '{database}' AND pid <> pg_backend_pid()"
    )
    while not stop.is_set():
        asyncio.run(pg.admin(sql))
        time.sleep(0.02)


def test_cut_connections_count_each_request_once_direct_and_through_a_relay(
    tmp_path: Path, postgres_url: str
) -> None:
    central_env = {
        "RELAY_DATABASE_URL": postgres_url,
        "RELAY_DATABASE_TIMEOUT": "5",
        "RELAY_INIT_ADMIN_API_TOKENS": ADMIN,
        "RELAY_INIT_CLIENT_API_TOKENS": CLIENT,
    }
    relay_env = service_relay_env("", CLIENT, RELAY_CLIENT_TOKENS=CLIENT)
    with running(tmp_path / "central", env=central_env) as central:
        relay_env["RELAY_UPSTREAM_URL"] = central.url
        with running(tmp_path / "relay", env=relay_env) as relay:
            direct = Load(f"{central.url}/api/client/metrics/bulk", CLIENT, 3, "direct")
            relayed = Load(f"{relay.url}/api/client/metrics/bulk", CLIENT, 3, "relayed")
            stop = threading.Event()
            cutter = threading.Thread(
                target=cut_connections, args=(pg.name_of(postgres_url), stop), daemon=True
            )
            direct.start()
            relayed.start()
            cutter.start()
            try:
                # until cut connections have failed requests of both kinds and enough got through
                wait_until(
                    lambda: (
                        direct.statuses.get(503, 0) >= 5
                        and min(direct.accepted, relayed.accepted) >= 100
                    ),
                    "load through cut connections",
                )
            finally:
                stop.set()
                cutter.join(30)
                direct.stop()
                relayed.stop()
            check_clean(direct)
            check_clean(relayed)
            assert direct.statuses.get(503, 0) > 0  # connections were really cut mid-request
            settle(central, ADMIN, "direct", direct.accepted)
            settle(central, ADMIN, "relayed", relayed.accepted, (relay, CLIENT))
