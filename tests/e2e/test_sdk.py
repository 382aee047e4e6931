"""The real Python SDK (UnleashClient) against relay -> standalone: real processes, loopback.

The SDK fetches features from the relay (its copy of the standalone's), registers and
sends its metrics bucket to the relay, which validates the SDK's key against the standalone's
``/edge/validate``, buffers the counts and flushes them upstream in bulk.
"""

from __future__ import annotations

import json
import logging
import threading
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest
from service import running, scrape, wait_until
from UnleashClient import UnleashClient
from UnleashClient.cache import FileCache
from UnleashClient.events import BaseEvent, UnleashEventType, UnleashFetchedEvent

pytestmark = pytest.mark.process

ADMIN = "*:*.sdk-e2e-admin-secret-0123456789"
CLIENT = "default:development.sdk-e2e-client-secret-0123456789"
APP = "sdk-e2e"
FLAG = "some-flag"
IS_ENABLED_CALLS = 7
GET_VARIANT_CALLS = 3
UNKNOWN_FLAG_WARNING = f"Attempted to get feature flag/variation {FLAG}, but client wasn't"


# what UnleashClient 6.9.1 sends: the features answer depends on it (segments as ids or inlined)
CLIENT_SPEC = "6.1.0"


def get(url: str, key: str | None = None, etag: str | None = None) -> tuple[int, Any, Any]:
    """(status, parsed JSON body or None, headers) of a GET, with the SDK's
    Unleash-Client-Spec; HTTP errors are returned too."""
    headers = {"Authorization": key, "Unleash-Client-Spec": CLIENT_SPEC} if key else {}
    if etag:
        headers["If-None-Match"] = etag
    request = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            raw = response.read()
            return response.status, json.loads(raw) if raw else None, response.headers
    except urllib.error.HTTPError as exc:
        raw = exc.read()
        return exc.code, json.loads(raw) if raw else None, exc.headers


def sdk_rows(standalone_url: str) -> list[dict[str, Any]]:
    status, body, _ = get(f"{standalone_url}/api/admin/client-metrics/features/{FLAG}/raw", ADMIN)
    assert status == 200, body
    return [row for row in body["data"] if row["appName"] == APP]


def totals(rows: list[dict[str, Any]]) -> tuple[int, int, dict[str, int]]:
    """yes, no and variant counts summed over hour windows (the test may straddle an hour)."""
    yes = sum(row["yes"] for row in rows)
    no = sum(row["no"] for row in rows)
    variants: dict[str, int] = {}
    for row in rows:
        for name, count in row["variants"].items():
            variants[name] = variants.get(name, 0) + count
    return yes, no, variants


def sdk_instances(standalone_url: str, instance_id: str) -> list[dict[str, Any]]:
    status, body, _ = get(f"{standalone_url}/api/admin/metrics/applications/{APP}", ADMIN)
    if status == 404:
        return []
    assert status == 200, body
    assert body["appName"] == APP
    return [i for i in body["instances"] if i["instanceId"] == instance_id]


def requests_counted(service_url: str, method: str, route: str, status: str) -> float:
    """A service's ``relay_http_requests_total`` for ``method route`` answered ``status``."""
    name = "relay_http_requests_total"
    return scrape(service_url, name, method=method, route=route, status=status)


def test_python_sdk_through_relay_to_standalone(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="UnleashClient")
    standalone_env = {
        "RELAY_INIT_ADMIN_API_TOKENS": ADMIN,
        "RELAY_INIT_CLIENT_API_TOKENS": CLIENT,
    }
    with running(tmp_path / "standalone", env=standalone_env, name="standalone") as standalone:
        relay_env = {
            "RELAY_MODE": "relay",
            "RELAY_UPSTREAM_URL": standalone.url,
            "RELAY_UPSTREAM_TOKENS": CLIENT,
            "RELAY_FLUSH_INTERVAL": "0.2",
        }
        relay_dir = tmp_path / "relay"
        with running(relay_dir, env=relay_env) as relay:

            def logs() -> str:
                return (
                    f"--- standalone log\n{standalone.logs()}\n--- relay log\n{relay.logs()}\n"
                    f"--- SDK log\n{caplog.text}"
                )

            status, expected_features, upstream_headers = get(
                f"{standalone.url}/api/client/features", CLIENT
            )
            assert status == 200 and upstream_headers["ETag"]

            events: list[BaseEvent] = []
            events_lock = threading.Lock()

            def on_event(event: BaseEvent) -> None:  # called on the SDK's dispatcher thread
                with events_lock:
                    events.append(event)

            def seen(kind: UnleashEventType) -> list[BaseEvent]:
                with events_lock:
                    return [e for e in events if e.event_type is kind]

            instance_id = f"sdk-e2e-{uuid.uuid4()}"
            cache = FileCache(APP, directory=str(tmp_path / "sdk-cache"))
            client = UnleashClient(
                url=f"{relay.url}/api",
                app_name=APP,
                instance_id=instance_id,
                custom_headers={"Authorization": CLIENT},
                metrics_interval=1,
                refresh_interval=1,
                disable_registration=False,
                cache=cache,
                event_callback=on_event,
            )
            try:
                # registers, fetches features once (synchronously), starts the scheduler
                client.initialize_client()
                assert client.is_initialized

                results = [client.is_enabled(FLAG) for _ in range(IS_ENABLED_CALLS)]
                variants = [client.get_variant(FLAG) for _ in range(GET_VARIANT_CALLS)]
                assert results == [False] * IS_ENABLED_CALLS  # no such flag upstream
                assert [v["name"] for v in variants] == ["disabled"] * GET_VARIANT_CALLS
                evaluations = IS_ENABLED_CALLS + GET_VARIANT_CALLS

                # the features answer reached the SDK through the relay, unchanged
                wait_until(lambda: seen(UnleashEventType.FETCHED), "FETCHED event", details=logs)
                fetched = seen(UnleashEventType.FETCHED)[0]
                assert isinstance(fetched, UnleashFetchedEvent)
                assert json.loads(fetched.raw_features) == expected_features
                assert cache.get("etag") == upstream_headers["ETag"]
                wait_until(lambda: seen(UnleashEventType.READY), "READY event", details=logs)
                # the next polls send If-None-Match and get 304 through the relay
                wait_until(
                    lambda: requests_counted(relay.url, "GET", "/api/client/features", "304") >= 1,
                    "a 304 to the SDK's conditional poll",
                    details=logs,
                )
                # the relay was not given the SDK's key: it asked the standalone
                assert requests_counted(standalone.url, "POST", "/edge/validate", "200") >= 1

                # SDK -> relay (bucket) -> buffer -> bulk flush -> standalone
                def arrived() -> bool:
                    yes, no, _ = totals(sdk_rows(standalone.url))
                    assert yes + no <= evaluations, f"double-counted: {yes}+{no}\n{logs()}"
                    return yes + no == evaluations

                wait_until(arrived, f"{evaluations} evaluations upstream", details=logs)
                wait_until(
                    lambda: sdk_instances(standalone.url, instance_id),
                    "SDK registration upstream",
                    details=logs,
                )
            finally:
                client.destroy()  # the final metrics flush has nothing left to send

            # nothing may be lost or replayed on shutdown: the relay's final flush drains all
            assert relay.stop() == 0, logs()
            relay_instance = (relay_dir / "data" / "instance-id").read_text().strip()

        rows = sdk_rows(standalone.url)
        assert totals(rows) == (0, evaluations, {"disabled": GET_VARIANT_CALLS}), rows
        assert {row["environment"] for row in rows} == {"development"}
        assert {row["featureName"] for row in rows} == {FLAG}

        [instance] = sdk_instances(standalone.url, instance_id)
        assert instance["environment"] == "development"
        assert instance["connectVia"] == [{"appName": "relay", "instanceId": relay_instance}]
        assert instance["sdkVersion"].startswith("unleash-python-sdk:")
        assert instance["interval"] == 1  # seconds, as the Python SDK sends it

    # the SDK logged no failed registration, fetch or metrics submission; the one warning
    # expected is the one it logs for get_variant of a flag it does not know (misworded)
    problems = [
        r.getMessage()
        for r in caplog.records
        if r.levelno >= logging.WARNING and not r.getMessage().startswith(UNKNOWN_FLAG_WARNING)
    ]
    assert problems == [], problems
    sent = [r.getMessage() for r in caplog.records if r.name == "UnleashClient"]
    assert "Unleash Client successfully registered!" in sent
    assert "Unleash Client metrics successfully sent!" in sent
