"""Relay and standalone as real processes: end to end, chains, crashes, outages, shutdown."""

from __future__ import annotations

import signal
import urllib.error
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from relaykit import ADMIN, CLIENT, STANDALONE_ENV, call, post_metric, relay_env, stored
from service import (
    Service,
    free_port,
    raw_path,
    running,
    scrape,
    settle,
    start,
    wait_until,
)

pytestmark = pytest.mark.process


def test_sdk_formats_through_a_chain_of_two_relays(tmp_path: Path) -> None:
    with (
        running(tmp_path / "central", env=STANDALONE_ENV) as central,
        running(tmp_path / "a", env=relay_env(central.url, RELAY_APP_NAME="relay-a")) as a,
        running(tmp_path / "b", env=relay_env(a.url, RELAY_APP_NAME="relay-b")) as b,
    ):
        registration = {
            "appName": "shop",
            "instanceId": "sdk-1",
            "sdkVersion": "unleash-client-node:6.12.0",
            "strategies": ["default"],
            "interval": 15000,
            "started": "2026-01-01T00:00:00Z",
        }
        assert call(f"{b.url}/api/client/register", registration)[0] == 202
        now = datetime.now(UTC)
        metrics = {
            "appName": "shop",
            "instanceId": "sdk-1",
            "bucket": {
                # an SDK's bucket of the last minute: stored and read back relative to now
                "start": (now - timedelta(minutes=1)).isoformat(),
                "stop": now.isoformat(),
                "toggles": {"checkout": {"yes": 3, "no": 1, "variants": {"blue": 2}}},
            },
        }
        for _ in range(2):
            assert call(f"{b.url}/api/client/metrics", metrics)[0] == 202
        post_metric(a, 5, feature="checkout")
        wait_until(lambda: stored(central, "checkout") == 11)
        _, raw = call(f"{central.url}{raw_path('checkout', hours_back=744)}", key=ADMIN)
        shop = [r for r in raw["data"] if r["appName"] == "shop"]
        assert [(r["yes"], r["no"], r["variants"]) for r in shop] == [(6, 2, {"blue": 4})]
        wait_until(lambda: _instances(central, "shop") != [])
        [instance] = _instances(central, "shop")
        assert [hop["appName"] for hop in instance["connectVia"]] == ["relay-b", "relay-a"]
        assert instance["interval"] == 15000 and instance["sdkVersion"].endswith("6.12.0")


def _instances(central: Service, app: str) -> list[dict[str, Any]]:
    try:
        return list(
            call(f"{central.url}/api/admin/metrics/applications/{app}", key=ADMIN)[1]["instances"]
        )
    except urllib.error.HTTPError:
        return []


def test_kill_9_after_202_loses_nothing_and_sends_once(tmp_path: Path) -> None:
    with running(tmp_path / "central", env=STANDALONE_ENV) as central:
        slow = relay_env(central.url, RELAY_FLUSH_INTERVAL="3600")
        relay = start(tmp_path / "relay", env=slow)
        for _ in range(20):
            post_metric(relay, 1)
        relay.stop(signal.SIGKILL)
        assert stored(central) == 0
        with running(tmp_path / "relay", env=relay_env(central.url)) as relay:
            settle(central, ADMIN, "f1", 20, (relay, CLIENT))  # and nothing is sent twice


def test_upstream_down_then_up(tmp_path: Path) -> None:
    port = free_port()
    upstream = f"http://127.0.0.1:{port}"
    # keys accepted locally: unknown keys would get 503 while the upstream cannot vouch for them;
    # not ready (its key has no flags yet), but it takes counts
    env = relay_env(upstream, RELAY_CLIENT_TOKENS=CLIENT)
    with running(tmp_path / "relay", env=env, wait_for="/health") as relay:
        for _ in range(10):
            post_metric(relay, 2)
        wait_until(
            lambda: scrape(relay.url, "relay_flush_batches_total", outcome="retry") >= 3,
            "a few failed flushes",
        )
        with running(tmp_path / "central", env=STANDALONE_ENV, port=port) as central:
            wait_until(lambda: stored(central) == 20)


def test_sigterm_flushes_before_exit(tmp_path: Path) -> None:
    with running(tmp_path / "central", env=STANDALONE_ENV) as central:
        relay = start(tmp_path / "relay", env=relay_env(central.url, RELAY_FLUSH_INTERVAL="3600"))
        for _ in range(7):
            post_metric(relay, 3)
        assert relay.stop(signal.SIGTERM) == 0
        assert stored(central) == 21
        assert "final flush" in relay.logs()


def test_relay_keeps_its_instance_id_across_restarts(tmp_path: Path) -> None:
    with running(tmp_path / "central", env=STANDALONE_ENV) as central:
        for instance in ("sdk-1", "sdk-2"):
            with running(tmp_path / "relay", env=relay_env(central.url)) as relay:
                body = {"appName": "shop", "instanceId": instance}
                assert call(f"{relay.url}/api/client/register", body)[0] == 202
        wait_until(lambda: len(_instances(central, "shop")) == 2)
        relay_id = (tmp_path / "relay" / "data" / "instance-id").read_text().strip()
        hops = {i["connectVia"][0]["instanceId"] for i in _instances(central, "shop")}
        assert hops == {relay_id}
