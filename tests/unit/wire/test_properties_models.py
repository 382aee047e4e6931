"""Property tests of the request models and the aggregation, without HTTP.

Each generated body (metric_bodies.py, bad_bodies.py) is serialised to JSON bytes and parsed
by the model, as the service does, then converted; the result is checked against the
reference computed by the tests. A body breaking any rule is refused before anything would
be stored.
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime
from typing import Any

from bad_bodies import (
    Bad,
    bad_bulk_bodies,
    bad_sdk_bodies,
    with_timestamp,
)
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from metric_bodies import (
    ENV,
    Entry,
    Sdk,
    batch_totals,
    bulk_bodies,
    encode,
    environments,
    expected_totals,
    sdk_bodies,
    sdk_expected,
)
from pydantic import ValidationError

from relay.core.convert import from_bulk, from_client_metrics
from relay.core.errors import InvalidInput
from relay.core.ingest_batch import RegistrationKey
from relay.wire.client import BulkMetrics, ClientMetrics

PURE = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

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


@PURE
@given(bad=bad_sdk_bodies())
def test_an_sdk_body_breaking_any_rule_is_refused_before_storage(bad: Bad) -> None:
    assert refused_by_parsing(bad.body, sdk=True)
