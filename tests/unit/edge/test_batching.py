"""Pure batching: size caps, nothing lost, halves."""

from __future__ import annotations

import json

from relay.store import batching


def metric(i: int) -> dict[str, object]:
    return {
        "featureName": f"feature-{i}",
        "appName": "app",
        "environment": "development",
        "timestamp": "2026-01-01T00:00:00Z",
        "yes": i,
        "no": 0,
        "variants": {},
    }


def app(i: int) -> dict[str, object]:
    return {
        "appName": "app",
        "environment": "development",
        "instanceId": f"i{i}",
        "interval": 0,
        "started": "2026-01-01T00:00:00+00:00",
        "connectVia": [],
    }


def test_bodies_respect_the_cap_and_keep_every_entry() -> None:
    metrics = [metric(i) for i in range(1000)]
    apps = [app(i) for i in range(10)]
    bodies = list(batching.cut(apps, metrics, 4096))
    assert len(bodies) > 1
    assert all(len(body) <= 4096 for body, _ in bodies)
    decoded = [json.loads(body) for body, _ in bodies]
    assert [m for d in decoded for m in d["metrics"]] == metrics
    assert [a for d in decoded for a in d["applications"]] == apps
    assert [n for _, n in bodies] == [len(d["metrics"]) + len(d["applications"]) for d in decoded]
    assert decoded[0]["applications"][:1] == apps[:1]  # registrations first


def test_small_flush_is_one_body() -> None:
    bodies = list(batching.cut([app(1)], [metric(1), metric(2)], 95 * 1024))
    assert len(bodies) == 1
    assert bodies[0][1] == 3


def test_an_entry_larger_than_the_cap_travels_alone() -> None:
    big = {**metric(1), "variants": {f"v{i}": 1 for i in range(100)}}
    bodies = list(batching.cut([], [metric(0), big, metric(2)], 300))
    assert [json.loads(b)["metrics"] for b, _ in bodies] == [[metric(0)], [big], [metric(2)]]


def test_nothing_to_send_is_no_body() -> None:
    assert list(batching.cut([], [], 1000)) == []


def test_halves_split_entries_and_keep_them_all() -> None:
    body = batching.body([app(0)], [metric(i) for i in range(5)])
    parts = batching.halves(body)
    assert parts is not None
    (first, n1), (second, n2) = parts
    assert (n1, n2) == (3, 3)
    a, b = json.loads(first), json.loads(second)
    assert a["applications"] + b["applications"] == [app(0)]
    assert a["metrics"] + b["metrics"] == [metric(i) for i in range(5)]


def test_a_single_entry_cannot_be_halved() -> None:
    assert batching.halves(batching.body([], [metric(1)])) is None
