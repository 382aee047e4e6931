"""Impact metrics through a relay to the standalone, as real processes: the real Node SDK,
a relay killed with -9 after 202, two workers, an upstream answering 413."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from typing import Any

import pytest
from fake_upstream import Answer, FakeUpstream
from relaykit import ADMIN, CLIENT, STANDALONE_ENV, call, relay_env
from sdks import node_impact, node_modules
from service import drained, get_json, running, start, wait_until

pytestmark = pytest.mark.process

LABELS = {"appName": "shop", "environment": "development"}


def counters(url: str, name: str = "checkouts", app: str = "shop") -> float:
    found = get_json(f"{url}/api/admin/metrics/impact?appName={app}", ADMIN)["series"]
    return sum(s["value"] for s in found if s["name"] == name)


def post_counter(url: str, value: int, labels: dict[str, str] | None = None) -> None:
    sample = {"labels": labels or LABELS, "value": value}
    metric = {"name": "checkouts", "help": "", "type": "counter", "samples": [sample]}
    body = {"applications": [], "metrics": [], "impactMetrics": [metric]}
    assert call(f"{url}/api/client/metrics/bulk", body)[0] == 202


def settle_counter(central: Any, expected: float, relay: Any) -> None:
    """``expected`` arrived, and once the relay has sent all it held, nothing more."""
    wait_until(lambda: counters(central.url) >= expected, f"checkouts reach {expected}")
    drained(central, ADMIN, relay, CLIENT)
    assert counters(central.url) == expected


def test_the_node_sdk_through_a_relay_to_the_standalone(tmp_path: Path) -> None:
    modules = node_modules()
    if isinstance(modules, str):
        pytest.skip(modules)
    with (
        running(tmp_path / "central", env=STANDALONE_ENV) as central,
        running(tmp_path / "relay", env=relay_env(central.url)) as relay,
    ):
        node_impact(modules, relay.url, CLIENT, rounds=3, app="node-shop")
        wait_until(lambda: counters(central.url, app="node-shop") == 6, "6 checkouts")
        found = {
            s["name"]: s
            for s in get_json(f"{central.url}/api/admin/metrics/impact?appName=node-shop", ADMIN)[
                "series"
            ]
            if s["labels"]
        }
        assert found["cart_size"]["value"] == 3
        assert found["cart_size"]["environment"] == "development"
        latency = found["latency"]
        assert latency["count"] == 3
        assert [(b["le"], b["count"]) for b in latency["buckets"]] == [
            (0.1, 0),
            (0.5, 3),
            (1, 3),
            ("+Inf", 3),
        ]


def test_kill_9_after_202_delivers_impact_once(tmp_path: Path) -> None:
    with running(tmp_path / "central", env=STANDALONE_ENV) as central:
        relay = start(tmp_path / "relay", env=relay_env(central.url, RELAY_FLUSH_INTERVAL="3600"))
        for _ in range(10):
            post_counter(relay.url, 3)
        relay.stop(signal.SIGKILL)
        with running(tmp_path / "relay", env=relay_env(central.url)) as relay:
            settle_counter(central, 30, relay)


def test_two_workers_merge_their_impact(tmp_path: Path) -> None:
    with running(tmp_path / "central", env=STANDALONE_ENV) as central:
        env = relay_env(central.url, RELAY_WORKERS="2")
        with running(tmp_path / "relay", env=env) as relay:
            for _ in range(30):  # a new connection each: both workers take some
                post_counter(relay.url, 1)
            settle_counter(central, 30, relay)


def test_an_upstream_answering_413_gets_every_sample_in_halves(tmp_path: Path) -> None:
    async def scenario() -> list[str]:
        upstream = FakeUpstream({CLIENT: "development"})
        upstream.default = Answer(too_large_over=1500)
        url = await upstream.start()
        try:
            await asyncio.to_thread(send_through_relay, url)
        finally:
            await upstream.close()
        return [
            s["labels"]["n"]
            for r in upstream.accepted_bulks()
            for m in r.json().get("impactMetrics", ())
            for s in m["samples"]
        ]

    def send_through_relay(url: str) -> None:
        relay = start(tmp_path / "relay", env=relay_env(url, RELAY_FLUSH_INTERVAL="3600"))
        for i in range(40):
            post_counter(relay.url, 1, {**LABELS, "n": str(i)})
        assert relay.stop(signal.SIGTERM) == 0  # the final flush sends everything

    assert sorted(asyncio.run(scenario()), key=int) == [str(i) for i in range(40)]
