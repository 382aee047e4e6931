"""Relays report themselves (issue 17): the standalone keeps each relay's latest report and
lists them; a relay reports upstream, passes on its downstream relays' reports, and is not
disturbed by an upstream that refuses the path."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import ADMIN_KEY, DEV_KEY, auth, bulk, metric
from edgekit import EDGES_PATH, report
from fake_upstream import Answer, FakeUpstream
from service import eventually, get_json, relay_env, running, wait_until

from relay.central.edges import REPORT_INTERVAL, connected
from relay.central.state import EDGES


async def test_standalone_keeps_the_latest_report_of_each_relay_in_the_tree(client: Any) -> None:
    tree = report("a", report("b", report("c")), bufferedEntries=3)
    response = await client.post("/api/client/metrics/edge", json=tree, headers=auth(DEV_KEY))
    assert response.status == 202, await response.text()
    again = report("a", report("b"), bufferedEntries=5)  # the latest replaces the earlier
    assert (
        await client.post("/api/client/metrics/edge", json=again, headers=auth(DEV_KEY))
    ).status == 202
    listed = await (await client.get(EDGES_PATH, headers=auth(ADMIN_KEY))).json()
    by_id = {e["instanceId"]: e for e in listed}
    assert set(by_id) == {"a", "b", "c"}
    assert (by_id["a"]["connectedVia"], by_id["b"]["connectedVia"], by_id["c"]["connectedVia"]) == (
        None,
        "a",
        "b",
    )
    assert by_id["a"]["bufferedEntries"] == 5 and by_id["a"]["edgeVersion"] == "19.6.2"
    assert by_id["a"]["connectedEdges"] == [] and not any(e["stale"] for e in listed)
    later = time.time() + 3 * REPORT_INTERVAL + 1
    assert all(e.stale for e in await connected(client.app[EDGES], now=later))


async def test_reports_are_checked_and_need_a_client_key(client: Any) -> None:
    path = "/api/client/metrics/edge"
    assert (await client.post(path, json=report("a"))).status == 401
    assert (await client.post(path, json=report("a"), headers=auth(ADMIN_KEY))).status == 403
    bad = await client.post(path, json={"appName": "x"}, headers=auth(DEV_KEY))
    assert bad.status == 400 and "/body/identifier" in await bad.text()
    deep = report("x", *[report(f"y{i}") for i in range(101)])
    assert (await client.post(path, json=deep, headers=auth(DEV_KEY))).status == 400
    assert (await client.get(EDGES_PATH, headers=auth(DEV_KEY))).status == 403


async def test_a_relay_reports_itself_and_passes_on_its_downstream(
    make_relay: Any, upstream: FakeUpstream
) -> None:
    relay = await make_relay(report_interval=0.1)
    below = report("downstream-1", bufferedEntries=7)
    response = await relay.post("/api/client/metrics/edge", json=below, headers=auth(DEV_KEY))
    assert response.status == 202
    posted = await relay.post(
        "/api/client/metrics/bulk", json=bulk([metric(yes=1)]), headers=auth(DEV_KEY)
    )
    assert posted.status == 202

    def reports() -> list[dict[str, Any]]:
        return [r.json() for r in upstream.received if r.path == "/api/client/metrics/edge"]

    await eventually(lambda: any(r.get("lastFlush") for r in reports()), "a report after a flush")
    latest = [r for r in reports() if r.get("lastFlush")][-1]
    assert latest["identifier"] == "relay-under-test" and latest["appName"] == "relay"
    assert latest["lastFlush"]["outcome"] == "ok"
    assert latest["connectedEdges"][0]["identifier"] == "downstream-1"
    assert latest["connectedEdges"][0]["bufferedEntries"] == 7
    assert {"bufferedEntries", "outboxBatches", "deadLetters", "oldestBufferedAgeSeconds"} <= set(
        latest
    )
    sent = next(r for r in upstream.received if r.path == "/api/client/metrics/edge")
    assert sent.headers["Authorization"] in (DEV_KEY,) or sent.headers["Authorization"].startswith(
        "default:"
    )


async def test_an_upstream_without_the_path_is_logged_once_and_asked_rarely(
    make_relay: Any, upstream: FakeUpstream, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    upstream.by_path["/api/client/metrics/edge"] = Answer(404)
    relay = await make_relay(report_interval=0.05)
    for round_ in range(3):
        posted = await relay.post(
            "/api/client/metrics/bulk", json=bulk([metric(yes=1)]), headers=auth(DEV_KEY)
        )
        assert posted.status == 202
        await eventually(
            lambda r=round_: upstream.totals() == {("f1", "app"): (r + 1, 0)}, "flushed"
        )
    asked = [r for r in upstream.received if r.path == "/api/client/metrics/edge"]
    assert len(asked) == 1  # then not again for an hour, however many intervals pass
    refusals = [r for r in caplog.records if "does not take relay reports" in r.getMessage()]
    assert len(refusals) == 1 and refusals[0].levelno == logging.WARNING


ADMIN = "*:*.edges-admin-secret-0123456789"
CLIENT = "default:development.edges-client-secret-0123456789"


@pytest.mark.process
def test_two_chained_relays_report_into_standalone(tmp_path: Path) -> None:
    """SDK -> relay B -> relay A -> standalone: both relays are listed, B through A."""
    central_env = {"RELAY_INIT_ADMIN_API_TOKENS": ADMIN, "RELAY_INIT_CLIENT_API_TOKENS": CLIENT}
    with running(tmp_path / "central", env=central_env) as central:
        a_env = relay_env(
            central.url, CLIENT, RELAY_INSTANCE_ID="relay-a", RELAY_REPORT_INTERVAL="0.3"
        )
        with running(tmp_path / "a", env=a_env, name="a") as a:
            b_env = relay_env(
                a.url,
                CLIENT,
                RELAY_INSTANCE_ID="relay-b",
                RELAY_APP_NAME="edge-b",
                RELAY_REPORT_INTERVAL="0.3",
            )
            with running(tmp_path / "b", env=b_env, name="b"):

                def both() -> list[dict[str, Any]] | None:
                    found = get_json(f"{central.url}{EDGES_PATH}", ADMIN)
                    ids = {e["instanceId"] for e in found}
                    return found if {"relay-a", "relay-b"} <= ids else None

                wait_until(both, "both relays listed by the standalone")
                listed = {e["instanceId"]: e for e in both() or []}
    a_seen, b_seen = listed["relay-a"], listed["relay-b"]
    assert a_seen["connectedVia"] is None and b_seen["connectedVia"] == "relay-a"
    assert b_seen["appName"] == "edge-b" and a_seen["appName"] == "relay"
    for seen in (a_seen, b_seen):
        assert seen["bufferedEntries"] >= 0 and seen["deadLetters"] == 0 and not seen["stale"]
        assert seen["edgeVersion"] and seen["started"]
