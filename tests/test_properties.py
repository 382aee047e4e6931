"""Property tests of the request models and the aggregation, then of the same through HTTP.

Bodies are generated within the documented limits (README, "Limits"): names of 1..255
characters of any Unicode, counts 0..2^31-1, variants, timestamps with any offset (or none,
read as UTC), nanosecond fractions. Each body is serialised to JSON bytes and parsed by the
model, as the service does, and checked against a small reference computed here.

The HTTP properties run on the ``client`` fixture (the app on a real socket, a fresh SQLite
file per test). Hypothesis cannot drive an async test itself, so each property is a plain
``@given`` function run in a worker thread, which sends its requests to the test's event loop
and waits for the answers.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from typing import Any, TypeVar

import pytest
from conftest import DEV_KEY, assert_error, auth, raw
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from relay.core.convert import from_bulk, from_client_metrics
from relay.core.domain import Counts, MetricKey, RegistrationKey
from relay.core.errors import InvalidInput
from relay.wire.client import BulkMetrics, ClientMetrics
from relay.wire.common import MAX_COUNT, MAX_NAME, MAX_VARIANTS

T = TypeVar("T")
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
ENV = "development"  # the environment of DEV_KEY
PURE = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
HTTP = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# --- strategies: valid bodies ---

# Any Unicode scalar value (JSON cannot carry lone surrogates), control characters included,
# but NUL: no name may hold it (PostgreSQL text cannot), which BAD_NAMES covers.
ANY_TEXT = st.characters(codec="utf-8", exclude_characters="\x00")
any_name = st.text(ANY_TEXT, min_size=1, max_size=MAX_NAME)
# A few common names so that entries collide on the same key and must be summed.
names = st.one_of(st.sampled_from(["f1", "f2", "app", "é/ü ?#%", "{x}", ".."]), any_name)
environments = st.one_of(st.sampled_from([ENV, "production"]), any_name)
counts = st.one_of(st.just(0), st.integers(0, 3), st.integers(0, MAX_COUNT))
variants = st.dictionaries(
    st.one_of(st.sampled_from(["blue", "red"]), any_name), counts, max_size=4
)
offsets = st.integers(-(24 * 60 - 1), 24 * 60 - 1).map(lambda m: timezone(timedelta(minutes=m)))


def rfc3339(moment: datetime, nanos: int | None = None) -> str:
    """``moment`` as RFC 3339 (``Z`` for UTC), with nine fraction digits when ``nanos``."""
    text = moment.replace(microsecond=0).isoformat()
    date_time, offset = text[:19], text[19:]
    if nanos is not None:
        fraction = f".{moment.microsecond:06d}{nanos:03d}"
    else:
        fraction = f".{moment.microsecond:06d}" if moment.microsecond else ""
    return f"{date_time}{fraction}{'Z' if offset == '+00:00' else offset}"


@st.composite
def timestamps(draw: st.DrawFn, around: datetime | None = None) -> datetime | None:
    """None, or an instant written with any offset (or none, meaning UTC). Often one of a few
    instants, so that entries meet in one hour written in different offsets. Within 700 h of
    ``around`` when given, so that the HTTP properties can read it back (``hoursBack`` is at
    most 744)."""
    if draw(st.booleans()):
        return None
    base = around or datetime(2024, 2, 29, 23, 30, tzinfo=UTC)
    if around is None:
        anywhere = st.datetimes(datetime(1, 1, 3), datetime(9999, 12, 29), timezones=st.just(UTC))
    else:
        shift = st.integers(-700 * 3600, 48 * 3600).map(lambda s: timedelta(seconds=s))
        anywhere = shift.map(lambda delta: base + delta)
    nearby = st.sampled_from([0, 29 * 60, 31 * 60, -5 * 3600]).map(
        lambda s: base + timedelta(seconds=s)
    )
    instant: datetime = draw(st.one_of(nearby, anywhere))
    if draw(st.booleans()):
        return instant.replace(tzinfo=None)  # no offset: read as UTC
    return instant.astimezone(draw(offsets))


@dataclass(frozen=True)
class Entry:
    feature: str
    app: str
    environment: str
    timestamp: datetime | None
    wire_timestamp: str | None
    yes: int
    no: int
    variants: dict[str, int]
    explicit: bool = True  # whether zero counts and empty variants are written out

    def json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "featureName": self.feature,
            "appName": self.app,
            "environment": self.environment,
        }
        if self.wire_timestamp is not None:
            out["timestamp"] = self.wire_timestamp
        # yes, no and variants may be left out: they default to 0 and {}
        for name, value in (("yes", self.yes), ("no", self.no), ("variants", self.variants)):
            if value or self.explicit:
                out[name] = value
        return out

    @property
    def empty(self) -> bool:
        return self.yes == 0 and self.no == 0 and not any(self.variants.values())


@st.composite
def entries(draw: st.DrawFn, around: datetime | None = None) -> Entry:
    moment = draw(timestamps(around))
    wire = None if moment is None else rfc3339(moment, draw(st.none() | st.integers(0, 999)))
    return Entry(
        draw(names),
        draw(names),
        draw(environments),
        moment,
        wire,
        draw(counts),
        draw(counts),
        draw(variants),
        draw(st.booleans()),
    )


@st.composite
def applications(draw: st.DrawFn) -> dict[str, Any]:
    app: dict[str, Any] = {
        "appName": draw(names),
        "environment": draw(environments),
        "instanceId": draw(st.sampled_from(["i-1", "i-2"]) | any_name),
    }
    optional = {
        "connectVia": st.lists(
            st.fixed_dictionaries({"appName": any_name, "instanceId": any_name}), max_size=3
        ),
        "interval": st.integers(0, 10**6) | st.floats(0, 1e12),
        "started": timestamps().filter(lambda t: t is not None).map(lambda t: rfc3339(t, None)),
        "strategies": st.lists(st.text(ANY_TEXT, max_size=MAX_NAME), max_size=3),
        "sdkVersion": st.text(ANY_TEXT, max_size=MAX_NAME),
    }
    for key, strategy in optional.items():
        if draw(st.booleans()):
            app[key] = draw(strategy)
    return app


@st.composite
def bulk_bodies(
    draw: st.DrawFn, around: datetime | None = None, max_entries: int = 12
) -> tuple[list[Entry], list[dict[str, Any]]]:
    """Metric entries, some of them repeated (their counts must add up), and registrations."""
    metrics = draw(st.lists(entries(around), max_size=max_entries))
    if metrics:
        metrics += draw(st.lists(st.sampled_from(metrics), max_size=3))
        metrics = draw(st.permutations(metrics))
    return metrics, draw(st.lists(applications(), max_size=3))


def encode(metrics: list[Entry], apps: list[dict[str, Any]]) -> bytes:
    return json.dumps({"applications": apps, "metrics": [e.json() for e in metrics]}).encode()


# --- the reference: what a body must add up to ---


def utc_hour(moment: datetime) -> int:
    """Epoch seconds of the UTC hour holding ``moment`` (no offset: UTC)."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    utc = moment.astimezone(UTC)
    return int((utc.replace(minute=0, second=0, microsecond=0) - EPOCH).total_seconds())


Totals = dict[tuple[str, str, str, int], tuple[int, int, dict[str, int]]]


def add(totals: Totals, key: tuple[str, str, str, int], entry: Entry | Counts) -> None:
    yes, no, v = totals.get(key, (0, 0, {}))
    merged = dict(v)
    for name, count in entry.variants.items():
        if count:
            merged[name] = merged.get(name, 0) + count
    totals[key] = (yes + entry.yes, no + entry.no, merged)


def expected_totals(metrics: list[Entry], environment: str, now: datetime) -> Totals:
    totals: Totals = {}
    for e in metrics:
        if e.environment == environment and not e.empty:
            hour = utc_hour(e.timestamp or now)
            add(totals, (e.app, environment, e.feature, hour), e)
    return totals


def batch_totals(counts: dict[MetricKey, Counts]) -> Totals:
    totals: Totals = {}
    for key, value in counts.items():
        add(totals, tuple(key), value)  # type: ignore[arg-type]
    return totals


# --- pure properties: models and aggregation ---


# the server's clock: any time it can run at (years 1..9999 in UTC, ends excluded)
CLOCK = st.datetimes(datetime(1, 1, 3), datetime(9999, 12, 29), timezones=st.just(UTC))


@PURE
@given(body=bulk_bodies(), environment=environments, now=CLOCK)
def test_bulk_conversion_preserves_totals_and_counts_what_it_drops(
    body: tuple[list[Entry], list[dict[str, Any]]], environment: str, now: datetime
) -> None:
    metrics, apps = body
    parsed = BulkMetrics.model_validate_json(encode(metrics, apps))
    result = from_bulk(parsed, environment, now)

    assert batch_totals(result.batch.counts) == expected_totals(metrics, environment, now)
    for field in ("yes", "no"):
        kept = sum(getattr(c, field) for c in result.batch.counts.values())
        sent = sum(getattr(e, field) for e in metrics if e.environment == environment)
        assert kept == sent  # empty entries carry nothing: dropping them loses no count
    other = sum(e.environment != environment for e in metrics)
    empty = sum(e.environment == environment and e.empty for e in metrics)
    assert result.dropped == Counter({"environment": other, "empty": empty})
    assert result.accepted == len(metrics) - other - empty
    assert all(key.environment == environment for key in result.batch.counts)
    assert all(c.yes or c.no or any(c.variants.values()) for c in result.batch.counts.values())
    # registrations: those for the key's environment, one per instance, the last one wins
    last = {(a["appName"], a["instanceId"]): a for a in apps if a["environment"] == environment}
    registered = result.batch.registrations
    assert {(k.app_name, k.instance_id) for k in registered} == set(last)
    for (app_name, instance), app in last.items():
        registration = registered[RegistrationKey(app_name, environment, instance)]
        assert registration.sdk_version == app.get("sdkVersion")
        assert list(registration.strategies) == app.get("strategies", [])


@PURE
@given(body=bulk_bodies(), data=st.data())
def test_bulk_conversion_does_not_depend_on_entry_order(
    body: tuple[list[Entry], list[dict[str, Any]]], data: st.DataObject
) -> None:
    metrics, apps = body
    shuffled = data.draw(st.permutations(metrics))
    now = datetime(2024, 2, 29, 23, 59, 59, tzinfo=UTC)
    first = from_bulk(BulkMetrics.model_validate_json(encode(metrics, apps)), ENV, now)
    second = from_bulk(BulkMetrics.model_validate_json(encode(shuffled, apps)), ENV, now)
    assert first.batch.counts == second.batch.counts
    assert first.dropped == second.dropped
    assert first.accepted == second.accepted


Sdk = tuple[dict[str, Any], datetime | None]  # a body, and its bucket's start as a datetime


@st.composite
def sdk_bodies(draw: st.DrawFn, around: datetime | None = None) -> Sdk:
    body: dict[str, Any] = {"appName": draw(names)}
    start = None
    if draw(st.booleans()):
        body["instanceId"] = draw(st.text(ANY_TEXT, max_size=MAX_NAME))
    if draw(st.integers(0, 5)):  # mostly with a bucket
        start = draw(timestamps(around))
        toggles = draw(
            st.dictionaries(
                names,
                st.fixed_dictionaries(
                    {}, optional={"yes": counts, "no": counts, "variants": variants}
                ),
                max_size=8,
            )
        )
        bucket: dict[str, Any] = {"toggles": toggles}
        if start is not None:
            bucket["start"] = rfc3339(start, draw(st.none() | st.integers(0, 999)))
            bucket["stop"] = rfc3339(start + timedelta(seconds=60))
        body["bucket"] = bucket
    return body, start


def sdk_expected(sdk: Sdk, environment: str, now: datetime) -> tuple[Totals, int]:
    """Totals per key, and how many toggles are dropped as empty."""
    body, start = sdk
    bucket = body.get("bucket")
    totals: Totals = {}
    empty = 0
    if bucket is None:
        return totals, empty
    hour = utc_hour(start or now)
    for feature, toggle in bucket["toggles"].items():
        entry = Entry(
            feature,
            body["appName"],
            environment,
            None,
            None,
            toggle.get("yes", 0),
            toggle.get("no", 0),
            toggle.get("variants", {}),
        )
        if entry.empty:
            empty += 1
        else:
            add(totals, (body["appName"], environment, feature, hour), entry)
    return totals, empty


@PURE
@given(body=sdk_bodies(), environment=environments, now=CLOCK)
def test_sdk_metrics_conversion_preserves_totals(
    body: Sdk, environment: str, now: datetime
) -> None:
    parsed = ClientMetrics.model_validate_json(json.dumps(body[0]))
    result = from_client_metrics(parsed, environment, now)
    totals, empty = sdk_expected(body, environment, now)
    assert batch_totals(result.batch.counts) == totals
    assert result.dropped == Counter({"empty": empty})
    toggles = body[0].get("bucket", {}).get("toggles", {})
    assert result.accepted == len(toggles) - empty
    if "bucket" in body[0]:  # the toggles' order in the body does not matter either
        bucket = {**body[0]["bucket"], "toggles": dict(reversed(toggles.items()))}
        reordered = {**body[0], "bucket": bucket}
        again = from_client_metrics(
            ClientMetrics.model_validate_json(json.dumps(reordered)), environment, now
        )
        assert again.batch.counts == result.batch.counts


# --- strategies: bodies that break one rule ---


@dataclass(frozen=True)
class Bad:
    body: bytes
    path: str  # JSON pointer that an error detail must start with


BAD_COUNTS = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),  # 1.0 too: counts are integers
    st.booleans(),
    st.integers(0, 100).map(str),
    st.integers(max_value=-1),
    st.integers(min_value=MAX_COUNT + 1),
    st.none(),
    st.just([]),
    st.just({}),
)
BAD_NAMES = st.one_of(
    st.just(""),
    st.text(ANY_TEXT, min_size=MAX_NAME + 1, max_size=MAX_NAME + 40),
    st.builds(
        lambda a, b: f"{a}\x00{b}", st.text(ANY_TEXT, max_size=5), st.text(ANY_TEXT, max_size=5)
    ),
    st.integers(),
    st.booleans(),
    st.none(),
    st.just(["a"]),
    st.just({"a": 1}),
)
BAD_TIMESTAMPS = st.one_of(
    st.sampled_from(["", "yesterday", "2024-13-01T00:00:00Z", "2024-02-30T00:00:00Z"]),
    st.sampled_from(["2024-01-01T25:00:00Z", "9999-12-31T23:59:59-23:59"]),
    st.sampled_from(["0001-01-01T00:00:00+23:59", "10000-01-01T00:00:00Z"]),
    st.booleans(),
    st.just([]),
    st.just({}),
)
WRONG_TYPES = st.one_of(
    st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=5), st.none()
)


def valid_metric(i: int = 0) -> dict[str, Any]:
    return {"featureName": f"f{i}", "appName": "app", "environment": ENV, "yes": 1, "no": 2}


@st.composite
def bad_bulk_bodies(draw: st.DrawFn) -> Bad:
    """A small valid body with exactly one thing wrong, and where the error must point."""
    metrics = [valid_metric(i) for i in range(draw(st.integers(1, 3)))]
    body: Any = {"applications": [], "metrics": metrics}
    i = draw(st.integers(0, len(metrics) - 1))
    kind = draw(
        st.sampled_from(
            [
                "count",
                "variant_count",
                "name",
                "variant_name",
                "missing",
                "missing_top",
                "timestamp",
                "top_type",
                "list_type",
                "entry_type",
                "too_many_variants",
                "nesting",
            ]
        )
    )
    if kind == "count":
        field = draw(st.sampled_from(["yes", "no"]))
        metrics[i][field] = draw(BAD_COUNTS)
        path = f"/body/metrics/{i}/{field}"
    elif kind == "variant_count":
        metrics[i]["variants"] = {"blue": 1, "red": draw(BAD_COUNTS)}
        path = f"/body/metrics/{i}/variants/red"
    elif kind == "name":
        field = draw(st.sampled_from(["featureName", "appName", "environment"]))
        metrics[i][field] = draw(BAD_NAMES)
        path = f"/body/metrics/{i}/{field}"
    elif kind == "variant_name":
        name = draw(st.just("") | st.text(ANY_TEXT, min_size=MAX_NAME + 1, max_size=MAX_NAME + 9))
        metrics[i]["variants"] = {name: 1}
        path = f"/body/metrics/{i}/variants"
    elif kind == "missing":
        field = draw(st.sampled_from(["featureName", "appName", "environment"]))
        del metrics[i][field]
        path = f"/body/metrics/{i}/{field}"
    elif kind == "missing_top":
        field = draw(st.sampled_from(["applications", "metrics"]))
        del body[field]
        path = f"/body/{field}"
    elif kind == "timestamp":
        metrics[i]["timestamp"] = draw(BAD_TIMESTAMPS)
        path = f"/body/metrics/{i}/timestamp"
    elif kind == "top_type":
        body = draw(st.one_of(WRONG_TYPES, st.lists(WRONG_TYPES, max_size=2)))
        path = "/body"
    elif kind == "list_type":
        field = draw(st.sampled_from(["applications", "metrics"]))
        body[field] = draw(st.one_of(WRONG_TYPES, st.just({})))
        path = f"/body/{field}"
    elif kind == "entry_type":
        metrics[i] = draw(st.one_of(WRONG_TYPES, st.lists(WRONG_TYPES, max_size=2)))
        path = f"/body/metrics/{i}"
    elif kind == "too_many_variants":
        metrics[i]["variants"] = {f"v{n}": 1 for n in range(MAX_VARIANTS + 1)}
        path = f"/body/metrics/{i}/variants"
    else:  # nesting: deeper than any parser should follow, inside an entry
        depth = draw(st.integers(200, 20_000))
        nested = "[" * depth + "]" * depth
        raw = json.dumps(body).replace('"yes": 1', f'"yes": {nested}', 1)
        return Bad(raw.encode(), "/body")
    return Bad(json.dumps(body).encode(), path)


@st.composite
def bad_sdk_bodies(draw: st.DrawFn) -> Bad:
    """An SDK's metrics body with exactly one thing wrong, and where the error must point."""
    toggle: dict[str, Any] = {"yes": 1, "no": 2, "variants": {"blue": 1}}
    bucket: dict[str, Any] = {"start": "2024-01-01T00:00:00Z", "toggles": {"t": toggle}}
    body: dict[str, Any] = {"appName": "app", "bucket": bucket}
    kind = draw(st.sampled_from(["count", "variant", "app", "toggle", "start", "missing", "type"]))
    if kind == "count":
        field = draw(st.sampled_from(["yes", "no"]))
        toggle[field] = draw(BAD_COUNTS)
        path = f"/body/bucket/toggles/t/{field}"
    elif kind == "variant":
        toggle["variants"]["blue"] = draw(BAD_COUNTS)
        path = "/body/bucket/toggles/t/variants/blue"
    elif kind == "app":
        body["appName"] = draw(BAD_NAMES)
        path = "/body/appName"
    elif kind == "toggle":
        name = draw(st.just("") | st.text(ANY_TEXT, min_size=MAX_NAME + 1, max_size=MAX_NAME + 9))
        bucket["toggles"] = {name: toggle}
        path = "/body/bucket/toggles"
    elif kind == "start":
        bucket["start"] = draw(BAD_TIMESTAMPS)
        path = "/body/bucket/start"
    elif kind == "missing":
        del body["appName"]
        path = "/body/appName"
    else:
        body["bucket"] = draw(st.one_of(WRONG_TYPES.filter(lambda v: v is not None), st.just([])))
        path = "/body/bucket"
    return Bad(json.dumps(body).encode(), path)


def not_json(data: bytes) -> bool:
    try:
        json.loads(data)
    except ValueError:
        return True
    return False


NOT_JSON = st.one_of(
    st.binary(max_size=200).filter(not_json),
    st.sampled_from([b"", b"{", b'{"applications": [], "metrics": [', b"\xff\xfe{}", b"nul"]),
    st.integers(1, 20_000).map(lambda n: b"[" * n),  # unclosed, and deeper than any parser
    st.binary(min_size=1, max_size=50)
    .map(lambda junk: b'{"applications": [], "metrics": []}' + junk)
    .filter(not_json),
)


def bulk_of(metrics: list[Entry]) -> dict[str, Any]:
    return {"applications": [], "metrics": metrics}


def with_timestamp(moment: str) -> Bad:
    body = {"applications": [], "metrics": [{**valid_metric(), "timestamp": moment}]}
    return Bad(json.dumps(body).encode(), "/body/metrics/0/timestamp")


def has_nul(value: Any) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(has_nul(k) or has_nul(v) for k, v in value.items())
    if isinstance(value, list):
        return any(has_nul(v) for v in value)
    return False


def refused_by_parsing(body: bytes, sdk: bool = False) -> bool:
    """What ``read_json`` and the ingest path refuse before anything is stored: the models,
    then NUL anywhere (PostgreSQL text cannot hold it), then times outside years 1..9999."""
    now = datetime.now(UTC)
    try:
        if sdk:
            sdk_body = ClientMetrics.model_validate_json(body)
            if has_nul(sdk_body.model_dump()):
                return True
            from_client_metrics(sdk_body, ENV, now)
        else:
            bulk_body = BulkMetrics.model_validate_json(body)
            if has_nul(bulk_body.model_dump()):
                return True
            from_bulk(bulk_body, ENV, now)
    except (ValidationError, InvalidInput):
        return True
    return False


@PURE
@given(bad=bad_bulk_bodies())
# instants past the years 1..9999 in UTC: accepted once, then unreadable and unflushable
@example(bad=with_timestamp("9999-12-31T23:59:59-23:59"))
@example(bad=with_timestamp("0001-01-01T00:00:00+00:01"))
def test_a_body_breaking_any_rule_is_refused_before_storage(bad: Bad) -> None:
    assert refused_by_parsing(bad.body)


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
    status, answer = await post(client, "/api/client/metrics/bulk", bad.body)
    assert status == 400, answer
    assert_error(answer, "BadDataError")
    assert [d["path"] for d in answer["details"]] == [bad.path]


@PURE
@given(bad=bad_sdk_bodies())
def test_an_sdk_body_breaking_any_rule_is_refused_before_storage(bad: Bad) -> None:
    assert refused_by_parsing(bad.body, sdk=True)


# --- through the HTTP API ---


def blocking(loop: asyncio.AbstractEventLoop) -> Callable[[Coroutine[Any, Any, T]], T]:
    """Run a coroutine on the test's event loop from the worker thread, and wait for it."""

    def run(coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, loop).result(timeout=60)

    return run


async def post(
    client: Any, path: str, body: bytes, content_type: str = "application/json"
) -> tuple[int, Any]:
    response = await client.post(
        path, data=body, headers={**auth(DEV_KEY), "Content-Type": content_type}
    )
    raw = await response.read()
    if response.status == 202:
        assert raw == b""
        return 202, None
    assert response.content_type == "application/json", (response.status, raw[:200])
    return response.status, json.loads(raw)


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
        status, answer = run(post(client, "/api/client/metrics/bulk", encode(metrics, apps)))
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
        status, answer = run(post(client, "/api/client/metrics", json.dumps(body).encode()))
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
        status, answer = run(post(client, path, bad.body))
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
        status, answer = run(post(client, path, data))
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
        status, answer = run(post(client, "/api/client/metrics/bulk", data, content_type))
        assert status == 415, (status, answer)
        assert_error(answer, "ContentTypeError")

    await asyncio.to_thread(refused)
