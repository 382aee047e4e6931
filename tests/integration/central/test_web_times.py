"""Times on the web page say what they mean (issue 23): a flag's "last seen" is when its
counts last arrived (not the start of their hour window), the flags' usage columns name the
hour windows they sum, and an application's "last seen" moves when its metrics arrive."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

from conftest import ADMIN_KEY, DEV_KEY, auth, bulk, metric, registration
from webkit import FEATURES, page, sign_in

from relay.core.ingest_batch import hour_start


def seconds(now: datetime) -> datetime:
    return now.replace(microsecond=0)


async def test_a_flag_is_last_seen_when_its_counts_arrived_not_at_their_hour(
    client: Any,
) -> None:
    """Counts of a window three hours back arrive now: last seen is now, to the second."""
    assert (await client.post(FEATURES, json={"name": "checkout"}, headers=auth(ADMIN_KEY))).ok
    window = datetime.now(UTC) - timedelta(hours=3)
    entries = [
        metric("checkout", yes=4, timestamp=window.isoformat()),
        metric("chekout", yes=1, timestamp=window.isoformat()),
    ]
    before = seconds(datetime.now(UTC))
    posted = await client.post(
        "/api/client/metrics/bulk", json=bulk(entries), headers=auth(DEV_KEY)
    )
    after = datetime.now(UTC)
    assert posted.status == 202
    await sign_in(client)
    html = await page(client, "/")
    row = re.search(r'href="/flags/checkout".*?<time datetime="([^"]+)">([^<]+)</time>', html, re.S)
    assert row, html
    seen = datetime.fromisoformat(row.group(1))
    assert before <= seen <= after, (seen, before, after)
    assert row.group(2) == f"{seen:%Y-%m-%d %H:%M} UTC"
    unknown = await (
        await client.get("/api/admin/metrics/unknown-flags", headers=auth(ADMIN_KEY))
    ).json()
    [typo] = unknown["unknownFlags"]
    assert before <= datetime.fromisoformat(typo["lastSeenAt"]) <= after


async def test_the_usage_columns_name_the_hour_windows_they_sum(client: Any) -> None:
    assert (await client.post(FEATURES, json={"name": "checkout"}, headers=auth(ADMIN_KEY))).ok
    await sign_in(client)
    now = datetime.now(UTC)
    html = await page(client, "/")
    if datetime.now(UTC).hour != now.hour:  # the page was made in the next hour
        now, html = datetime.now(UTC), await page(client, "/")
    since = datetime.fromtimestamp(hour_start(now - timedelta(hours=1)), UTC)
    assert f"state · since {since:%H:%M} / 24 h" in html
    assert f'from <time datetime="{since.isoformat()}">{since:%H:%M} UTC</time> on' in html


async def test_an_application_is_seen_again_when_its_metrics_arrive(client: Any) -> None:
    assert (
        await client.post("/api/client/register", json=registration(), headers=auth(DEV_KEY))
    ).status == 202

    async def last_seen() -> datetime:
        path = "/api/admin/metrics/applications"
        body = await (await client.get(path, headers=auth(ADMIN_KEY))).json()
        [app] = body["applications"]
        [instance] = app["instances"]
        return datetime.fromisoformat(instance["lastSeen"])

    registered = await last_seen()
    counts = {
        "appName": "shop",
        "instanceId": "shop-1",
        "bucket": {
            "start": datetime.now(UTC).isoformat(),
            "stop": datetime.now(UTC).isoformat(),
            "toggles": {"checkout": {"yes": 1, "no": 0}},
        },
    }
    assert (
        await client.post("/api/client/metrics", json=counts, headers=auth(DEV_KEY))
    ).status == 202
    assert await last_seen() > registered
    other = counts | {"instanceId": "never-registered"}
    assert (
        await client.post("/api/client/metrics", json=other, headers=auth(DEV_KEY))
    ).status == 202
    assert (await last_seen()) > registered  # and no instance made up from metrics alone


async def test_an_application_fed_through_a_relay_is_seen_when_its_counts_arrive(
    client: Any,
) -> None:
    """A relay's bulk names applications, not instances: the applications page says when
    each application's counts last arrived, per environment, whatever its instances."""
    started = datetime.now(UTC) - timedelta(days=2)
    body = bulk(applications=[registration(started) | {"environment": "development"}])
    posted = await client.post("/api/client/metrics/bulk", json=body, headers=auth(DEV_KEY))
    assert posted.status == 202
    await sign_in(client)
    assert "Counts last arrived" not in await page(client, "/applications")
    window = datetime.now(UTC) - timedelta(hours=2)
    before = seconds(datetime.now(UTC))
    entries = [metric("checkout", app="shop", yes=2, no=0, timestamp=window.isoformat())]
    posted = await client.post(
        "/api/client/metrics/bulk", json=bulk(entries), headers=auth(DEV_KEY)
    )
    after = datetime.now(UTC)
    assert posted.status == 202
    html = await page(client, "/applications")
    found = re.search(r'Counts last arrived: development <time datetime="([^"]+)">', html)
    assert found, html
    assert before <= datetime.fromisoformat(found.group(1)) <= after
