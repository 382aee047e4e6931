"""Pure functions: parsed wire bodies -> one aggregated ``IngestBatch``.

``environment`` is the environment of the caller's client key: entries for any other
environment are dropped (and counted), as Unleash does, rather than refused, so one
misconfigured SDK cannot make a relay's whole batch fail.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from pydantic import ValidationError

from relay.core.errors import InvalidInput
from relay.core.impact import series_of
from relay.core.ingest_batch import (
    Counts,
    Hop,
    IngestBatch,
    MetricKey,
    OutOfRange,
    Registration,
    RegistrationKey,
    epoch,
    hour_start,
    through,
)
from relay.wire.client import BulkMetrics, ClientMetrics, ClientRegistration, ToggleCounts
from relay.wire.common import MAX_LIST, MAX_NAME_BYTES, parse_time
from relay.wire.impact import ImpactCarrier


def _hour(moment: datetime, path: str) -> int:
    try:
        return hour_start(moment)
    except OutOfRange as exc:
        raise InvalidInput(str(exc), path) from None


# A name of at most this many characters fits MAX_NAME_BYTES whatever its characters: only
# longer ones need encoding, and a request of short names costs one pass of len() over them.
_SHORT = MAX_NAME_BYTES // 4


def _check_names(names: dict[str, str]) -> None:
    """``names``: JSON pointer -> name. Refuses the first longer than ``MAX_NAME_BYTES``."""
    for path, name in names.items():
        if len(name) > _SHORT and len(name.encode()) > MAX_NAME_BYTES:
            raise InvalidInput(f"is too long: at most {MAX_NAME_BYTES} bytes in UTF-8", path)


def _raw_hour(raw: str | float, path: str) -> int:
    try:
        moment = parse_time(raw)
    except ValidationError as exc:
        raise InvalidInput(f"is invalid: {exc.errors()[0]['msg']}", path) from None
    return _hour(moment, path)


@dataclass(slots=True)
class Conversion:
    batch: IngestBatch = field(default_factory=IngestBatch)
    accepted: int = 0
    dropped: Counter[str] = field(default_factory=Counter)
    impact_samples: int = 0
    impact_invalid: tuple[str, str] | None = None  # an invalid list set aside: why, where


def _add_impact(result: Conversion, body: ImpactCarrier, environment: str, app_name: str) -> None:
    """The body's impact metrics, under the caller's environment (as its counts)."""
    result.impact_invalid = body.impactInvalid
    for metric in body.impact:
        for key, state in series_of(metric, environment, app_name):
            result.batch.add_impact(key, state)
            result.impact_samples += 1


def from_bulk(
    body: BulkMetrics, environment: str, now: datetime, hop: Hop | None = None
) -> Conversion:
    """Entries are summed per (app, feature, hour) under plain tuples, and each distinct
    timestamp is parsed once; a ``MetricKey`` is built per distinct key only. This is the
    per-entry loop of the busiest endpoint: it is written for speed (bench/README.md)."""
    result = Conversion()
    sums: dict[tuple[str, str, int], Counts] = {}
    hours: dict[str | float | None, int] = {None: hour_start(now)}
    dropped = result.dropped
    for index, entry in enumerate(body.metrics):
        if entry.environment != environment:
            dropped["environment"] += 1
            continue
        yes, no, variants = entry.yes, entry.no, entry.variants
        if not (yes or no or any(variants.values())):
            dropped["empty"] += 1
            continue
        raw = entry.timestamp
        hour = hours.get(raw)
        if hour is None:
            assert raw is not None  # None is in ``hours`` from the start
            hour = hours[raw] = _raw_hour(raw, f"/body/metrics/{index}/timestamp")
        key = (entry.appName, entry.featureName, hour)
        counts = sums.get(key)
        if counts is None:
            sums[key] = Counts(yes, no, dict(variants))
        else:
            counts.add(yes, no, variants)
        result.accepted += 1
    names: list[str] = []  # per key: fewer than entries
    for (app_name, feature, _), counts in sums.items():
        names += (app_name, feature, *counts.variants)
    if max(map(len, names), default=0) > _SHORT:
        _check_bulk_names(body, environment)
    result.batch.counts = {
        MetricKey(app, environment, feature, hour): counts
        for (app, feature, hour), counts in sums.items()
    }
    for index, app in enumerate(body.applications):
        if app.environment == environment:
            path = f"/body/applications/{index}"
            result.batch.add_registration(_registration(app, environment, now, hop, path))
    _add_impact(result, body, environment, "")
    return result


def _check_bulk_names(body: BulkMetrics, environment: str) -> None:
    """Some name is long: refuse the first entry kept whose name is too long to store."""
    for index, entry in enumerate(body.metrics):
        kept = entry.yes or entry.no or any(entry.variants.values())
        if entry.environment == environment and kept:
            path = f"/body/metrics/{index}"
            names = {f"{path}/appName": entry.appName, f"{path}/featureName": entry.featureName}
            _check_names(names | {f"{path}/variants/{v}": v for v in entry.variants})


def from_client_metrics(body: ClientMetrics, environment: str, now: datetime) -> Conversion:
    """An SDK's own metrics post: one app, one time window, environment from its key."""
    result = Conversion()
    _add_impact(result, body, environment, body.appName)
    result.batch.seen[RegistrationKey(body.appName, environment, body.instanceId)] = now
    bucket = body.bucket
    if bucket is None:
        return result
    hour = _hour(bucket.start or now, "/body/bucket/start")
    names = [body.appName, *bucket.toggles]
    for toggle in bucket.toggles.values():
        names += toggle.variants
    if max(map(len, names)) > _SHORT:
        _check_sdk_names(body.appName, bucket.toggles)
    for feature, toggle in bucket.toggles.items():
        if toggle.yes == 0 and toggle.no == 0 and not any(toggle.variants.values()):
            result.dropped["empty"] += 1
            continue
        key = MetricKey(body.appName, environment, feature, hour)
        result.batch.add_count(key, toggle.yes, toggle.no, toggle.variants)
        result.accepted += 1
    return result


def _check_sdk_names(app_name: str, toggles: Mapping[str, ToggleCounts]) -> None:
    """Some name is long: refuse the first kept that is too long to store."""
    _check_names({"/body/appName": app_name})
    for feature, toggle in toggles.items():
        if toggle.yes or toggle.no or any(toggle.variants.values()):
            path = f"/body/bucket/toggles/{feature}"
            _check_names({path: feature} | {f"{path}/variants/{v}": v for v in toggle.variants})


def from_client_registration(
    body: ClientRegistration, environment: str, now: datetime, hop: Hop | None = None
) -> Conversion:
    result = Conversion()
    result.batch.add_registration(_registration(body, environment, now, hop, "/body"))
    return result


def _registration(
    body: ClientRegistration,
    environment: str,
    now: datetime,
    hop: Hop | None,
    path: str,
) -> Registration:
    """``hop`` is this relay's own ``connectVia`` entry, appended after those already there;
    ``path`` is the registration's JSON pointer."""
    if max(len(body.appName), len(body.instanceId)) > _SHORT:
        _check_names({f"{path}/appName": body.appName, f"{path}/instanceId": body.instanceId})
    if body.started is not None:
        try:
            epoch(body.started)
        except OutOfRange as exc:
            raise InvalidInput(str(exc), f"{path}/started") from None
    via = tuple(Hop(v.appName, v.instanceId) for v in body.connectVia)
    return Registration(
        key=RegistrationKey(body.appName, environment, body.instanceId),
        connect_via=through(via, hop, MAX_LIST) if hop is not None else via,
        sdk_version=body.sdkVersion,
        strategies=tuple(body.strategies),
        interval=body.interval,
        started=body.started,
        seen_at=now,
    )
