"""What ``GET /api/client/delta`` answers and ``GET /api/client/streaming`` sends in each
event: Unleash's ``clientFeaturesDeltaSchema``, a list of events. ``relay.core.delta``
renders them; these models document them in the OpenAPI document and let tests read what
is served."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from relay.wire.client_features import ClientFeature, ClientSegment


class Hydration(BaseModel):
    """Every flag and segment the key sees, replacing what the SDK holds."""

    model_config = ConfigDict(title="deltaHydrationEventSchema", extra="forbid")

    eventId: int
    type: Literal["hydration"]
    features: list[ClientFeature]
    segments: list[ClientSegment]


class FeatureUpdated(BaseModel):
    model_config = ConfigDict(title="deltaFeatureUpdatedEventSchema", extra="forbid")

    eventId: int
    type: Literal["feature-updated"]
    feature: ClientFeature


class FeatureRemoved(BaseModel):
    model_config = ConfigDict(title="deltaFeatureRemovedEventSchema", extra="forbid")

    eventId: int
    type: Literal["feature-removed"]
    featureName: str
    project: str | None


class SegmentUpdated(BaseModel):
    model_config = ConfigDict(title="deltaSegmentUpdatedEventSchema", extra="forbid")

    eventId: int
    type: Literal["segment-updated"]
    segment: ClientSegment


class SegmentRemoved(BaseModel):
    model_config = ConfigDict(title="deltaSegmentRemovedEventSchema", extra="forbid")

    eventId: int
    type: Literal["segment-removed"]
    segmentId: int


DeltaEvent = Annotated[
    Hydration | FeatureUpdated | FeatureRemoved | SegmentUpdated | SegmentRemoved,
    Field(discriminator="type"),
]


class ClientFeaturesDelta(BaseModel):
    """Events in the order an SDK applies them; the ETag (and SSE ``id``) is the last one's
    ``eventId``."""

    model_config = ConfigDict(title="clientFeaturesDeltaSchema", extra="forbid")

    events: list[DeltaEvent]
