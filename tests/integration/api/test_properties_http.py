"""Property tests through the HTTP API: valid bodies add exactly their counts, a body
breaking any rule gets 400 naming the field and changes nothing, bytes that are not JSON get
400 and bodies not declared as JSON 415.

They run on the ``client`` fixture (the app on a real socket, over a fresh SQLite file and a
fresh PostgreSQL database: ``backend``). Hypothesis cannot drive an async test itself, so
each property is a plain ``@given`` function run in a worker thread, which sends its requests
to the test's event loop and waits for the answers.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import pytest
from bad_bodies import (
    NOT_JSON,
    Bad,
    bad_bulk_bodies,
    bad_sdk_bodies,
    bulk_of,
    valid_metric,
    with_timestamp,
)
from conftest import assert_error, post, raw
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from metric_bodies import (
    ENV,
    EPOCH,
    Entry,
    Sdk,
    Totals,
    add,
    bulk_bodies,
    encode,
    expected_totals,
    sdk_bodies,
    sdk_expected,
    utc_hour,
)

from relay.core.ingest_batch import Counts

T = TypeVar("T")
HTTP = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# --- requests from the worker thread, and the counts stored ---


def blocking(loop: asyncio.AbstractEventLoop) -> Callable[[Coroutine[Any, Any, T]], T]:
    """Run a coroutine on the test's event loop from the worker thread, and wait for it."""

    def run(coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, loop).result(timeout=60)

    return run


async def stored(client: Any, features: set[str]) -> Totals:
    """Every stored count of these features (31 days back), as reference totals."""
    totals: Totals = {}
    for feature in features:
        for row in await raw(client, feature, hours_back=744):
            assert row["featureName"] == feature
            hour = utc_hour(datetime.fromisoformat(row["timestamp"]))
            counts = Counts(row["yes"], row["no"], row["variants"])
            add(totals, (row["appName"], row["environment"], feature, hour), counts)
    return totals


def difference(after: Totals, before: Totals) -> Totals:
    out: Totals = {}
    for key, (yes, no, v) in after.items():
        old_yes, old_no, old_v = before.get(key, (0, 0, {}))
        variants = {n: c - old_v.get(n, 0) for n, c in v.items() if c != old_v.get(n, 0)}
        if (yes - old_yes, no - old_no, variants) != (0, 0, {}):
            out[key] = (yes - old_yes, no - old_no, variants)
    assert set(before) <= set(after), "stored counts disappeared"
    return out


# --- the properties ---


@pytest.mark.parametrize(
    "bad",
    [
        with_timestamp("9999-12-31T23:59:59-23:59"),
        with_timestamp("0001-01-01T00:00:00+00:01"),
        Bad(
            json.dumps(bulk_of([{**valid_metric(), "appName": "a\x00b"}])).encode(),
            "/body/metrics/0/appName",
        ),
    ],
    ids=["after-9999", "before-1", "nul"],
)
async def test_times_out_of_range_and_nul_get_400_naming_the_field(client: Any, bad: Bad) -> None:
    status, answer = await post(client, bad.body)
    assert status == 400, answer
    assert_error(answer, "BadDataError")
    assert [d["path"] for d in answer["details"]] == [bad.path]


async def test_valid_bulk_bodies_add_exactly_their_counts(client: Any) -> None:
    run = blocking(asyncio.get_running_loop())
    around = datetime.now(UTC)

    @HTTP
    @given(body=bulk_bodies(around, max_entries=8))
    @example(body=([Entry("{x}", "a", ENV, None, None, 1, 0, {})], []))  # braces: a 404 once
    def accepted_and_stored(body: tuple[list[Entry], list[dict[str, Any]]]) -> None:
        metrics, apps = body
        features = {e.feature for e in metrics}
        before = run(stored(client, features))
        hours = {utc_hour(datetime.now(UTC))}
        status, answer = run(post(client, encode(metrics, apps)))
        hours.add(utc_hour(datetime.now(UTC)))
        assert status == 202, answer
        delta = difference(run(stored(client, features)), before)
        # entries without a timestamp land in the hour the request was handled in
        assert delta in [expected_totals(metrics, ENV, now) for now in map(at_hour, hours)]

    await asyncio.to_thread(accepted_and_stored)


def at_hour(hour: int) -> datetime:
    return EPOCH + timedelta(seconds=hour)


async def test_valid_sdk_bodies_add_exactly_their_counts(client: Any) -> None:
    run = blocking(asyncio.get_running_loop())
    around = datetime.now(UTC)

    @HTTP
    @given(sdk=sdk_bodies(around))
    def accepted_and_stored(sdk: Sdk) -> None:
        body = sdk[0]
        toggles = body.get("bucket", {}).get("toggles", {})
        before = run(stored(client, set(toggles)))
        hours = {utc_hour(datetime.now(UTC))}
        status, answer = run(post(client, json.dumps(body).encode(), path="/api/client/metrics"))
        hours.add(utc_hour(datetime.now(UTC)))
        assert status == 202, answer
        delta = difference(run(stored(client, set(toggles))), before)
        assert delta in [sdk_expected(sdk, ENV, at_hour(h))[0] for h in hours]

    await asyncio.to_thread(accepted_and_stored)


@pytest.mark.parametrize(
    ("path", "bodies", "features"),
    [
        ("/api/client/metrics/bulk", bad_bulk_bodies(), {"f0", "f1", "f2"}),
        ("/api/client/metrics", bad_sdk_bodies(), {"t"}),
    ],
    ids=["bulk", "sdk"],
)
async def test_a_body_breaking_any_rule_gets_400_naming_the_field(
    client: Any, path: str, bodies: st.SearchStrategy[Bad], features: set[str]
) -> None:
    run = blocking(asyncio.get_running_loop())

    @settings(HTTP, max_examples=50)
    @given(bad=bodies)
    def refused(bad: Bad) -> None:
        status, answer = run(post(client, bad.body, path=path))
        assert status == 400, (status, answer)
        assert_error(answer, "BadDataError")
        paths = [d.get("path", "") for d in answer["details"]]
        assert any(p.startswith(bad.path) for p in paths), (bad.path, answer)

    await asyncio.to_thread(refused)
    assert await stored(client, features) == {}  # nothing of a refused body was applied


@pytest.mark.parametrize(
    "path", ["/api/client/metrics/bulk", "/api/client/metrics", "/api/client/register"]
)
async def test_bytes_that_are_not_json_get_400(client: Any, path: str) -> None:
    run = blocking(asyncio.get_running_loop())

    @HTTP
    @given(data=NOT_JSON)
    def refused(data: bytes) -> None:
        status, answer = run(post(client, data, path=path))
        assert status == 400, (status, answer)
        assert_error(answer, "BadDataError")
        assert [d["path"] for d in answer["details"]] == ["/body"]

    await asyncio.to_thread(refused)


async def test_bodies_that_are_not_declared_json_get_415(client: Any) -> None:
    run = blocking(asyncio.get_running_loop())
    content_types = st.sampled_from(
        [
            "text/plain",
            "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=x",
            "application/xml",
            "application/octet-stream",
            "text/json",
        ]
    )

    @HTTP
    @given(content_type=content_types, data=st.binary(max_size=50))
    def refused(content_type: str, data: bytes) -> None:
        status, answer = run(post(client, data, headers={"Content-Type": content_type}))
        assert status == 415, (status, answer)
        assert_error(answer, "ContentTypeError")

    await asyncio.to_thread(refused)
