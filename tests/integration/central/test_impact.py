"""Impact metrics (``impactMetrics``) at the standalone, on SQLite and PostgreSQL: kept per
series, served at ``GET /api/admin/metrics/impact``; an invalid list is dropped and counted,
the rest of its body kept; and the relay's batching of them."""

from __future__ import annotations

import json
from typing import Any

from conftest import ADMIN_KEY, DEV_KEY, MakeClient, auth, bulk, metric, raw
from fake_upstream import FakeUpstream
from impactkit import LABELS, impact, series
from service import sample

from relay.store import batching
from relay.wire.client import BulkMetrics, ClientMetrics
from relay.wire.impact import MAX_IMPACT_BUCKETS, MAX_IMPACT_LABELS, MAX_IMPACT_VALUE


async def test_both_endpoints_fold_series_and_serve_them(client: Any) -> None:
    body = {**bulk([metric(yes=1)]), "impactMetrics": impact(2, 5, [0.3])}
    response = await client.post("/api/client/metrics/bulk", json=body, headers=auth(DEV_KEY))
    assert response.status == 202
    sdk_labels = {k: v for k, v in LABELS.items() if k != "appName"}  # appName from the body
    sdk = {"appName": "shop", "impactMetrics": impact(3, 7, [0.05, 2])}
    for m in sdk["impactMetrics"]:
        m["samples"][0]["labels"] = sdk_labels
    response = await client.post("/api/client/metrics", json=sdk, headers=auth(DEV_KEY))
    assert response.status == 202
    found = await series(client, "?appName=shop&environment=development")
    assert found["checkouts"]["value"] == 5
    assert found["checkouts"]["labels"] == LABELS
    assert found["cart"]["value"] == 7
    latency = found["latency"]
    assert latency["count"] == 3 and abs(latency["sum"] - 2.35) < 1e-9
    assert [(b["le"], b["count"]) for b in latency["buckets"]] == [
        (0.1, 1),
        (0.5, 2),
        (1, 2),
        ("+Inf", 3),
    ]
    assert await series(client, "?appName=other") == {}
    # a histogram whose bounds changed starts again from the newest sample
    changed = impact(0, 0, [0.2])[2]
    changed["samples"][0]["buckets"] = [{"le": 0.25, "count": 1}, {"le": "+Inf", "count": 1}]
    body = {**bulk([]), "impactMetrics": [changed]}
    assert (
        await client.post("/api/client/metrics/bulk", json=body, headers=auth(DEV_KEY))
    ).status == 202
    latency = (await series(client))["latency"]
    assert latency["count"] == 1 and [b["le"] for b in latency["buckets"]] == [0.25, "+Inf"]


async def test_the_read_is_paged(client: Any) -> None:
    samples = [{"labels": {**LABELS, "n": str(i)}, "value": 1} for i in range(5)]
    body = {
        **bulk([]),
        "impactMetrics": [{"name": "c", "help": "", "type": "counter", "samples": samples}],
    }
    assert (
        await client.post("/api/client/metrics/bulk", json=body, headers=auth(DEV_KEY))
    ).status == 202
    seen, page = [], "/api/admin/metrics/impact?limit=2"
    while page:
        answer = await (await client.get(page, headers=auth(ADMIN_KEY))).json()
        seen += [s["labels"]["n"] for s in answer["series"]]
        page = answer["next"]
    assert sorted(seen) == ["0", "1", "2", "3", "4"]
    for bad in ("limit=0", "limit=x", "after=nonsense"):
        response = await client.get(f"/api/admin/metrics/impact?{bad}", headers=auth(ADMIN_KEY))
        assert response.status == 400
    assert (await client.get("/api/admin/metrics/impact", headers=auth(DEV_KEY))).status == 403


async def test_an_invalid_list_is_dropped_and_counted_and_the_counts_kept(client: Any) -> None:
    """Unleash's choice: a 4xx would make the Node SDK stop sending metrics for good."""
    bad_lists: list[Any] = [
        "not a list",
        [{"name": "c", "type": "made-up", "samples": []}],
        [{"name": "c", "type": "counter", "samples": [{"value": -1}]}],
        [{"name": "c", "type": "gauge", "samples": [{"value": "NaN"}]}],
        [{"name": "h", "type": "histogram", "samples": [{"count": 1}]}],
        [{"name": "c", "type": "counter", "samples": [{"value": 1}] * 1001}],
    ]
    before = await invalid(client)
    for bad in bad_lists:
        body = {**bulk([metric(yes=1)]), "impactMetrics": bad}
        response = await client.post("/api/client/metrics/bulk", json=body, headers=auth(DEV_KEY))
        assert response.status == 202
    sdk = {"appName": "shop", "bucket": None, "impactMetrics": bad_lists[0]}
    assert (await client.post("/api/client/metrics", json=sdk, headers=auth(DEV_KEY))).status == 202
    assert await invalid(client) == before + len(bad_lists) + 1
    assert sum(row["yes"] for row in await raw(client, "f1")) == len(bad_lists)
    assert await series(client) == {}


async def invalid(client: Any) -> float:
    text = await (await client.get("/internal-backstage/metrics")).text()
    return sample(text, "relay_impact_metrics_invalid_total")


def test_batches_carry_impact_within_limits_and_halves_keep_every_sample() -> None:
    entries = [
        {
            "name": f"m{i % 150}",
            "help": "",
            "type": "counter",
            "samples": [{"labels": {"n": str(i)}, "value": 1}],
        }
        for i in range(2500)
    ]
    bodies = list(batching.cut([], [], 10**9, entries))
    assert sum(n for _, n in bodies) == 2500
    for payload, _ in bodies:
        parsed = BulkMetrics.model_validate_json(payload)
        assert parsed.impactInvalid is None and parsed.impactMetrics is not None
    halves = batching.halves(bodies[0][0])
    assert halves is not None
    total = sum(len(m["samples"]) for part, _ in halves for m in json.loads(part)["impactMetrics"])
    assert total == bodies[0][1]
    assert b"impactMetrics" not in batching.body([], [])  # for an upstream that knows none


async def test_what_a_relay_sends_on_is_what_an_upstream_with_the_same_rules_takes(
    make_relay: MakeClient, upstream: FakeUpstream
) -> None:
    """At every bound, twice: the relay adds appName and +Inf, and sums; none of it may make
    a series an upstream refuses (it would set the whole list aside, other apps' with it)."""
    labels = {f"l{i:02}": "v" for i in range(MAX_IMPACT_LABELS)}  # appName added to them
    bounds = [{"le": float(i), "count": MAX_IMPACT_VALUE} for i in range(MAX_IMPACT_BUCKETS)]
    top = MAX_IMPACT_VALUE
    observed = {"labels": labels, "count": top, "sum": top, "buckets": bounds}  # no +Inf
    hostile = [
        {"name": "h", "help": "", "type": "histogram", "samples": [observed]},
        {"name": "c", "help": "", "type": "counter", "samples": [{"labels": labels, "value": top}]},
    ]
    relay = await make_relay(flush_interval=3600)
    for _ in range(2):
        body = {"appName": "shop", "impactMetrics": hostile}
        response = await relay.post("/api/client/metrics", json=body, headers=auth(DEV_KEY))
        assert response.status == 202
    await relay.close()
    [sent] = upstream.accepted_bulks()
    parsed = BulkMetrics.model_validate_json(sent.body)
    assert parsed.impactInvalid is None
    assert {m.name: m.samples[0].value or m.samples[0].count for m in parsed.impact} == {
        "h": top,  # saturated, not 2e15
        "c": top,
    }


def test_label_values_and_sample_counts_are_bounded() -> None:
    """A label value is stored in an index: a number is a bounded one (not a bool, not
    thousands of digits); a body carries at most MAX_IMPACT_SAMPLES samples in all."""

    def body(labels: dict[str, Any], metrics: int = 1, samples: int = 1) -> str:
        one = {"labels": labels, "value": 1}
        many = [
            {"name": f"c{m}", "type": "counter", "samples": [one] * samples} for m in range(metrics)
        ]
        return json.dumps({"appName": "a", "impactMetrics": many})

    assert ClientMetrics.model_validate_json(body({"n": 7, "x": 0.5})).impactInvalid is None
    for labels in ({"n": True}, {"n": 10**20}, {"n": 1e300}):
        invalid = ClientMetrics.model_validate_json(body(labels)).impactInvalid
        assert invalid is not None and invalid[1].startswith("/impactMetrics/0/samples/0/labels")
    assert ClientMetrics.model_validate_json(body({}, 2, 500)).impactInvalid is None
    assert ClientMetrics.model_validate_json(body({}, 3, 400)).impactInvalid is not None
