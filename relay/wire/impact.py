"""Impact metrics (``impactMetrics``): counters, gauges and histograms SDKs send with their
metrics (Node SDK 6.7+) and relays carry in bulk bodies (Unleash Edge 20), after Unleash's
schema of them.

An invalid list never fails the body carrying it, as in Unleash: ``ImpactCarrier`` parses
the list on its own and, when it is invalid, keeps the body's counts and registrations with
the list set aside (``impactInvalid``: why), to be counted and logged.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictInt,
    TypeAdapter,
    ValidationError,
    model_validator,
)
from pydantic.json_schema import SkipJsonSchema

from relay.wire.common import Name, Text, Wire

MAX_IMPACT_METRICS = 100  # metrics in one body
MAX_IMPACT_SAMPLES = 1_000  # samples of one metric (one per label set)
MAX_IMPACT_LABELS = 16  # labels of one sample (the Node SDK sends 3 plus one per flag asked)
MAX_IMPACT_BUCKETS = 64  # bounds of one histogram (the Node SDK's default is 11)
MAX_IMPACT_VALUE = 1e15  # magnitude of a value: sums of them stay finite and exact enough

Number = Annotated[float, Field(allow_inf_nan=False, ge=-MAX_IMPACT_VALUE, le=MAX_IMPACT_VALUE)]
Amount = Annotated[float, Field(allow_inf_nan=False, ge=0, le=MAX_IMPACT_VALUE)]
LabelValue = Text | StrictInt | Number
Labels = Annotated[dict[Name, LabelValue], Field(max_length=MAX_IMPACT_LABELS)]
Kind = Literal["counter", "gauge", "histogram"]


class ImpactBucket(Wire):
    """A histogram's cumulative count of observations at most ``le``."""

    le: Number | Literal["+Inf"]
    count: Amount


class ImpactSample(Wire):
    """A counter's increase since the last send or a gauge's latest ``value``; or what a
    histogram observed since the last send (``count``, ``sum``, ``buckets``)."""

    labels: Labels = {}
    value: Number | None = None
    count: Amount | None = None
    sum: Number | None = None
    buckets: Annotated[list[ImpactBucket], Field(max_length=MAX_IMPACT_BUCKETS)] | None = None


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


ImpactMetrics = Annotated[list[ImpactMetric], Field(max_length=MAX_IMPACT_METRICS)]
_IMPACT: TypeAdapter[list[ImpactMetric]] = TypeAdapter(ImpactMetrics)


class ImpactCarrier(Wire):
    """A body that may carry ``impactMetrics``. An invalid list is set aside, not refused:
    ``impactMetrics`` is then None and ``impactInvalid`` the pydantic error type of its first
    fault (a bounded set of words, fit for a metric's label) and where it is."""

    impactMetrics: ImpactMetrics | None = Field(
        None,
        description="Impact metrics (Node SDK 6.7+, Unleash Edge 20), kept per series. An"
        " invalid list is dropped and counted in relay_impact_metrics_invalid_total, never a"
        " reason to refuse the body: its counts and registrations are kept (202), as Unleash"
        " does; a 4xx would make the Node SDK stop sending metrics.",
    )
    impactInvalid: SkipJsonSchema[tuple[str, str] | None] = None

    @model_validator(mode="before")
    @classmethod
    def _set_aside_invalid(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        raw = data.get("impactMetrics")
        try:
            parsed = None if raw is None else _IMPACT.validate_python(raw)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = "/".join(["/impactMetrics", *(str(part) for part in first["loc"])])
            return {**data, "impactMetrics": None, "impactInvalid": (first["type"], where)}
        return {**data, "impactMetrics": parsed, "impactInvalid": None}


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
