"""Bodies of the admin API (admin key): projects, environments, strategies, keys, usage."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt

from relay.wire.client import ConnectVia
from relay.wire.common import MAX_LIST, KeyType, Name, Strict, Text

# sort orders are stored in 32-bit integer columns
SortOrder = Annotated[StrictInt, Field(ge=-(2**31), le=2**31 - 1)]


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


class Constraint(Strict):
    model_config = ConfigDict(title="constraintSchema")

    contextName: Name
    operator: Operator
    values: Annotated[list[Annotated[str, Field(max_length=4096)]], Field(max_length=1000)] = []
    value: Annotated[str, Field(max_length=4096)] | None = None
    inverted: StrictBool = False
    caseInsensitive: StrictBool = False


class VariantPayload(Strict):
    type: PayloadType
    value: Annotated[str, Field(max_length=64 * 1024)]


class StrategyVariant(Strict):
    model_config = ConfigDict(title="strategyVariantSchema")

    name: Name
    weight: Annotated[StrictInt, Field(ge=0, le=1000)]
    weightType: WeightType
    stickiness: Name
    payload: VariantPayload | None = None


class DefaultStrategy(Strict):
    model_config = ConfigDict(title="createStrategySchema")

    name: Name
    title: Text | None = None
    disabled: StrictBool | None = None
    sortOrder: Annotated[float, Field(allow_inf_nan=False)] | None = None  # JSON has no NaN
    constraints: Annotated[list[Constraint], Field(max_length=MAX_LIST)] = []
    variants: Annotated[list[StrategyVariant], Field(max_length=MAX_LIST)] = []
    parameters: Annotated[
        dict[Name, Annotated[str, Field(max_length=4096)]], Field(max_length=MAX_LIST)
    ] = {}
    segments: Annotated[list[StrictInt], Field(max_length=MAX_LIST)] = []


class ProjectEnvironment(Strict):
    """``projectEnvironmentSchema``: body of add-environment."""

    model_config = ConfigDict(title="projectEnvironmentSchema")

    environment: Annotated[str, Field(min_length=1, max_length=100)]
    changeRequestsEnabled: StrictBool | None = None
    defaultStrategy: DefaultStrategy | None = None


Identifier = Annotated[str, Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_.~-]+$")]


class CreateProject(Strict):
    model_config = ConfigDict(title="createProjectSchema")

    id: Identifier
    name: Name
    description: Annotated[str, Field(max_length=1000)] | None = None


class CreateEnvironment(Strict):
    model_config = ConfigDict(title="createEnvironmentSchema")

    name: Identifier
    type: Annotated[str, Field(min_length=1, max_length=100)]
    enabled: StrictBool = True
    sortOrder: SortOrder | None = None


class CreateApiKey(Strict):
    """``createApiTokenSchema``. A client key has one environment; ``projects`` defaults to all."""

    model_config = ConfigDict(title="createApiTokenSchema")

    type: KeyType
    environment: Annotated[str, Field(min_length=1, max_length=100)] | None = None
    projects: Annotated[
        list[Annotated[str, Field(min_length=1, max_length=100)]],
        Field(min_length=1, max_length=MAX_LIST),
    ] = ["*"]
    project: Annotated[str, Field(min_length=1, max_length=100)] | None = None
    tokenName: Text | None = None


# --- responses (documented in the OpenAPI document) ---


class ApiKeyOut(BaseModel):
    model_config = ConfigDict(title="apiTokenSchema")

    secret: str | None = None
    tokenName: str | None = None
    type: KeyType
    environment: str
    projects: list[str]
    project: str
    createdAt: datetime


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
    next: str | None = Field(
        None, description="URL of the next page when this one stops short of the last row"
    )


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
