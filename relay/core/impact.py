"""Impact metrics as the domain keeps them: one running state per series.

A series is (environment, application, metric name, type, labels). Samples of a series are
folded as Unleash registers them: a counter's increases are summed, a gauge keeps the latest
value, a histogram's count, sum and bucket counts are summed per bound; sums saturate at
``MAX_IMPACT_VALUE``. A histogram whose
bounds changed (the SDK was redeployed with others) starts again from the newest sample:
counts under other bounds cannot be added up.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, NamedTuple

from relay.wire.impact import MAX_IMPACT_VALUE, ImpactMetric, ImpactSample

INF = float("inf")


class ImpactKey(NamedTuple):
    environment: str
    app_name: str
    name: str
    kind: str  # counter | gauge | histogram
    labels: str  # canonical JSON: keys sorted, no spaces

    @property
    def series(self) -> str:
        """A short fixed-size identity for the primary key: labels may be long."""
        return hashlib.sha256(json.dumps(self, separators=(",", ":")).encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class ImpactState:
    """``value``: a counter's total, a gauge's latest, a histogram's sum of observations.
    ``buckets``: a histogram's (bound, cumulative count), ascending, +Inf last."""

    help: str
    value: float = 0.0
    count: float = 0.0
    buckets: tuple[tuple[float, float], ...] = ()

    def then(self, kind: str, newer: ImpactState) -> ImpactState:
        """This state followed by ``newer`` (the module docstring's rules)."""
        if kind == "gauge":
            return newer
        if kind == "counter":
            return ImpactState(newer.help, _sum(self.value, newer.value))
        if [le for le, _ in self.buckets] != [le for le, _ in newer.buckets]:
            return newer
        buckets = tuple(
            (le, _sum(a, b)) for (le, a), (_, b) in zip(self.buckets, newer.buckets, strict=True)
        )
        return ImpactState(
            newer.help, _sum(self.value, newer.value), _sum(self.count, newer.count), buckets
        )

    def dumps(self) -> str:
        """The state as stored: JSON, +Inf as Prometheus writes it."""
        state: dict[str, Any] = {"value": self.value}
        if self.buckets:
            state["count"] = self.count
            state["buckets"] = [[_bound(le), count] for le, count in self.buckets]
        return json.dumps(state, separators=(",", ":"))

    @classmethod
    def loads(cls, help: str, stored: str) -> ImpactState:
        state = json.loads(stored)
        buckets = tuple((INF if le == "+Inf" else le, c) for le, c in state.get("buckets", ()))
        return cls(help, state["value"], state.get("count", 0.0), buckets)

    def sample(self, kind: str, labels: dict[str, Any]) -> dict[str, Any]:
        """The state as a wire sample, which the upstream adds to what it has."""
        if kind != "histogram":
            return {"labels": labels, "value": self.value}
        return {
            "labels": labels,
            "count": self.count,
            "sum": self.value,
            "buckets": [{"le": _bound(le), "count": count} for le, count in self.buckets],
        }


def _sum(a: float, b: float) -> float:
    """Sums saturate at the wire's bound of a value: a series past it stays at it rather
    than become one an upstream with the same rules refuses."""
    return max(-MAX_IMPACT_VALUE, min(MAX_IMPACT_VALUE, a + b))


def _bound(le: float) -> float | str:
    return "+Inf" if le == INF else le


def canonical_labels(labels: dict[str, Any]) -> str:
    return json.dumps(labels, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def series_of(
    metric: ImpactMetric, environment: str, app_name: str
) -> list[tuple[ImpactKey, ImpactState]]:
    """A metric's samples as series states. The application is a sample's ``appName`` label,
    else ``app_name`` (the body's, then written into the labels so that the upstream, which
    reads it from there, gets it too)."""
    found = []
    for sample in metric.samples:
        labels = dict(sample.labels)
        if app_name and "appName" not in labels:
            labels["appName"] = app_name
        app = str(labels.get("appName", ""))
        key = ImpactKey(environment, app, metric.name, metric.type, canonical_labels(labels))
        found.append((key, _state(metric, sample)))
    return found


def _state(metric: ImpactMetric, sample: ImpactSample) -> ImpactState:
    if metric.type != "histogram":
        assert sample.value is not None  # checked by the wire model for its type
        return ImpactState(metric.help, sample.value)
    assert sample.count is not None and sample.sum is not None and sample.buckets is not None
    bounds = sorted((INF if b.le == "+Inf" else b.le, b.count) for b in sample.buckets)
    merged: dict[float, float] = {}
    for le, count in bounds:  # a bound sent twice: its counts add up
        merged[le] = _sum(merged.get(le, 0.0), count)
    if INF not in merged:
        merged[INF] = sample.count
    return ImpactState(metric.help, sample.sum, sample.count, tuple(merged.items()))
