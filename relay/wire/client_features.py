"""What SDKs read from ``GET /api/client/features``: Unleash's ``clientFeaturesSchema``
(format version 2). ``relay.core.client_features`` renders it; these models document it in
the OpenAPI document and let tests check what is served."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from relay.wire.strategies import Constraint, StrategyVariant, Variant


class ClientStrategy(BaseModel):
    """A strategy as SDKs get it: no id, title or sort order (old Go SDKs break on an id);
    ``segments`` only when it has some and the SDK resolves them itself."""

    model_config = ConfigDict(title="clientFeatureStrategySchema", extra="forbid")

    name: str
    constraints: list[Constraint]
    parameters: dict[str, str]
    variants: list[StrategyVariant]
    segments: list[int] | None = None


class ClientDependency(BaseModel):
    """``dependentFeatureSchema``: ``variants`` only when the parent must be enabled."""

    model_config = ConfigDict(title="dependentFeatureSchema", extra="forbid")

    feature: str
    enabled: bool
    variants: list[str] | None = None


class ClientFeature(BaseModel):
    model_config = ConfigDict(title="clientFeatureSchema", extra="forbid")

    name: str
    type: str
    enabled: bool
    project: str
    stale: bool
    strategies: list[ClientStrategy]
    variants: list[Variant]
    description: str | None
    impressionData: bool
    dependencies: list[ClientDependency] | None = None


class ClientSegment(BaseModel):
    model_config = ConfigDict(title="clientSegmentSchema", extra="forbid")

    id: int
    name: str
    constraints: list[Constraint]


class ClientFeaturesQuery(BaseModel):
    model_config = ConfigDict(title="clientFeaturesQuerySchema", extra="forbid")

    project: list[str] | None = None
    namePrefix: str | None = None
    environment: str
    inlineSegmentConstraints: bool


class ClientFeaturesMeta(BaseModel):
    model_config = ConfigDict(extra="forbid")

    revisionId: int
    etag: str
    queryHash: str


class ClientFeatures(BaseModel):
    """``segments`` is absent for SDKs whose ``Unleash-Client-Spec`` is older than 4.2.0:
    their segments' constraints are inlined into each strategy's instead."""

    model_config = ConfigDict(title="clientFeaturesSchema", extra="forbid")

    version: int
    features: list[ClientFeature]
    query: ClientFeaturesQuery
    segments: list[ClientSegment] | None = None
    meta: ClientFeaturesMeta
