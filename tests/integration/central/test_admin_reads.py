"""Admin reads and pages cost what they return (issue 20): after one key registered 400,000
instances the applications read built 295 MB, the /applications page 386 MB, and the home
page read the usage of 2 million names. Each is now a page (``limit``, a ``next`` cursor)
read along an index; registrations are bounded per application and environment, and
instances not seen for a week are forgotten."""

from __future__ import annotations

import json
import re
import sqlite3
import time
from pathlib import Path
from typing import Any

from conftest import ADMIN_KEY, DEV_KEY, PROD_KEY, auth, bulk, metric, standalone_settings
from webkit import page, sign_in

from relay.app import build_app
from relay.central.database import central_database
from relay.central.flags.unknown import MAX_REPORTS
from relay.central.state import USAGE
from relay.central.usage_api import DEFAULT_INSTANCES
from relay.central.web.pages import (
    APPS_SHOWN,
    FLAGS_PAGE,
    HOPS_SHOWN,
    INSTANCES_PAGE,
    RELAYS_PAGE,
    UNREPORTED_SHOWN,
)
from relay.core.ingest_batch import IngestBatch, Registration, RegistrationKey, from_epoch
from relay.store.metrics import INSTANCE_MAX_AGE, INSTANCES_KEPT, MetricsStore
from relay.wire.common import MAX_METRICS

APPS, PER_APP = 40, 550  # 22,000 instances, each application under the bound
ROW = ("[]", "unleash-client-node:6.0.0", '["default"]', 15.0, None)


def fill_registrations(db: Path, seen: float) -> None:
    """APPS x PER_APP instances written straight into the file: a large state, fast."""
    rows = [
        (f"app-{a:03d}", "development", f"i-{i:05d}", *ROW, seen, seen + i)
        for a in range(APPS)
        for i in range(PER_APP)
    ]
    with sqlite3.connect(db) as conn:
        conn.executemany(
            "INSERT INTO registrations (app_name, environment, instance_id, connect_via,"
            ' sdk_version, strategies, "interval", started, first_seen, last_seen)'
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            rows,
        )


async def sqlite_client(aiohttp_client: Any, tmp_path: Path) -> tuple[Any, Path]:
    client = await aiohttp_client(build_app(standalone_settings(tmp_path / "data")))
    return client, tmp_path / "data" / "relay.db"


async def get_json(client: Any, url: str) -> tuple[dict[str, Any], int]:
    response = await client.get(url, headers=auth(ADMIN_KEY))
    raw = await response.read()
    assert response.status == 200, raw[:500]
    body: dict[str, Any] = json.loads(raw)
    return body, len(raw)


def listed(body: dict[str, Any]) -> list[tuple[str, str]]:
    return [(a["appName"], i["instanceId"]) for a in body["applications"] for i in a["instances"]]


async def test_applications_are_read_a_page_at_a_time(aiohttp_client: Any, tmp_path: Path) -> None:
    client, db = await sqlite_client(aiohttp_client, tmp_path)
    fill_registrations(db, time.time())
    url: str | None = "/api/admin/metrics/applications"
    seen: list[tuple[str, str]] = []
    pages = 0
    while url is not None:
        body, size = await get_json(client, url)
        instances = [
            (a["appName"], i["instanceId"]) for a in body["applications"] for i in a["instances"]
        ]
        assert len(instances) <= DEFAULT_INSTANCES
        assert size < DEFAULT_INSTANCES * 400  # a page's worth, whatever the table holds
        seen += instances
        url, pages = body["next"], pages + 1
    assert pages == -(-APPS * PER_APP // DEFAULT_INSTANCES)
    assert len(seen) == len(set(seen)) == APPS * PER_APP and seen == sorted(seen)
    # one application, paged alike; an application split across pages is one group per page
    body, _ = await get_json(client, "/api/admin/metrics/applications/app-007?limit=500")
    assert body["appName"] == "app-007" and len(body["instances"]) == 500
    rest, _ = await get_json(client, body["next"])
    assert len(rest["instances"]) == PER_APP - 500 and rest["next"] is None
    ids = [i["instanceId"] for i in body["instances"] + rest["instances"]]
    assert ids == [f"i-{i:05d}" for i in range(PER_APP)]
    split, _ = await get_json(client, "/api/admin/metrics/applications?limit=600")
    assert [(a["appName"], len(a["instances"])) for a in split["applications"]] == [
        ("app-000", PER_APP),
        ("app-001", 600 - PER_APP),
    ]


async def test_paged_reads_follow_next_on_both_backends(client: Any) -> None:
    apps = [
        {"appName": f"svc-{n % 3}", "instanceId": f"i{n:02d}", "environment": "development"}
        for n in range(23)
    ]
    response = await client.post(
        "/api/client/metrics/bulk", json=bulk(applications=apps), headers=auth(DEV_KEY)
    )
    assert response.status == 202
    for limit in (1, 5, 22, 23, 24):
        url: str | None = f"/api/admin/metrics/applications?limit={limit}"
        got: list[tuple[str, str]] = []
        while url is not None:
            body, _ = await get_json(client, url)
            page_rows = [
                (a["appName"], i["instanceId"])
                for a in body["applications"]
                for i in a["instances"]
            ]
            assert len(page_rows) <= limit
            got += page_rows
            url = body["next"]
        assert got == sorted((a["appName"], a["instanceId"]) for a in apps), limit
    for query in ("limit=0", "limit=10001", "after=nope", "after=WyJhIl0"):
        response = await client.get(
            f"/api/admin/metrics/applications/svc-1?{query}", headers=auth(ADMIN_KEY)
        )
        assert response.status == 400, query


async def test_the_applications_page_shows_a_page_and_a_next_link(
    aiohttp_client: Any, tmp_path: Path
) -> None:
    client, db = await sqlite_client(aiohttp_client, tmp_path)
    fill_registrations(db, time.time())
    await sign_in(client)
    html = await page(client, "/applications")
    assert html.count('aria-label="Path of') == INSTANCES_PAGE
    found = re.search(r'<a href="([^"]+)" rel="next">', html)
    assert found is not None
    following = await page(client, found.group(1).replace("&amp;", "&"))
    assert following.count('aria-label="Path of') == INSTANCES_PAGE
    assert "i-00200" in following and "i-00199" not in following


async def test_the_home_page_reads_the_usage_of_its_own_flags_only(
    aiohttp_client: Any, tmp_path: Path
) -> None:
    """50,000 names with counts, 130 flags: a page of flags, and their usage."""
    client, db = await sqlite_client(aiohttp_client, tmp_path)
    flags = [f"flag-{n:03d}" for n in range(FLAGS_PAGE + 30)]
    for name in flags:
        response = await client.post(
            "/api/admin/projects/default/features", json={"name": name}, headers=auth(ADMIN_KEY)
        )
        assert response.status == 201, await response.text()
    hour = int(time.time()) // 3600 * 3600
    with sqlite3.connect(db) as conn:
        conn.executemany(
            "INSERT INTO metrics (feature_name, app_name, environment, hour, yes, no)"
            " VALUES (?, 'app', 'development', ?, 1, 0)",
            [(f"noise-{n:06d}", hour) for n in range(50_000)] + [("flag-129", hour)],
        )
    await sign_in(client)
    html = await page(client, "/")
    shown = set(re.findall(r'href="/flags/(flag-\d+)"', html))
    assert shown == set(flags[:FLAGS_PAGE])
    found = re.search(r'<a href="([^"]+)" rel="next">', html)
    assert found is not None
    rest = await page(client, found.group(1).replace("&amp;", "&"))
    assert set(re.findall(r'href="/flags/(flag-\d+)"', rest)) == set(flags[FLAGS_PAGE:])
    assert 'rel="next"' not in rest
    said = r'<span class="usage">(<span class="visually-hidden">[^<]*</span>)?1 / 1</span>'
    assert re.search(said, rest)  # flag-129's usage, read for its page
    usage = await client.app[USAGE].summary(["flag-129", "flag-000"])
    assert list(usage) == [("flag-129", "development")]


async def test_the_relays_page_is_paged(client: Any) -> None:
    for n in range(RELAYS_PAGE + 5):
        body = {"identifier": f"relay-{n:03d}", "appName": "edge", "connectedEdges": []}
        response = await client.post("/api/client/metrics/edge", json=body, headers=auth(DEV_KEY))
        assert response.status == 202, await response.text()
    await sign_in(client)
    html = await page(client, "/relays")
    assert len(set(re.findall(r'id="relay-development-(relay-\d+)"', html))) == RELAYS_PAGE
    found = re.search(r'<a href="([^"]+)" rel="next">', html)
    assert found is not None
    rest = await page(client, found.group(1).replace("&amp;", "&"))
    assert set(re.findall(r'id="relay-development-(relay-\d+)"', rest)) == {
        f"relay-{n:03d}" for n in range(RELAYS_PAGE, RELAYS_PAGE + 5)
    }
    response = await client.get("/api/admin/metrics/edges?limit=100", headers=auth(ADMIN_KEY))
    assert len(await response.json()) == 100
    link = response.headers["Link"]
    assert link.startswith("</api/admin/metrics/edges?") and link.endswith('>; rel="next"')
    tail = await client.get(link[1 : link.index(">")], headers=auth(ADMIN_KEY))
    assert [e["instanceId"] for e in await tail.json()] == [
        f"relay-{n:03d}" for n in range(100, RELAYS_PAGE + 5)
    ]
    assert "Link" not in tail.headers


async def test_relays_known_only_from_registrations_are_a_bounded_list(client: Any) -> None:
    """One key registered 200 instances, each through 100 made-up relays of long names:
    the list of relays known only from ``connectVia`` named every relay with every
    application it served, a 13.6 MB page built on the event loop (300 ms) at every view.
    It now names at most ``UNREPORTED_SHOWN`` relays and ``APPS_SHOWN`` applications each."""
    for n in range(200):
        hops = [
            {"appName": f"r{n}-{h}-" + "r" * 240, "instanceId": f"i{h}-" + "i" * 240}
            for h in range(100)
        ]
        body = {"appName": f"app-{n:03d}-" + "a" * 240, "instanceId": "i", "connectVia": hops}
        response = await client.post("/api/client/register", json=body, headers=auth(DEV_KEY))
        assert response.status == 202, await response.text()
    await sign_in(client)
    html = await page(client, "/relays")
    assert len(re.findall(r'<li id="relay-', html)) == UNREPORTED_SHOWN
    assert len(html) < UNREPORTED_SHOWN * (APPS_SHOWN + 2) * 300, len(html)


async def test_the_applications_page_names_a_bounded_path_per_instance(client: Any) -> None:
    """1,000 instances registered through 100 made-up relays each (as many as a
    registration may name): a page of them was 67 MB of HTML, 1.3 s of the event loop. The
    page names ``HOPS_SHOWN`` relays of each path and says how many more there are."""
    hops = [
        {"appName": f"r{h}-" + "r" * 200, "instanceId": f"i{h}-" + "i" * 200} for h in range(100)
    ]
    for n in range(50):  # 20 instances a request: about 900 kB
        apps = [
            {"appName": "app", "environment": "development", "instanceId": f"i{n}-{k:02d}"}
            | {"connectVia": hops}
            for k in range(20)
        ]
        response = await client.post(
            "/api/client/metrics/bulk",
            data=json.dumps(bulk(applications=apps)),
            headers={**auth(DEV_KEY), "Content-Type": "application/json"},
        )
        assert response.status == 202, await response.text()
    await sign_in(client)
    assert (await client.get("/applications?limit=201")).status == 400  # at most 200 a page
    html = await page(client, "/applications?limit=200")
    assert html.count(f"{100 - HOPS_SHOWN} more relays") == 200
    assert len(html) < 200 * (HOPS_SHOWN + 2) * 800, len(html)  # a relay named: 700 B


async def test_which_relays_have_a_report_is_read_through_an_index(
    aiohttp_client: Any, tmp_path: Path
) -> None:
    """The relays page asks which of up to 20,000 identifiers (made up by one key's
    registrations) have a report: each statement of 100 scanned every report (0.27 s a
    view over 10,000 reports). It now reads the identifiers' index."""
    await sqlite_client(aiohttp_client, tmp_path)
    with sqlite3.connect(tmp_path / "data" / "relay.db") as conn:
        plan = conn.execute(
            "EXPLAIN QUERY PLAN SELECT identifier FROM edge_reports WHERE identifier IN (?, ?)",
            ("a", "b"),
        ).fetchall()
    assert "USING COVERING INDEX edge_reports_identifier" in str(plan), plan


async def test_an_application_keeps_its_most_recently_seen_instances(client: Any) -> None:
    """Writes past the bound replace the least recently seen: the table does not grow."""
    for batch in range(3):
        apps = [
            {"appName": "busy", "instanceId": f"b{batch}-{n:03d}", "environment": "development"}
            for n in range(500)
        ]
        posted = await client.post(
            "/api/client/metrics/bulk", json=bulk(applications=apps), headers=auth(DEV_KEY)
        )
        assert posted.status == 202
    other = {"appName": "busy", "instanceId": "p-1", "environment": "production"}
    posted = await client.post(
        "/api/client/metrics/bulk", json=bulk(applications=[other]), headers=auth(PROD_KEY)
    )
    assert posted.status == 202
    url: str | None = "/api/admin/metrics/applications/busy"
    ids: list[str] = []
    while url is not None:
        body, _ = await get_json(client, url)
        ids += [i["instanceId"] for i in body["instances"]]
        url = body["next"]
    assert INSTANCES_KEPT == 1000
    latest = {f"b{b}-{n:03d}" for b in (1, 2) for n in range(500)}
    assert sorted(ids) == sorted(latest | {"p-1"})  # and another environment's kept


async def test_instances_not_seen_for_a_week_are_forgotten(
    tmp_path: Path, database_url: str | None
) -> None:
    """The hourly prune, with an injected clock (no dependence on today's date), deletes by
    age alone (along the index of last sightings): rows written before the bound per
    application existed go with their age, not in one pass over every registration."""
    base = 1_000_000_000.0
    now = [base]
    settings = standalone_settings(tmp_path / "data", database_url=database_url)
    db = central_database(settings)
    await db.open()
    store = MetricsStore(db, 64, 3600, clock=lambda: now[0], instances_kept=3)
    store.start()
    try:
        batch = IngestBatch()
        for name, age in (("old", INSTANCE_MAX_AGE + 60), ("recent", INSTANCE_MAX_AGE - 60)):
            key = RegistrationKey("app", "development", name)
            seen = from_epoch(base - age)
            batch.add_registration(Registration(key, (), None, (), None, None, seen))
        assert await store.write(batch, None)
        async with db.transaction() as tx:  # as written before the bound existed
            for n in range(5):
                await tx.execute(
                    "INSERT INTO registrations (app_name, environment, instance_id,"
                    ' connect_via, sdk_version, strategies, "interval", started, first_seen,'
                    " last_seen) VALUES ('many', 'development', ?, ?, ?, ?, ?, ?, ?, ?)",
                    (f"m{n}", *ROW, base, base - n),
                )
        assert await store.prune_registrations() == 1
        rows = await db.fetch_all("SELECT instance_id FROM registrations ORDER BY instance_id")
        assert [r[0] for r in rows] == ["m0", "m1", "m2", "m3", "m4", "recent"]
        now[0] = base + 120
        assert await store.prune_registrations() == 1
        rows = await db.fetch_all("SELECT instance_id FROM registrations ORDER BY instance_id")
        assert [r[0] for r in rows] == ["m0", "m1", "m2", "m3", "m4"]
    finally:
        await store.stop()
        await db.close()


async def test_unknown_flags_answer_a_bounded_number_of_reports(client: Any) -> None:
    """One name reported from more applications than one answer holds."""
    for start in range(0, MAX_REPORTS + 10, MAX_METRICS):
        apps = range(start, min(start + MAX_METRICS, MAX_REPORTS + 10))
        entries = [metric("typo", app=f"a{n:05d}", yes=1) for n in apps]
        response = await client.post(
            "/api/client/metrics/bulk", json=bulk(entries), headers=auth(DEV_KEY)
        )
        assert response.status == 202
    response = await client.get("/api/admin/metrics/unknown-flags", headers=auth(ADMIN_KEY))
    [flag] = (await response.json())["unknownFlags"]
    assert flag["name"] == "typo" and len(flag["reports"]) == MAX_REPORTS
