"""Real SDKs through a relay serving flags from its cache, as real processes on loopback:
through an outage of the upstream, a restart of the relay during it, and the upstream's
return; with two workers (one fetch per scope per interval, not one per worker); and in a
chain of relays. The flags are those of tests/e2e/test_flags_sdk.py, configured through the
upstream's admin API; expected answers come from that configuration.

The upstream is our standalone, and a real Unleash server (real_unleash.py) when
``TEST_UNLEASH_SERVER=1``.
"""

from __future__ import annotations

import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from conftest import ADMIN_KEY, DEV_KEY
from flagkit import env_path, http
from flagstate import EXPECTED, build_state
from real_unleash import real_unleash
from sdks import Check, node_evaluate, python_evaluate, quiet_sdk_logs
from service import Service, relay_env, running, scrape, start, wait_until
from UnleashClient import UnleashClient
from UnleashClient.cache import FileCache

pytestmark = pytest.mark.process

INTERVAL = 1.0
CENTRAL_ENV = {"RELAY_INIT_ADMIN_API_TOKENS": ADMIN_KEY, "RELAY_INIT_CLIENT_API_TOKENS": DEV_KEY}
CHECKS = [Check(flag, context) for flag, context, _ in EXPECTED]
WANTED = [want for _, _, want in EXPECTED]
FEATURES = "/api/client/features"
DELTA = "/api/client/delta"


def edge_env(upstream: str, **extra: str) -> dict[str, str]:
    """A relay refreshing every ``INTERVAL``; SDK keys are validated by its upstream, the
    frontend key ``FRONT_KEY`` is configured (flags from ``DEV_KEY``'s copy)."""
    extra = {"RELAY_FRONTEND_TOKENS": FRONT_KEY, **extra}
    return relay_env(upstream, DEV_KEY, RELAY_FEATURES_REFRESH_INTERVAL=str(INTERVAL), **extra)


FRONT_KEY = "default:development.relay-front-secret-0123456789abcdef"
# the Frontend API judges dates by the server's clock: its checks leave out currentTime's
FRONT_CHECKS = [
    (c, want) for c, want in zip(CHECKS, WANTED, strict=True) if "currentTime" not in c.context
]


def frontend_answers(url: str) -> list[bool]:
    """What ``/api/frontend/features/{name}`` answers for each of ``FRONT_CHECKS``."""
    answers = []
    for check, _ in FRONT_CHECKS:
        context = {k: v for k, v in check.context.items() if k != "properties"}
        context |= {f"properties[{k}]": v for k, v in check.context.get("properties", {}).items()}
        status, body = http(
            "GET",
            f"{url}/api/frontend/features/{check.toggle}?{urlencode(context)}",
            key=FRONT_KEY,
        )
        assert status in (200, 404), (status, body)
        answers.append(status == 200 and body["enabled"])
    return answers


def served_5xx(service: Service) -> float:
    return sum(
        scrape(service.url, "relay_http_requests_total", route=route, status=str(status))
        for route in (FEATURES, f"{FEATURES}/{{featureName}}")
        for status in (500, 502, 503, 504)
    )


def fetches(upstream: Service) -> float:
    """Flag requests the upstream answered."""
    return sum(
        scrape(upstream.url, "relay_http_requests_total", route=FEATURES, status=status)
        for status in ("200", "304")
    )


@pytest.fixture
def central(tmp_path: Path) -> Iterator[Service]:
    with running(tmp_path / "central", env=CENTRAL_ENV, name="standalone") as service:
        build_state(service.url)
        yield service


@dataclass
class Upstream:
    service: Service
    restart: Callable[[], Service]
    """Starts it again, on its port and its data, after ``service.stop()``."""


@pytest.fixture(params=["standalone", "unleash"])
def upstream_service(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Upstream]:
    """Our standalone, or a real Unleash server (opt-in: ``TEST_UNLEASH_SERVER=1``)."""
    if request.param == "standalone":
        central: Service = request.getfixturevalue("central")
        port, workdir = central.port, tmp_path / "central"
        yield Upstream(
            central, lambda: start(workdir, env=CENTRAL_ENV, name="standalone", port=port)
        )
        return
    with real_unleash(request, tmp_path / "unleash") as run:
        service = run(None)
        try:
            build_state(service.url)
            yield Upstream(service, lambda: run(service.port))
        finally:
            service.close()


def both_sdks(url: str, modules: Path, tmp: Path) -> tuple[list[Any], list[Any]]:
    """What a freshly started Python and a freshly started Node SDK answer."""
    return python_evaluate(url, DEV_KEY, CHECKS, tmp), node_evaluate(modules, url, DEV_KEY, CHECKS)


def test_sdks_keep_their_flags_through_an_outage_and_a_restart_of_the_relay(
    upstream_service: Upstream, tmp_path: Path, node_sdk: Path
) -> None:
    quiet_sdk_logs()
    central = upstream_service.service
    assert both_sdks(central.url, node_sdk, tmp_path) == (WANTED, WANTED)  # at the upstream
    relay = start(tmp_path / "relay", env=edge_env(central.url))
    running_sdk = UnleashClient(
        url=f"{relay.url}/api",
        app_name="long-running",
        instance_id=f"long-{uuid.uuid4()}",
        custom_headers={"Authorization": DEV_KEY},
        refresh_interval=1,
        disable_metrics=True,
        disable_registration=True,
        cache=FileCache("long-running", directory=str(tmp_path / "sdk-cache")),
    )
    try:
        assert both_sdks(relay.url, node_sdk, tmp_path) == (WANTED, WANTED)
        front_wanted = [want for _, want in FRONT_CHECKS]
        assert frontend_answers(relay.url) == front_wanted
        running_sdk.initialize_client()
        assert [running_sdk.is_enabled(c.toggle, c.context) for c in CHECKS] == WANTED

        # the upstream goes away: SDKs old and new evaluate as before, with no 5xx
        central.stop()
        polls = scrape(relay.url, "relay_http_requests_total", route=FEATURES, status="304")
        wait_until(
            lambda: (
                scrape(relay.url, "relay_http_requests_total", route=FEATURES, status="304")
                >= polls + 3
            ),
            "the running SDK polled through the outage",
        )
        assert [running_sdk.is_enabled(c.toggle, c.context) for c in CHECKS] == WANTED
        assert both_sdks(relay.url, node_sdk, tmp_path) == (WANTED, WANTED)
        assert frontend_answers(relay.url) == front_wanted
        assert served_5xx(relay) == 0

        # the relay restarts during the outage: it serves its stored copy at once, to a key it
        # had validated upstream before (the upstream cannot vouch for it now)
        assert relay.stop() == 0
        relay = start(tmp_path / "relay", env=edge_env(central.url), port=relay.port)
        assert frontend_answers(relay.url) == front_wanted  # from the stored copy
        assert both_sdks(relay.url, node_sdk, tmp_path) == (WANTED, WANTED)
        assert served_5xx(relay) == 0

        # the upstream comes back; a change made there reaches the SDKs through the relay
        central = upstream_service.restart()
        assert http("POST", f"{central.url}{env_path('off')}/on")[0] == 200
        changed = time.monotonic()
        wait_until(lambda: running_sdk.is_enabled("off", {"userId": "1"}), "the change arrived")
        print(f"change at the running SDK after {time.monotonic() - changed:.1f} s")
        now_on = [
            True if c.toggle == "off" else want for c, want in zip(CHECKS, WANTED, strict=True)
        ]
        assert both_sdks(relay.url, node_sdk, tmp_path) == (now_on, now_on)
    finally:
        running_sdk.destroy()
        relay.close()
        central.close()


def test_two_workers_fetch_each_scope_once_per_interval(central: Service, tmp_path: Path) -> None:
    env = edge_env(central.url, RELAY_WORKERS="2")
    with running(tmp_path / "relay", env=env) as relay:
        before = fetches(central)
        started = time.monotonic()
        polls = 0
        while time.monotonic() - started < 4 * INTERVAL:
            request = urllib.request.Request(
                f"{relay.url}{FEATURES}", headers={"Authorization": DEV_KEY}
            )
            with urllib.request.urlopen(request, timeout=10) as response:  # a new connection
                assert response.status == 200
            polls += 1
        elapsed = time.monotonic() - started
        fetched = fetches(central) - before
        # the first fetch may happen in each worker that met the key first; after that, one
        # worker revalidates per interval, whichever holds the key
        assert fetched <= 2 + elapsed / INTERVAL + 1, (fetched, polls, elapsed)
        assert polls > 5 * fetched


def test_a_chain_of_relays_serves_from_each_cache(central: Service, tmp_path: Path) -> None:
    quiet_sdk_logs()
    with (
        running(tmp_path / "a", env=edge_env(central.url, RELAY_APP_NAME="relay-a")) as a,
        running(tmp_path / "b", env=edge_env(a.url, RELAY_APP_NAME="relay-b")) as b,
    ):
        assert python_evaluate(b.url, DEV_KEY, CHECKS, tmp_path) == WANTED
        # B filled from A's cache (by A's delta): A answered B's fetches, the standalone A's
        assert scrape(a.url, "relay_http_requests_total", route=DELTA, status="200") >= 1
        central.stop()
        assert python_evaluate(b.url, DEV_KEY, CHECKS, tmp_path) == WANTED
        assert served_5xx(b) == 0 and served_5xx(a) == 0
