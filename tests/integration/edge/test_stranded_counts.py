"""Counts never stranded by a missing upstream key: a relay with no ``upstream_tokens`` key
for an environment sends its counts with an SDK key of it the upstream vouched for (named
in the log without its secret); only while none is known do they wait, and ``/ready``'s
body and ``relay_environments_without_key`` say so. Against the fake upstream, which
records the Authorization each bulk came with."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from conftest import DEV_KEY, PROD_KEY, MakeClient, auth, bulk, metric
from fake_upstream import FakeUpstream
from service import eventually, sample
from webkit import page, sign_in

from relay.wire.edges import REPORT_PATH

pytestmark = pytest.mark.workers  # at one worker and at two (conftest.make_relay)


def sent_with(upstream: FakeUpstream, key: str) -> list[dict[str, Any]]:
    return [
        m
        for r in upstream.accepted_bulks()
        if r.headers.get("Authorization") == key
        for m in r.json()["metrics"]
    ]


async def gauge(client: Any) -> float:
    text = await (await client.get("/internal-backstage/metrics")).text()
    return sample(text, "relay_environments_without_key")


async def test_counts_go_with_a_vouched_sdk_key_and_wait_only_without_one(
    make_relay: MakeClient, upstream: FakeUpstream, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    # no upstream key; DEV_KEY's flags are fetched at start, PROD_KEY is only validated
    client = await make_relay(upstream_tokens=[], client_tokens=[DEV_KEY], report_interval=0.1)
    dev_body = bulk([metric(yes=2)])
    dev = await client.post("/api/client/metrics/bulk", json=dev_body, headers=auth(DEV_KEY))
    prod_body = bulk([metric(env="production", yes=5)])
    prod = await client.post("/api/client/metrics/bulk", json=prod_body, headers=auth(PROD_KEY))
    assert (dev.status, prod.status) == (202, 202)

    await eventually(lambda: sent_with(upstream, DEV_KEY), "development sent with DEV_KEY")
    assert [(m["environment"], m["yes"]) for m in sent_with(upstream, DEV_KEY)] == [
        ("development", 2)
    ]

    async def waiting() -> Any:
        return (await (await client.get("/ready")).json()).get("countsWaitingForKey")

    await eventually(lambda: waiting(), "production said to wait")
    assert await waiting() == ["production"]
    assert (await client.get("/ready")).status == 200  # flags are served all the same
    assert await gauge(client) == 1
    assert not sent_with(upstream, PROD_KEY)
    # the relay's report says so too, sent with the key it borrowed
    instance = await (await client.get("/internal-backstage/instancedata")).json()
    assert instance["this_instance"]["countsWaitingForKey"] == ["production"]

    def reported() -> list[Any]:
        return [
            r.json().get("countsWaitingForKey")
            for r in upstream.received
            if r.path == REPORT_PATH and r.headers.get("Authorization") == DEV_KEY
        ]

    # and goes on saying so once development's counts are all sent: reports go with any key
    # the upstream vouched for (with only the keys counts were last sent with, they stopped)
    seen = len(reported())
    await eventually(lambda: reported()[seen:].count(["production"]) >= 3, "reports go on")

    # an SDK with PROD_KEY polls its flags: the upstream answers it, its counts can leave
    assert (await client.get("/api/client/features", headers=auth(PROD_KEY))).status == 200
    await eventually(lambda: sent_with(upstream, PROD_KEY), "production sent with PROD_KEY")
    assert [(m["environment"], m["yes"]) for m in sent_with(upstream, PROD_KEY)] == [
        ("production", 5)
    ]
    assert await waiting() is None
    assert await gauge(client) == 0

    borrowed = [r for r in caplog.records if "SDK key the upstream vouched for" in r.getMessage()]
    assert sorted(r.environment for r in borrowed) == ["development", "production"]  # type: ignore[attr-defined]
    assert all(r.key.endswith(")") and ".****" in r.key for r in borrowed)  # type: ignore[attr-defined]
    secrets = {DEV_KEY.split(".", 1)[1], PROD_KEY.split(".", 1)[1]}
    assert not any(s in caplog.text for s in secrets)


async def test_a_configured_upstream_key_is_used_before_any_sdk_key(
    make_relay: MakeClient, upstream: FakeUpstream
) -> None:
    other = "*:development.upstream-only-0123456789"
    upstream.valid_keys[other] = "development"
    client = await make_relay(upstream_tokens=[other], client_tokens=[DEV_KEY])
    body = bulk([metric(yes=1)])
    await client.post("/api/client/metrics/bulk", json=body, headers=auth(DEV_KEY))
    await eventually(lambda: sent_with(upstream, other), "sent with the upstream key")
    assert not sent_with(upstream, DEV_KEY)


async def test_the_page_shows_a_relays_counts_waiting(client: Any) -> None:
    report = {"identifier": "r-1", "appName": "edge", "countsWaitingForKey": ["production"]}
    posted = await client.post("/api/client/metrics/edge", json=report, headers=auth(DEV_KEY))
    assert posted.status == 202
    await sign_in(client)
    assert "counts of production wait for a key" in await page(client, "/relays")
