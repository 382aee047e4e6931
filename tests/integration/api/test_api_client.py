"""POST /api/client/metrics/bulk, /api/client/metrics and /api/client/register (standalone)."""

from __future__ import annotations

import asyncio
import io
import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from conftest import ADMIN_KEY, DEV_KEY, PROD_KEY, assert_error, auth, bulk, metric, raw


def hour_iso(moment: datetime) -> str:
    return moment.replace(minute=0, second=0, microsecond=0).isoformat().replace("+00:00", "Z")


NOW = datetime.now(UTC)


async def post_bulk(client: Any, body: Any, key: str = DEV_KEY, **headers: str) -> Any:
    return await client.post(
        "/api/client/metrics/bulk", json=body, headers={**auth(key), **headers}
    )


async def test_accepted_counts_are_summed_per_hour_with_variants(client: Any) -> None:
    ts = NOW.isoformat()
    body = bulk(
        [
            metric(yes=3, no=1, variants={"blue": 2}, timestamp=ts),
            metric(yes=2, no=0, variants={"blue": 1, "red": 4}, timestamp=ts),
        ]
    )
    first = await post_bulk(client, body)
    assert first.status == 202
    assert await first.read() == b""
    assert (await post_bulk(client, body)).status == 202
    rows = await raw(client, "f1")
    assert rows == [
        {
            "featureName": "f1",
            "appName": "app",
            "environment": "development",
            "timestamp": hour_iso(NOW),
            "yes": 10,
            "no": 2,
            "variants": {"blue": 6, "red": 8},
        }
    ]


async def test_timestamps_rfc3339_offsets_and_nanoseconds_map_to_utc_hours(client: Any) -> None:
    hour = NOW.replace(minute=0, second=0, microsecond=0)
    inside = hour + timedelta(minutes=10)
    plus_two = inside.astimezone(timezone(timedelta(hours=2)))
    body = bulk(
        [
            metric(yes=1, timestamp=inside.strftime("%Y-%m-%dT%H:%M:%S") + ".436106699Z"),
            metric(yes=1, timestamp=plus_two.isoformat()),  # the same hour, written in +02:00
            metric(yes=1, timestamp=inside.strftime("%Y-%m-%dT%H:%M:%S")),  # no offset: UTC
            metric(yes=1, timestamp=(hour - timedelta(minutes=1)).isoformat()),
            # Unleash's dateSchema also takes a number: epoch seconds, or milliseconds
            metric(yes=1, timestamp=int(inside.timestamp())),
            metric(yes=1, timestamp=int(inside.timestamp() * 1000)),
        ]
    )
    assert (await post_bulk(client, body)).status == 202
    rows = await raw(client, "f1")
    assert [(r["timestamp"], r["yes"]) for r in rows] == [
        (hour_iso(hour - timedelta(hours=1)), 1),
        (hour_iso(hour), 5),
    ]


async def test_missing_timestamp_means_now(client: Any) -> None:
    assert (await post_bulk(client, bulk([metric(yes=1)]))).status == 202
    rows = await raw(client, "f1")
    assert [r["timestamp"] for r in rows] == [hour_iso(datetime.now(UTC))]


async def test_entries_for_other_environments_are_dropped_silently(client: Any) -> None:
    body = bulk([metric(yes=1), metric(env="production", yes=5)])
    assert (await post_bulk(client, body)).status == 202
    assert [(r["environment"], r["yes"]) for r in await raw(client, "f1")] == [("development", 1)]
    assert (await post_bulk(client, body, key=PROD_KEY)).status == 202
    rows = {(r["environment"], r["yes"]) for r in await raw(client, "f1")}
    assert rows == {("development", 1), ("production", 5)}


async def test_optional_fields_may_be_left_out(client: Any) -> None:
    body = bulk(
        [{"featureName": "f1", "appName": "app", "environment": "development", "yes": 1}],
        [{"appName": "app", "environment": "development", "instanceId": "i1"}],
    )
    body["impactMetrics"] = []  # newer peers send extra keys; they are ignored
    assert (await post_bulk(client, body)).status == 202


async def test_validation_error_names_every_bad_field(client: Any) -> None:
    body = bulk(
        [metric(yes=1.5, no=True), metric(variants={"v": "3"}), {"appName": "a"}],
        [{"appName": "a", "environment": "development"}],
    )
    response = await post_bulk(client, body)
    assert response.status == 400
    error = await response.json()
    assert_error(error, "BadDataError")
    paths = {d["path"] for d in error["details"]}
    assert {
        "/body/metrics/0/yes",
        "/body/metrics/0/no",
        "/body/metrics/1/variants/v",
        "/body/metrics/2/featureName",
        "/body/metrics/2/environment",
        "/body/applications/0/instanceId",
    } <= paths
    assert error["message"].startswith("Request validation failed")


async def test_required_top_level_arrays(client: Any) -> None:
    response = await post_bulk(client, {"applications": []})
    assert response.status == 400
    error = await response.json()
    assert_error(error, "BadDataError")
    assert [d["path"] for d in error["details"]] == ["/body/metrics"]


async def test_negative_counts_and_long_names_are_refused(client: Any) -> None:
    response = await post_bulk(client, bulk([metric(yes=-1), metric(feature="x" * 256, yes=1)]))
    assert response.status == 400
    paths = {d["path"] for d in (await response.json())["details"]}
    assert paths == {"/body/metrics/0/yes", "/body/metrics/1/featureName"}


async def test_malformed_json_is_a_400_not_a_500(client: Any) -> None:
    for raw_body in (b"{", b"", b"[]", b"null", b'{"applications": 1, "metrics": "x"}', b"\xff"):
        response = await client.post(
            "/api/client/metrics/bulk",
            data=raw_body,
            headers={**auth(DEV_KEY), "Content-Type": "application/json"},
        )
        assert response.status == 400, raw_body
        assert_error(await response.json(), "BadDataError")


async def test_non_json_content_type_is_415(client: Any) -> None:
    response = await client.post(
        "/api/client/metrics/bulk",
        data=json.dumps(bulk()),
        headers={**auth(DEV_KEY), "Content-Type": "text/plain"},
    )
    assert response.status == 415
    assert_error(await response.json(), "ContentTypeError")


async def test_body_over_one_mebibyte_is_413(client: Any) -> None:
    big = json.dumps(bulk([metric(feature="f" * 200, yes=1)] * 6000)).encode()
    assert len(big) > 1024 * 1024
    response = await client.post(
        "/api/client/metrics/bulk",
        data=io.BytesIO(big),
        headers={**auth(DEV_KEY), "Content-Type": "application/json"},
    )
    assert response.status == 413
    assert_error(await response.json(), "ContentTooLargeError")


async def test_missing_or_unknown_key_is_401(client: Any) -> None:
    for headers in ({}, auth("default:development.unknown-secret"), auth("Bearer ")):
        response = await client.post("/api/client/metrics/bulk", json=bulk(), headers=headers)
        assert response.status == 401
        assert_error(await response.json(), "AuthenticationRequired")


async def test_bearer_prefix_is_accepted(client: Any) -> None:
    assert (await post_bulk(client, bulk(), key=f"Bearer {DEV_KEY}")).status == 202


async def test_admin_key_on_client_endpoint_is_403(client: Any) -> None:
    response = await post_bulk(client, bulk([metric(yes=1)]), key=ADMIN_KEY)
    assert response.status == 403
    error = await response.json()
    assert_error(error, "NoAccessError")
    assert "expected a different token type" in error["message"]


async def test_idempotency_key_replay_is_accepted_and_not_applied_twice(client: Any) -> None:
    body = bulk([metric(yes=2, no=1)])
    for _ in range(3):
        response = await post_bulk(client, body, **{"Idempotency-Key": "batch-1"})
        assert response.status == 202
    assert (await post_bulk(client, body, **{"Idempotency-Key": "batch-2"})).status == 202
    assert [(r["yes"], r["no"]) for r in await raw(client, "f1")] == [(4, 2)]
    metrics = await (await client.get("/internal-backstage/metrics")).text()
    assert "relay_idempotent_replays_total" in metrics


async def test_concurrent_replays_of_one_key_apply_once(client: Any) -> None:
    body = bulk([metric(yes=1)])
    responses = await asyncio.gather(
        *(post_bulk(client, body, **{"Idempotency-Key": "same"}) for _ in range(20))
    )
    assert {r.status for r in responses} == {202}
    assert [r["yes"] for r in await raw(client, "f1")] == [1]


async def test_concurrent_posts_are_all_counted(client: Any) -> None:
    body = bulk([metric(yes=1, no=2), metric(feature="f2", yes=3)])
    responses = await asyncio.gather(*(post_bulk(client, body) for _ in range(50)))
    assert {r.status for r in responses} == {202}
    assert [(r["yes"], r["no"]) for r in await raw(client, "f1")] == [(50, 100)]
    assert [r["yes"] for r in await raw(client, "f2")] == [150]


async def test_registrations_are_stored_latest_wins_with_connect_via(client: Any) -> None:
    app = {
        "appName": "shop",
        "environment": "development",
        "instanceId": "i1",
        "sdkVersion": "unleash-client-node:6.12.0",
        "strategies": ["default"],
        "interval": 15,
        "started": "2026-01-01T00:00:00Z",
        "connectVia": [{"appName": "edge", "instanceId": "e1"}],
    }
    assert (await post_bulk(client, bulk(applications=[app]))).status == 202
    newer = {
        **app,
        "sdkVersion": "unleash-client-node:6.12.1",
        "connectVia": [
            {"appName": "edge", "instanceId": "e1"},
            {"appName": "relay", "instanceId": "r1"},
        ],
    }
    other_env = {**app, "environment": "production", "instanceId": "i2"}
    assert (await post_bulk(client, bulk(applications=[newer, other_env]))).status == 202
    response = await client.get("/api/admin/metrics/applications/shop", headers=auth(ADMIN_KEY))
    assert response.status == 200
    body = await response.json()
    assert body["appName"] == "shop"
    [instance] = body["instances"]
    assert instance["instanceId"] == "i1"
    assert instance["sdkVersion"] == "unleash-client-node:6.12.1"
    assert instance["connectVia"] == newer["connectVia"]
    assert instance["strategies"] == ["default"] and instance["interval"] == 15
    assert instance["started"] == "2026-01-01T00:00:00Z"
    assert instance["firstSeen"] <= instance["lastSeen"]
    listing = await (
        await client.get("/api/admin/metrics/applications", headers=auth(ADMIN_KEY))
    ).json()
    assert [a["appName"] for a in listing["applications"]] == ["shop"]
    missing = await client.get("/api/admin/metrics/applications/nope", headers=auth(ADMIN_KEY))
    assert missing.status == 404
    assert_error(await missing.json(), "NotFoundError")


async def test_sdk_metrics_format_uses_the_key_environment(client: Any) -> None:
    start = NOW - timedelta(seconds=5)
    body = {
        "appName": "svc",
        "instanceId": "i1",
        "connectionId": "c1",
        "bucket": {
            "start": start.isoformat(),
            "stop": NOW.isoformat(),
            "toggles": {"f1": {"yes": 4, "no": 1, "variants": {"a": 2}}, "f2": {"yes": 0, "no": 0}},
        },
    }
    response = await client.post("/api/client/metrics", json=body, headers=auth(DEV_KEY))
    assert response.status == 202
    rows = await raw(client, "f1")
    assert [(r["appName"], r["environment"], r["yes"], r["no"], r["variants"]) for r in rows] == [
        ("svc", "development", 4, 1, {"a": 2})
    ]
    assert await raw(client, "f2") == []  # yes = no = 0 carries nothing, as in Unleash
    null_bucket = {"appName": "svc", "instanceId": "i1", "bucket": None}
    response = await client.post("/api/client/metrics", json=null_bucket, headers=auth(DEV_KEY))
    assert response.status == 202


async def test_sdk_register_format(client: Any) -> None:
    body = {
        "appName": "svc",
        "instanceId": "i9",
        "connectionId": "c",
        "sdkVersion": "unleash-client-python:6.9.1",
        "strategies": ["default", "flexibleRollout"],
        "started": "2026-01-01T04:49:31.436106699Z",
        "interval": 15,
        "platformName": "CPython",
        "specVersion": "5.2.0",
    }
    response = await client.post(
        "/api/client/register",
        json=body,
        headers={**auth(DEV_KEY), "unleash-interval": "undefined"},
    )
    assert response.status == 202
    app = await (
        await client.get("/api/admin/metrics/applications/svc", headers=auth(ADMIN_KEY))
    ).json()
    [instance] = app["instances"]
    assert instance["environment"] == "development"
    assert instance["sdkVersion"] == "unleash-client-python:6.9.1"
    assert instance["connectVia"] == []


@pytest.mark.parametrize(
    ("started", "read_back"),
    [
        ("0001-01-01T00:00:00Z", "0001-01-01T00:00:00Z"),
        ("9999-12-31T23:59:59.999999Z", "9999-12-31T23:59:59.999969Z"),  # a float's precision
    ],
)
async def test_registrations_started_at_either_end_of_rfc3339_are_kept(
    client: Any, started: str, read_back: str
) -> None:
    """On today's main the first day of year 1 and the last of 9999 are refused (400)."""
    body = {"appName": "svc", "instanceId": "i1", "started": started, "interval": 15}
    response = await client.post("/api/client/register", json=body, headers=auth(DEV_KEY))
    assert response.status == 202, await response.text()
    path = "/api/admin/metrics/applications/svc"
    [instance] = (await (await client.get(path, headers=auth(ADMIN_KEY))).json())["instances"]
    assert instance["started"] == read_back


async def test_header_bytes_that_are_not_utf8_are_4xx_not_500(client: Any) -> None:
    """Raw socket: aiohttp's client would refuse to send such headers."""
    port = client.server.port
    for header in (b"Authorization: default:development.\xff\xfe", b"Idempotency-Key: \xff\xfe"):
        body = json.dumps(bulk()).encode()
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        auth_line = (
            b"" if header.startswith(b"Authorization") else f"Authorization: {DEV_KEY}\r\n".encode()
        )
        writer.write(
            b"POST /api/client/metrics/bulk HTTP/1.1\r\nHost: x\r\n"
            + b"Content-Type: application/json\r\n"
            + auth_line
            + header
            + b"\r\n"
            + f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
            + body
        )
        await writer.drain()
        status_line = await reader.readline()
        writer.close()
        await writer.wait_closed()
        status = int(status_line.split()[1])
        assert status in (400, 401), (header, status_line)


async def test_long_or_odd_idempotency_keys_are_400(client: Any) -> None:
    for key in ("k" * 256, "has space"):
        response = await post_bulk(client, bulk(), **{"Idempotency-Key": key})
        assert response.status == 400
        error = await response.json()
        assert_error(error, "BadDataError")
        assert error["details"][0]["path"] == "/header/Idempotency-Key"
