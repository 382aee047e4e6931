"""Bodies that break exactly one rule, as Hypothesis strategies, each with the JSON pointer an
error detail must start with, and bytes that are not JSON at all. Shared by the property
tests of the models (test_properties_models.py: refused before storage) and of the HTTP API
(test_properties_http.py: 400 naming the field, nothing stored).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st
from metric_bodies import ANY_TEXT, ENV, Entry

from relay.wire.common import MAX_COUNT, MAX_NAME, MAX_VARIANTS

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
