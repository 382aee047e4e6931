"""Valid metric bodies, bulk and SDK, as Hypothesis strategies, and the reference: what a
body must add up to, computed here rather than by ``relay.core.convert``. Shared by the
property tests of the models (test_properties_models.py) and of the HTTP API
(test_properties_http.py).

Bodies are generated within the documented limits (docs/operations.md, "Limits"): names of 1..255
characters of any Unicode, counts 0..2^31-1, variants, timestamps with any offset (or none,
read as UTC), nanosecond fractions.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from hypothesis import strategies as st

from relay.core.ingest_batch import Counts, MetricKey
from relay.wire.common import MAX_COUNT, MAX_NAME

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
ENV = "development"  # the environment of DEV_KEY

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
