"""Wire models, named after the spec's schemas (``bulkMetricsSchema``...).

Each request body is parsed once, from bytes, into one of these; handlers never look at raw
JSON. The limits here are the service's documented input limits (README, "Limits").
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    GetPydanticSchema,
    StrictBool,
    StrictInt,
    TypeAdapter,
    WithJsonSchema,
)
from pydantic_core import core_schema

MAX_NAME = 255
MAX_COUNT = 2**31 - 1  # Unleash stores counts in 32-bit integer columns
MAX_METRICS = 10_000
MAX_APPLICATIONS = 1_000
MAX_VARIANTS = 100
MAX_LIST = 100


# NUL characters are refused too (``api.routing.read_json``): PostgreSQL text cannot hold
# them. A `pattern` here would double the cost of validating a bulk body.
Name = Annotated[str, Field(min_length=1, max_length=MAX_NAME)]
Text = Annotated[str, Field(max_length=MAX_NAME)]
Count = Annotated[StrictInt, Field(ge=0, le=MAX_COUNT)]
# RFC 3339 requires an offset; a timestamp without one is read as UTC (``domain.epoch``), not
# refused, because a 4xx makes the Node SDK stop sending metrics for good. Years 1..9999 in
# UTC are enforced where the instant is computed (``domain.epoch``, once per distinct
# timestamp): bounds here would cost more than the rest of a timestamp's validation.
Timestamp = datetime
# A bulk entry's timestamp is kept as sent (a string, or a number of epoch seconds or
# milliseconds) and parsed by ``parse_time`` once per distinct value: parsing and then hashing
# 100 offset-carrying datetimes cost more than the rest of aggregating a bulk body (measured,
# bench/README.md). Bulk bodies repeat a few timestamps over all their entries.
RawTimestamp = Annotated[
    str | float,
    GetPydanticSchema(
        lambda _type, _handler: core_schema.union_schema(
            [core_schema.str_schema(strict=True), core_schema.float_schema(strict=True)],
            custom_error_type="datetime_type",
        )
    ),
    WithJsonSchema({"type": "string", "format": "date-time"}),
]
_TIME = TypeAdapter(Timestamp)


def parse_time(value: str | float) -> datetime:
    """A ``RawTimestamp`` as ``Timestamp`` fields read it; pydantic's ``ValidationError`` if
    it is not a time."""
    return _TIME.validate_python(value)


Variants = Annotated[dict[Name, Count], Field(max_length=MAX_VARIANTS)]


class _Wire(BaseModel):
    """Unknown keys are ignored, as Unleash does (newer peers send ``impactMetrics``...)."""

    model_config = ConfigDict(extra="ignore", frozen=True)


class ConnectVia(_Wire):
    appName: Name
    instanceId: Name


class ClientMetricsEnv(_Wire):
    """Element of ``metrics``: counts for one feature in one app and environment."""

    featureName: Name
    appName: Name
    environment: Name
    timestamp: RawTimestamp | None = None
    yes: Count = 0
    no: Count = 0
    variants: Variants = {}


# --- what SDKs post directly (COMPAT.md, "What real SDKs send") ---


class ToggleCounts(_Wire):
    yes: Count = 0
    no: Count = 0
    variants: Variants = {}


class MetricsBucket(_Wire):
    start: Timestamp | None = None
    stop: Timestamp | None = None
    toggles: Annotated[dict[Name, ToggleCounts], Field(max_length=MAX_METRICS)] = {}


class ClientMetrics(_Wire):
    """``clientMetricsSchema``: an SDK's ``/api/client/metrics`` body; environment comes from
    the key, never from the body."""

    model_config = ConfigDict(title="clientMetricsSchema")

    appName: Name
    instanceId: Text = "default"
    bucket: MetricsBucket | None = None


class ClientRegistration(_Wire):
    """``clientApplicationSchema``: an SDK's ``/api/client/register`` body.

    ``interval`` is seconds from the Python SDK and milliseconds from the Node SDK; it is stored
    as sent, since nothing tells the two apart."""

    model_config = ConfigDict(title="clientApplicationSchema")

    appName: Name
    instanceId: Name = "default"
    connectVia: Annotated[list[ConnectVia], Field(max_length=MAX_LIST)] = []
    interval: Annotated[float, Field(ge=0, le=10**12)] | None = None
    started: Timestamp | None = None
    strategies: Annotated[list[Text], Field(max_length=MAX_LIST)] = []
    sdkVersion: Text | None = None


class ClientApplication(ClientRegistration):
    """Element of ``applications`` in a bulk body: a registration relayed for an SDK, which
    names its environment and instance explicitly."""

    model_config = ConfigDict(title="bulkRegistrationSchema")

    environment: Name
    instanceId: Name


class BulkMetrics(_Wire):
    """``bulkMetricsSchema``: what relays (and our relay) post to ``/api/client/metrics/bulk``."""

    model_config = ConfigDict(title="bulkMetricsSchema")

    applications: Annotated[list[ClientApplication], Field(max_length=MAX_APPLICATIONS)]
    metrics: Annotated[list[ClientMetricsEnv], Field(max_length=MAX_METRICS)]


# --- admin ---


class Operator(StrEnum):
    IN = "IN"
    NOT_IN = "NOT_IN"
    STR_CONTAINS = "STR_CONTAINS"
    STR_STARTS_WITH = "STR_STARTS_WITH"
    STR_ENDS_WITH = "STR_ENDS_WITH"
    NUM_EQ = "NUM_EQ"
    NUM_GT = "NUM_GT"
    NUM_GTE = "NUM_GTE"
    NUM_LT = "NUM_LT"
    NUM_LTE = "NUM_LTE"
    DATE_AFTER = "DATE_AFTER"
    DATE_BEFORE = "DATE_BEFORE"
    SEMVER_EQ = "SEMVER_EQ"
    SEMVER_GT = "SEMVER_GT"
    SEMVER_LT = "SEMVER_LT"
    SEMVER_GTE = "SEMVER_GTE"
    SEMVER_LTE = "SEMVER_LTE"
    REGEX = "REGEX"


class WeightType(StrEnum):
    VARIABLE = "variable"
    FIX = "fix"


class PayloadType(StrEnum):
    STRING = "string"
    JSON = "json"
    CSV = "csv"
    NUMBER = "number"


class _Strict(BaseModel):
    """Admin bodies refuse unknown keys, as Unleash does."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class Constraint(_Strict):
    model_config = ConfigDict(title="constraintSchema")

    contextName: Name
    operator: Operator
    values: Annotated[list[Annotated[str, Field(max_length=4096)]], Field(max_length=1000)] = []
    value: Annotated[str, Field(max_length=4096)] | None = None
    inverted: StrictBool = False
    caseInsensitive: StrictBool = False


class VariantPayload(_Strict):
    type: PayloadType
    value: Annotated[str, Field(max_length=64 * 1024)]


class StrategyVariant(_Strict):
    model_config = ConfigDict(title="strategyVariantSchema")

    name: Name
    weight: Annotated[StrictInt, Field(ge=0, le=1000)]
    weightType: WeightType
    stickiness: Name
    payload: VariantPayload | None = None


class DefaultStrategy(_Strict):
    model_config = ConfigDict(title="createStrategySchema")

    name: Name
    title: Text | None = None
    disabled: StrictBool | None = None
    sortOrder: float | None = None
    constraints: Annotated[list[Constraint], Field(max_length=MAX_LIST)] = []
    variants: Annotated[list[StrategyVariant], Field(max_length=MAX_LIST)] = []
    parameters: Annotated[
        dict[Name, Annotated[str, Field(max_length=4096)]], Field(max_length=MAX_LIST)
    ] = {}
    segments: Annotated[list[StrictInt], Field(max_length=MAX_LIST)] = []


class ProjectEnvironment(_Strict):
    """``projectEnvironmentSchema``: body of add-environment."""

    model_config = ConfigDict(title="projectEnvironmentSchema")

    environment: Annotated[str, Field(min_length=1, max_length=100)]
    changeRequestsEnabled: StrictBool | None = None
    defaultStrategy: DefaultStrategy | None = None


Identifier = Annotated[str, Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_.~-]+$")]


class CreateProject(_Strict):
    model_config = ConfigDict(title="createProjectSchema")

    id: Identifier
    name: Name
    description: Annotated[str, Field(max_length=1000)] | None = None


class CreateEnvironment(_Strict):
    model_config = ConfigDict(title="createEnvironmentSchema")

    name: Identifier
    type: Annotated[str, Field(min_length=1, max_length=100)]
    enabled: StrictBool = True
    sortOrder: StrictInt | None = None


class TokenType(StrEnum):
    CLIENT = "client"
    ADMIN = "admin"


class CreateApiToken(_Strict):
    """``createApiTokenSchema``. A client key has one environment; ``projects`` defaults to all."""

    model_config = ConfigDict(title="createApiTokenSchema")

    type: TokenType
    environment: Annotated[str, Field(min_length=1, max_length=100)] | None = None
    projects: Annotated[
        list[Annotated[str, Field(min_length=1, max_length=100)]],
        Field(min_length=1, max_length=MAX_LIST),
    ] = ["*"]
    project: Annotated[str, Field(min_length=1, max_length=100)] | None = None
    tokenName: Text | None = None


class ValidateTokens(_Strict):
    model_config = ConfigDict(title="tokenStringListSchema", extra="ignore")

    tokens: Annotated[list[Annotated[str, Field(max_length=1024)]], Field(max_length=MAX_LIST)]


# --- responses (documented in the OpenAPI document) ---


class ErrorDetail(BaseModel):
    path: str | None = None
    message: str


class ErrorBody(BaseModel):
    """Body of every 4xx and 5xx: Unleash's error shape."""

    model_config = ConfigDict(title="errorSchema")

    id: str
    name: str
    message: str
    details: list[ErrorDetail]


class ApiTokenOut(BaseModel):
    model_config = ConfigDict(title="apiTokenSchema")

    secret: str | None = None
    tokenName: str | None = None
    type: TokenType
    environment: str
    projects: list[str]
    project: str
    createdAt: datetime


class ValidatedToken(BaseModel):
    token: str
    type: TokenType
    projects: list[str]
    environment: str


class ValidatedTokens(BaseModel):
    model_config = ConfigDict(title="validatedEdgeTokensSchema")

    tokens: list[ValidatedToken]


class ProjectEnvironmentOut(BaseModel):
    environment: str
    enabled: bool
    changeRequestsEnabled: bool
    defaultStrategy: dict[str, Any] | None


class ProjectOut(BaseModel):
    model_config = ConfigDict(title="projectSchema")

    id: str
    name: str
    description: str | None
    createdAt: datetime
    environments: list[ProjectEnvironmentOut]


class EnvironmentOut(BaseModel):
    model_config = ConfigDict(title="environmentSchema")

    name: str
    type: str
    enabled: bool
    sortOrder: int


class RawMetric(BaseModel):
    featureName: str
    appName: str
    environment: str
    timestamp: datetime
    yes: int
    no: int
    variants: dict[str, int]


class FeatureMetricsRaw(BaseModel):
    model_config = ConfigDict(title="featureMetricsSchema")

    version: int = 1
    maturity: str = "stable"
    data: list[RawMetric]


class ApplicationInstance(BaseModel):
    instanceId: str
    environment: str
    sdkVersion: str | None
    connectVia: list[ConnectVia]
    strategies: list[str]
    interval: float | None
    started: datetime | None
    firstSeen: datetime
    lastSeen: datetime


class ApplicationOut(BaseModel):
    model_config = ConfigDict(title="applicationSchema")

    appName: str
    instances: list[ApplicationInstance]


class ApplicationsOut(BaseModel):
    model_config = ConfigDict(title="applicationsSchema")

    applications: list[ApplicationOut]


class Status(BaseModel):
    status: str
