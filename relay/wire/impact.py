"""Impact metrics (``impactMetrics``): counters, gauges and histograms SDKs send with their
metrics (Node SDK 6.7+) and relays carry in bulk bodies (Unleash Edge 20), after Unleash's
schema of them.

An invalid list never fails the body carrying it, as in Unleash: ``ImpactCarrier`` validates
the list on its own and, when it is invalid, keeps the body's counts and registrations with
the list set aside (``impactInvalid``: why), to be counted and logged.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    InstanceOf,
    StrictFloat,
    StrictInt,
    ValidationError,
    ValidatorFunctionWrapHandler,
    WrapValidator,
    model_validator,
)
from pydantic.json_schema import SkipJsonSchema

from relay.wire.common import Name, Text, Wire, empty

MAX_IMPACT_METRICS = 100  # metrics in one body
MAX_IMPACT_SAMPLES = 1_000  # samples of one body, all metrics together (one per label set)
MAX_IMPACT_LABELS = 16  # labels of one sample besides appName, which the service may add
MAX_IMPACT_BUCKETS = 64  # finite bounds of one histogram (the Node SDK's default is 11)
MAX_IMPACT_VALUE = 1e15  # magnitude of a value, and of what sums saturate at (core.impact)

Number = Annotated[float, Field(allow_inf_nan=False, ge=-MAX_IMPACT_VALUE, le=MAX_IMPACT_VALUE)]
Amount = Annotated[float, Field(allow_inf_nan=False, ge=0, le=MAX_IMPACT_VALUE)]
# strict: true is no number; bounded: a label value is stored in an index on PostgreSQL
LabelValue = (
    Text
    | Annotated[StrictInt, Field(ge=-MAX_IMPACT_VALUE, le=MAX_IMPACT_VALUE)]
    | Annotated[StrictFloat, Field(allow_inf_nan=False, ge=-MAX_IMPACT_VALUE, le=MAX_IMPACT_VALUE)]
)
Labels = Annotated[dict[Name, LabelValue], Field(max_length=MAX_IMPACT_LABELS + 1)]
Kind = Literal["counter", "gauge", "histogram"]


class ImpactBucket(Wire):
    """A histogram's cumulative count of observations at most ``le``."""

    le: Number | Literal["+Inf"]
    count: Amount


class ImpactSample(Wire):
    """A counter's increase since the last send or a gauge's latest ``value``; or what a
    histogram observed since the last send (``count``, ``sum``, ``buckets``).

    The bounds leave room for what the service adds before sending a series on (an
    ``appName`` label, a ``+Inf`` bucket), so that it never builds what an upstream with
    the same rules would refuse."""

    labels: Labels = empty(dict)
    value: Number | None = None
    count: Amount | None = None
    sum: Number | None = None
    buckets: Annotated[list[ImpactBucket], Field(max_length=MAX_IMPACT_BUCKETS + 1)] | None = None

    @model_validator(mode="after")
    def _room_for_what_is_added(self) -> ImpactSample:
        if len(self.labels) - ("appName" in self.labels) > MAX_IMPACT_LABELS:
            raise ValueError(f"at most {MAX_IMPACT_LABELS} labels besides appName")
        if len({b.le for b in self.buckets or () if b.le != "+Inf"}) > MAX_IMPACT_BUCKETS:
            raise ValueError(f"at most {MAX_IMPACT_BUCKETS} bounds besides +Inf")
        return self


class ImpactMetric(Wire):
    name: Name
    help: Text = ""
    type: Kind
    buckets: Annotated[list[Number], Field(max_length=MAX_IMPACT_BUCKETS)] | None = None
    samples: Annotated[list[ImpactSample], Field(max_length=MAX_IMPACT_SAMPLES)]

    @model_validator(mode="after")
    def _samples_fit_type(self) -> ImpactMetric:
        for sample in self.samples:
            if self.type == "histogram":
                if sample.count is None or sample.sum is None or sample.buckets is None:
                    raise ValueError("a histogram sample needs count, sum and buckets")
            elif sample.value is None:
                raise ValueError(f"a {self.type} sample needs a value")
            elif self.type == "counter" and sample.value < 0:
                raise ValueError("a counter sample's value must not be negative")
        return self


def _samples_in_all(metrics: list[ImpactMetric]) -> list[ImpactMetric]:
    if sum(len(m.samples) for m in metrics) > MAX_IMPACT_SAMPLES:
        raise ValueError(f"at most {MAX_IMPACT_SAMPLES} samples in all")
    return metrics


ImpactMetrics = Annotated[
    list[ImpactMetric], Field(max_length=MAX_IMPACT_METRICS), AfterValidator(_samples_in_all)
]


@dataclass(frozen=True, slots=True)
class SetAside:
    """An invalid list: the pydantic error type of its first fault (a bounded set of words,
    fit for a metric's label) and where it is. Only this module makes one (``InstanceOf``:
    no body can)."""

    reason: str
    where: str


def _set_aside(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    try:
        return handler(value)
    except ValidationError as exc:
        first = exc.errors()[0]
        # the path in the body: indexes and names, not pydantic's names of validators and
        # union members ("function-after[...]", "constrained-str")
        parts = [str(p) for p in first["loc"] if isinstance(p, int) or p.isidentifier()]
        where = "/".join(["/impactMetrics", *parts])
        return SetAside(first["type"], where)


class ImpactCarrier(Wire):
    """A body that may carry ``impactMetrics``. An invalid list is set aside, not refused.

    Validated as one field (a wrap validator), so the rest of the body keeps pydantic's
    direct path from JSON: a model validator would turn every body into Python objects
    first, and double the cost of parsing a bulk body."""

    impactMetrics: Annotated[
        ImpactMetrics | SkipJsonSchema[InstanceOf[SetAside]] | None, WrapValidator(_set_aside)
    ] = Field(
        None,
        description="Impact metrics (Node SDK 6.7+, Unleash Edge 20), kept per series. An"
        " invalid list is dropped and counted in relay_impact_metrics_invalid_total, never a"
        " reason to refuse the body: its counts and registrations are kept (202), as Unleash"
        " does; a 4xx would make the Node SDK stop sending metrics.",
    )

    @property
    def impact(self) -> list[ImpactMetric]:
        """The list, or none when there is none or it was set aside."""
        return self.impactMetrics if isinstance(self.impactMetrics, list) else []

    @property
    def impactInvalid(self) -> tuple[str, str] | None:
        """Why and where the list was set aside, if it was."""
        invalid = self.impactMetrics
        return (invalid.reason, invalid.where) if isinstance(invalid, SetAside) else None


class ImpactSeriesOut(BaseModel):
    """One series' running state: ``value`` is a counter's total or a gauge's latest; a
    histogram has ``count``, ``sum`` and cumulative ``buckets`` (summed per bound)."""

    appName: str
    environment: str
    name: str
    type: Kind
    help: str
    labels: dict[str, str | int | float]
    value: float | None = None
    count: float | None = None
    sum: float | None = None
    buckets: list[ImpactBucket] | None = None
    updatedAt: datetime


class ImpactMetricsOut(BaseModel):
    model_config = ConfigDict(title="impactMetricsSchema")

    series: list[ImpactSeriesOut]
    next: str | None = Field(
        None, description="URL of the next page when this one stops short of the last series"
    )
