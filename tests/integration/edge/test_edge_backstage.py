"""Unleash Edge's ``/internal-backstage/`` endpoints at a relay and in offline mode: their
shapes, never a secret, and each switched off by its ``disable_*_endpoint`` setting. And
offline mode's delta and stream, in process."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from conftest import DEV_KEY, PROD_KEY, MakeClient, auth, bulk, metric
from fake_upstream import Answer, FakeUpstream
from service import eventually
from streamkit import Events

from relay.app import build_app
from relay.settings import load_settings

pytestmark = pytest.mark.workers  # at one worker and at two (conftest.make_relay)

SECRETS = [k.split(".", 1)[1] for k in (DEV_KEY, PROD_KEY)]
ENDPOINTS = ("features", "tokens", "metricsbatch", "instancedata", "metrics")


async def get(client: Any, path: str) -> tuple[int, Any]:
    response = await client.get(f"/internal-backstage/{path}")
    text = await response.text()
    assert not any(secret in text for secret in SECRETS), text
    parsed = response.status == 200 and path != "metrics"
    return response.status, json.loads(text) if parsed else text


async def ready(client: Any) -> bool:
    return (await client.get("/internal-backstage/ready")).status == 200


async def test_relay_backstage_in_edges_shapes(
    make_relay: MakeClient, upstream: FakeUpstream
) -> None:
    validated = "default:development.validated-upstream-0123456789"
    upstream.valid_keys[validated] = "development"
    client = await make_relay(flush_interval=3600)
    await eventually(lambda: ready(client), "ready")
    assert (await client.get("/api/client/features", headers=auth(validated))).status == 200
    bad = await client.get("/api/client/features", headers=auth(DEV_KEY + "x"))
    assert bad.status == 401
    body = bulk([metric(feature="counted", yes=4, no=1)])
    posted = await client.post("/api/client/metrics/bulk", json=body, headers=auth(DEV_KEY))
    assert posted.status == 202

    status, features = await get(client, "features")
    assert status == 200 and sorted(features) == ["default:development", "default:production"]
    assert [f["name"] for f in features["default:development"]["features"]] == ["f1"]

    status, tokens = await get(client, "tokens")
    assert status == 200
    known = {(t["token"], t["status"]) for t in tokens["tokenValidationStatus"]}
    assert known == {
        ("default:development.****", "Trusted"),
        ("default:production.****", "Trusted"),
        ("default:development.****", "Validated"),
    }
    assert tokens["invalidTokenCount"] == 1
    refreshed = {r["token"]["environment"]: r for r in tokens["tokenRefreshes"]}
    assert refreshed["development"]["last_feature_count"] == 1
    assert refreshed["development"]["token"]["token"].endswith(".****")

    status, batch = await get(client, "metricsbatch")
    assert status == 200
    [counted] = [m for m in batch["metrics"] if m["key"]["feature_name"] == "counted"]
    assert counted["key"]["environment"] == "development"
    assert counted["bucket"]["toggles"]["counted"] == {"yes": 4, "no": 1, "variants": {}}

    status, instance = await get(client, "instancedata")
    assert status == 200
    assert instance["this_instance"]["identifier"] == "relay-under-test"
    assert instance["connected_instances"] == []


async def test_instancedata_is_made_at_most_every_few_seconds(make_relay: MakeClient) -> None:
    """No key is needed for it and it reads the whole buffer: callers within ``SHOWN_FOR``
    get the report made for the first of them (counts posted in between not yet in it)."""
    client = await make_relay(flush_interval=3600)
    await eventually(lambda: ready(client), "ready")
    first = (await get(client, "instancedata"))[1]["this_instance"]
    body = bulk([metric(feature=f"later-{i}", yes=1) for i in range(5)])
    posted = await client.post("/api/client/metrics/bulk", json=body, headers=auth(DEV_KEY))
    assert posted.status == 202
    again = (await get(client, "instancedata"))[1]["this_instance"]
    assert again == first


async def test_each_endpoint_switched_off(make_relay: MakeClient) -> None:
    client = await make_relay(
        **{f"disable_{n}_endpoint": True for n in ("features", "tokens", "instance_data")},
        disable_metrics_batch_endpoint=True,
        disable_metrics_endpoint=True,
    )
    for path in ENDPOINTS:
        assert (await get(client, path))[0] == 404, path
    assert (await client.get("/internal-backstage/health")).status == 200
    await eventually(lambda: ready(client), "ready")  # the configured keys' flags fetched


async def test_not_ready_in_edges_shape(make_relay: MakeClient, upstream: FakeUpstream) -> None:
    upstream.features_answer = Answer(503)  # the configured keys' flags never come
    client = await make_relay()
    edge = await client.get("/internal-backstage/ready")
    assert (edge.status, await edge.json()) == (
        503,
        {"error": "Edge is not ready to serve requests", "status": "NOTREADY"},
    )
    ours = await client.get("/ready")
    assert (ours.status, await ours.json()) == (503, {"status": "NOT_READY"})


async def test_offline_backstage(aiohttp_client: Any, tmp_path: Path) -> None:
    file = tmp_path / "flags.json"
    file.write_text(json.dumps({"on": {"enabled": True}}))
    settings = load_settings(
        {
            "mode": "offline",
            "workers": 1,
            "data_dir": tmp_path / "data",
            "bootstrap_file": file,
            "client_tokens": [DEV_KEY],
        }
    )
    client = await aiohttp_client(build_app(settings))
    status, features = await get(client, "features")
    assert status == 200
    assert [f["name"] for f in features["default:development"]["features"]] == ["on"]
    status, tokens = await get(client, "tokens")
    assert tokens["tokenValidationStatus"] == [
        {
            "token": "default:development.****",
            "type": "client",
            "environment": "development",
            "projects": ["default"],
            "status": "Trusted",
        }
    ]
    assert (await get(client, "metricsbatch"))[1] == {"applications": [], "metrics": []}


async def test_offline_delta_and_stream_follow_a_reload(
    aiohttp_client: Any, tmp_path: Path
) -> None:
    """The file's flags through the delta and the stream, a change of the file as an
    ``unleash-updated`` event and a delta from the revision held."""
    file = tmp_path / "flags.json"
    file.write_text(json.dumps({"on": {"enabled": True}}))
    settings = load_settings(
        {
            "mode": "offline",
            "workers": 1,
            "data_dir": tmp_path / "data",
            "bootstrap_file": file,
            "reload_interval": 0.05,
            "client_tokens": [DEV_KEY],
        }
    )
    client = await aiohttp_client(build_app(settings))
    hydration = await client.get("/api/client/delta", headers=auth(DEV_KEY))
    [event] = (await hydration.json())["events"]
    assert event["type"] == "hydration" and [f["name"] for f in event["features"]] == ["on"]
    held = hydration.headers["ETag"]
    headers = {**auth(DEV_KEY), "Unleash-Client-Spec": "5.2.0"}
    stream = Events(await client.get("/api/client/streaming", headers=headers))
    assert (await stream.next())["event"] == "unleash-connected"

    # An edit seconds later, in place at once: a revision is the file's time in seconds (two
    # versions within one second are told apart by a hydration).
    edit = tmp_path / "edit.json"
    edit.write_text(json.dumps({"on": {"enabled": True}, "added": {"enabled": False}}))
    later = file.stat().st_mtime + 2
    os.utime(edit, (later, later))
    edit.replace(file)
    updated = await stream.next()
    assert updated["event"] == "unleash-updated"
    names = [e["feature"]["name"] for e in updated["data"]["events"]]
    assert names == ["added"]
    delta = await client.get("/api/client/delta", headers={**auth(DEV_KEY), "If-None-Match": held})
    assert [e["feature"]["name"] for e in (await delta.json())["events"]] == ["added"]


async def test_metricsbatch_counts_carry_their_own_variants(make_relay: MakeClient) -> None:
    """A page of ``MAX_ROWS`` counts, each with its variants, read by their keys: not the
    oldest variants of the whole buffer (a scan and sort of it on each anonymous request,
    which cut off the variants of the page's later counts)."""
    client = await make_relay(flush_interval=3600)
    variants = {f"v{i:02d}": i + 1 for i in range(11)}
    metrics = [metric(feature=f"f{i:04d}", yes=1, no=0, variants=variants) for i in range(1000)]
    for start in range(0, 1000, 250):
        body = bulk(metrics[start : start + 250])
        posted = await client.post("/api/client/metrics/bulk", json=body, headers=auth(DEV_KEY))
        assert posted.status == 202, await posted.text()
    status, batch = await get(client, "metricsbatch")
    assert status == 200 and len(batch["metrics"]) == 1000
    for row in batch["metrics"]:
        [toggle] = row["bucket"]["toggles"].values()
        assert toggle["variants"] == variants, row["key"]
