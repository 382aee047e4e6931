"""Issue 20: relays' reports are data from strangers. Non-finite numbers are refused at the
edge, no stored record makes a read fail, reports are scoped by the key that posted them,
and they are bounded on their own: at a relay they live in ``cache.db`` (with the flag
copies), so they can never make the buffer evict an acknowledged count."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import ADMIN_KEY, DEV_KEY, PROD_KEY, auth, bulk, metric, standalone_settings
from edgekit import EDGES_PATH, report
from fake_upstream import Answer, FakeUpstream
from prometheus_client import REGISTRY
from service import eventually
from webkit import page, sign_in

from relay.app import build_app
from relay.core.edges import ReportScope, flatten
from relay.edge.reporter import REPORT_BOUNDS
from relay.edge.wiring import MONITOR_INTERVAL
from relay.store.cache_file import cache_file
from relay.store.edge_reports import EdgeReportStore, ReportBounds
from relay.wire.edges import MAX_DEPTH, MAX_REPORT_BYTES, EdgeInstanceData

pytestmark = pytest.mark.workers  # at one worker and at two (conftest.make_relay)

REPORT_PATH = "/api/client/metrics/edge"
# what an older version stored for a report with avg = 1e999: pydantic wrote +inf as null
POISONED = json.dumps(
    {"identifier": "old", "appName": "old", "latencyUpstream": {"metrics": {"avg": None}}}
)


def unreadable() -> float:
    return REGISTRY.get_sample_value("relay_edge_reports_unreadable_total") or 0.0


def evicted() -> float:
    return REGISTRY.get_sample_value("relay_evicted_entries_total") or 0.0


def wide(identifier: str, below: int = 0) -> dict[str, Any]:
    """A report of about 1.2 kB as kept per relay in it (long strings of what is kept)."""
    long = {"edgeVersion": "v" * 255, "region": "r" * 255, "hosting": "h" * 255}
    return report(
        identifier,
        *[report(f"{identifier}-{i}-" + "x" * 200, **long) for i in range(below)],
        **long,
    )


async def test_non_finite_numbers_are_refused_in_both_modes(client: Any, make_relay: Any) -> None:
    relay = await make_relay()
    for service in (client, relay):
        for number in ("1e999", "-1e999", "NaN", "Infinity"):
            body = json.dumps(report("a")).replace(
                '"connectedEdges"',
                f'"latencyUpstream": {{"metrics": {{"avg": {number}}}}}, "connectedEdges"',
            )
            answer = await service.post(
                REPORT_PATH,
                data=body,
                headers={**auth(DEV_KEY), "Content-Type": "application/json"},
            )
            assert answer.status == 400, (number, await answer.text())
            error = await answer.json()
            assert error["name"] == "BadDataError"
            assert error["details"][0]["path"] == "/body/latencyUpstream/metrics/avg"


async def test_a_stored_record_that_does_not_read_never_fails_a_read(
    aiohttp_client: Any, tmp_path: Path
) -> None:
    client = await aiohttp_client(build_app(standalone_settings(tmp_path / "data")))
    posted = await client.post(REPORT_PATH, json=report("good"), headers=auth(DEV_KEY))
    assert posted.status == 202
    with sqlite3.connect(tmp_path / "data" / "relay.db") as conn:
        conn.executemany(
            "INSERT INTO edge_reports (environment, projects, identifier, app_name, via,"
            " reported_at, report) VALUES ('development', ?, ?, 'old', NULL, ?, ?)",
            [
                ('["default"]', "old", time.time(), POISONED),
                ('["default"]', "not-json", time.time(), "{"),
                ("not a list", "bad-scope", time.time(), json.dumps(report("x"))),
            ],
        )
    before = unreadable()
    listed = await client.get(EDGES_PATH, headers=auth(ADMIN_KEY))
    assert listed.status == 200, await listed.text()
    assert [e["instanceId"] for e in await listed.json()] == ["good"]
    assert unreadable() - before == 3
    await sign_in(client)
    html = await page(client, "/relays")
    assert 'id="relay-development-good"' in html and "Reported with a key of" in html


async def test_a_relay_skips_a_record_that_does_not_read_and_goes_on_reporting(
    make_relay: Any, upstream: FakeUpstream, tmp_path: Path
) -> None:
    relay = await make_relay(report_interval=0.1)
    posted = await relay.post(REPORT_PATH, json=report("below"), headers=auth(DEV_KEY))
    assert posted.status == 202
    with sqlite3.connect(tmp_path / "relay" / "cache.db") as conn:
        conn.execute(
            "INSERT INTO edge_reports (environment, projects, identifier, app_name, via,"
            " reported_at, report) VALUES ('development', '[\"default\"]', 'old', 'old', NULL,"
            " ?, ?)",
            (time.time() + 1, POISONED),
        )
    sent_before = len(upstream.received)

    def carried() -> list[str]:
        return [
            [e["identifier"] for e in r.json()["connectedEdges"]]
            for r in upstream.received[sent_before:]
            if r.path == REPORT_PATH
        ]

    await eventually(lambda: ["below"] in carried(), "a report carrying the readable one")


async def test_reports_are_scoped_by_the_key_that_posted_them(client: Any) -> None:
    """A key of another environment naming the same relay gets a record of its own: it
    neither replaces nor hides the first."""
    first = report("relay-1", bufferedEntries=1)
    assert (await client.post(REPORT_PATH, json=first, headers=auth(DEV_KEY))).status == 202
    claim = report("relay-1", bufferedEntries=99, appName="forged")
    assert (await client.post(REPORT_PATH, json=claim, headers=auth(PROD_KEY))).status == 202
    listed = await (await client.get(EDGES_PATH, headers=auth(ADMIN_KEY))).json()
    by_scope = {(e["environment"], tuple(e["projects"])): e for e in listed}
    assert set(by_scope) == {("development", ("default",)), ("production", ("default",))}
    assert by_scope[("development", ("default",))]["bufferedEntries"] == 1
    assert by_scope[("development", ("default",))]["appName"] == "app-relay-1"
    assert by_scope[("production", ("default",))]["appName"] == "forged"


async def test_a_report_is_bounded_by_what_is_kept(client: Any) -> None:
    """Over 64 KiB as kept: 413. Fields ignored (an Edge's ``processMetrics``) do not count."""
    big = wide("big", below=60)
    assert len(json.dumps(big)) > MAX_REPORT_BYTES
    answer = await client.post(REPORT_PATH, json=big, headers=auth(DEV_KEY))
    assert answer.status == 413, await answer.text()
    assert (await answer.json())["name"] == "ContentTooLargeError"
    padded = report("padded", processMetrics={"x": "p" * 200_000})
    assert (await client.post(REPORT_PATH, json=padded, headers=auth(DEV_KEY))).status == 202


async def test_reports_and_flag_copies_never_evict_counts(
    make_relay: Any, upstream: FakeUpstream, tmp_path: Path
) -> None:
    """Under a 4 MiB bound, with the upstream taking no counts: 2 MB flag copies for two
    scopes and 150 reports of 50 kB (7.5 MB) from one key. The acknowledged counts all stay
    (before, these evicted them), and the reports kept are bounded (``REPORT_BOUNDS``)."""
    upstream.default = Answer(503)
    upstream.valid_keys = {DEV_KEY: "development", PROD_KEY: "production"}
    upstream.features["features"] += [
        {"name": f"big-{i:05}", "project": "default", "strategies": [], "description": "d" * 900}
        for i in range(2_000)
    ]
    relay = await make_relay(buffer_max_bytes=4 * 1024 * 1024, backoff_max=60)
    entries = [metric(f"kept-{i:04}", yes=2, no=1) for i in range(1_000)]
    posted = await relay.post("/api/client/metrics/bulk", json=bulk(entries), headers=auth(DEV_KEY))
    assert posted.status == 202
    for key in (DEV_KEY, PROD_KEY):
        assert (await relay.get("/api/client/features", headers=auth(key))).status == 200
    before = evicted()
    one = wide("r", below=40)
    for n in range(150):
        one["identifier"] = f"reporter-{n:03}"
        answer = await relay.post(REPORT_PATH, json=one, headers=auth(DEV_KEY))
        assert answer.status == 202, await answer.text()
    # flag copies are written within a second; the buffer is checked every MONITOR_INTERVAL
    await asyncio.sleep(1 + 2 * MONITOR_INTERVAL)
    upstream.default = Answer(202)
    await relay.close()  # the final flush sends what is held
    assert evicted() == before
    totals = upstream.totals()
    assert all(totals.get((f"kept-{i:04}", "app")) == (2, 1) for i in range(1_000))
    with sqlite3.connect(tmp_path / "relay" / "cache.db") as conn:
        copies = conn.execute("SELECT count(body) FROM flag_scopes").fetchone()[0]
        kept = [row[0] for row in conn.execute("SELECT identifier FROM edge_reports")]
    assert copies == 2
    assert sorted(kept) == [f"reporter-{n:03}" for n in range(100, 150)]  # the newest 50
    assert len(kept) == REPORT_BOUNDS.per_scope


async def test_reports_are_bounded_per_scope_and_in_all_the_oldest_out(tmp_path: Path) -> None:
    db = cache_file(tmp_path, "NORMAL")
    await db.open()
    try:
        store = EdgeReportStore(db, ReportBounds(per_scope=3, total=5))
        one, other = ReportScope("development", ("a",)), ReportScope("development", ("b",))
        for n in range(4):  # the fourth of one scope replaces its oldest
            await store.save(one, flatten(EdgeInstanceData.model_validate(report(f"a{n}"))), n)
        for n in range(3):  # then the other scope's push the oldest of all out
            made = EdgeInstanceData.model_validate(report(f"b{n}"))
            await store.save(other, flatten(made), 10 + n)
        kept = {(r.scope.projects, r.identifier) for r in await store.latest()}
        assert kept == {
            (("a",), "a3"),
            (("b",), "b0"),
            (("b",), "b1"),
            (("b",), "b2"),
            (("a",), "a2"),
        }
    finally:
        await db.close()


def chain(identifier: str, depth: int) -> dict[str, Any]:
    """A report carrying a chain of relays, ``depth`` in all (itself included)."""
    below = report(f"{identifier}-{depth - 1}")
    for level in range(depth - 2, 0, -1):
        below = report(f"{identifier}-{level}", below)
    return report(identifier, below) if depth > 1 else report(identifier)


async def test_a_relay_passes_on_what_its_upstream_takes_whatever_it_was_posted(
    client: Any, make_relay: Any, upstream: FakeUpstream, tmp_path: Path
) -> None:
    """A report as deep as a parse allows (99 relays in a chain), or as large as one report
    may be, was taken at a relay and put first in its own report: that report was then one
    level too deep for its upstream to read (400, every minute while the deep one was
    kept), or had no room left for the other relays below (they were never passed on).
    Reports are now bounded in depth (MAX_DEPTH), and a relay passes on every downstream
    report that fits, skipping those that do not."""
    for service in (client, await make_relay()):
        too_deep = chain("deep", MAX_DEPTH + 1)
        answer = await service.post(REPORT_PATH, json=too_deep, headers=auth(DEV_KEY))
        assert answer.status == 400, await answer.text()
    relay = await make_relay(tmp_path / "relay-2", report_interval=0.1)
    largest = wide("largest", below=41)  # as large as a report may be, as kept
    pad = len(EdgeInstanceData.model_validate(report("pad-000")).model_dump_json()) + 1
    while len(EdgeInstanceData.model_validate(largest).model_dump_json()) < MAX_REPORT_BYTES - pad:
        largest["connectedEdges"].append(report(f"pad-{len(largest['connectedEdges'])}"))
    for posted in (report("legit"), chain("deepest", MAX_DEPTH), largest):
        answer = await relay.post(REPORT_PATH, json=posted, headers=auth(DEV_KEY))
        assert answer.status == 202, await answer.text()
    sent_before = len(upstream.received)

    def reports() -> list[bytes]:
        return [r.body for r in upstream.received[sent_before:] if r.path == REPORT_PATH]

    await eventually(reports, "a report of the relay")
    mine = EdgeInstanceData.model_validate_json(reports()[0])  # what its upstream reads
    assert "legit" in [e.identifier for e in mine.connectedEdges]


async def test_a_report_carried_by_another_relay_does_not_replace_a_fresh_direct_one(
    tmp_path: Path,
) -> None:
    """Any key a relay accepts can make it carry a report under any identifier: the relay
    that has the identifier, reporting itself with a key of the same scope, stays listed as
    it reported itself until its own report goes stale."""
    db = cache_file(tmp_path, "NORMAL")
    await db.open()
    try:
        store = EdgeReportStore(db, ReportBounds(per_scope=10, total=10, direct_for=180.0))
        scope = ReportScope("development", ("default",))

        async def save(made: dict[str, Any], at: float) -> None:
            await store.save(scope, flatten(EdgeInstanceData.model_validate(made)), at)

        def apps() -> dict[str, tuple[str, str | None]]:
            return {r.identifier: (r.report.appName, r.via) for r in stored}

        await save(report("victim", appName="real"), 1000.0)
        await save(report("carrier", report("victim", appName="forged")), 1010.0)
        stored = await store.latest()
        assert apps()["victim"] == ("real", None)
        await save(report("carrier", report("victim", appName="forged")), 1181.0)  # stale
        stored = await store.latest()
        assert apps()["victim"] == ("forged", "carrier")
        await save(report("victim", appName="real"), 1190.0)  # its own report wins again
        stored = await store.latest()
        assert apps()["victim"] == ("real", None)
    finally:
        await db.close()
