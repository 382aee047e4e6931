"""Bodies of the flag admin API: flags, their environments, segments, JSON Patch documents
and the unknown-flags report, named after Unleash's schemas."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, RootModel, StrictBool

from relay.wire.client_features import ClientDependency
from relay.wire.common import MAX_LIST, FlagType, Name, Strict, empty
from relay.wire.strategies import Constraint, StrategyOut, Variant


def _not_dots(name: str) -> str:
    if name in (".", ".."):
        raise ValueError("must be URL friendly")
    return name


# Unleash's name rule: 1..100 characters that encodeURIComponent leaves as they are
FlagName = Annotated[
    str,
    Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_.!~*'()-]+$"),
    AfterValidator(_not_dots),
]
Description = Annotated[str, Field(max_length=1000)]


class CreateFlag(Strict):
    model_config = ConfigDict(title="createFeatureSchema")

    name: FlagName
    type: FlagType = FlagType.RELEASE
    description: Description | None = None
    impressionData: StrictBool = False


class UpdateFlag(BaseModel):
    """``updateFeatureSchema``: what a flag's PUT (or the document a PATCH produces) may
    change. Other keys are ignored, as Unleash ignores them, so a client may send back the
    flag it read; ``name`` may be sent but not changed."""

    model_config = ConfigDict(title="updateFeatureSchema", extra="ignore", frozen=True)

    name: Name | None = None
    description: Description | None = None
    type: FlagType = FlagType.RELEASE
    stale: StrictBool = False
    impressionData: StrictBool = False


class FlagEnvironmentOut(BaseModel):
    """``featureEnvironmentSchema``: a flag in one environment of its project."""

    model_config = ConfigDict(title="featureEnvironmentSchema")

    name: str
    environment: str
    type: str
    enabled: bool
    sortOrder: int
    strategies: list[StrategyOut]
    hasStrategies: bool
    hasEnabledStrategies: bool
    variants: list[Variant] = empty(list)


class FlagOut(BaseModel):
    model_config = ConfigDict(title="featureSchema")

    name: str
    type: str
    description: str | None
    project: str
    stale: bool
    impressionData: bool
    archived: bool
    createdAt: datetime
    archivedAt: datetime | None
    environments: list[FlagEnvironmentOut]
    dependencies: list[ClientDependency] = empty(list)
    children: list[str] = empty(list)


class ProjectFlagsOut(BaseModel):
    model_config = ConfigDict(title="projectFeaturesSchema")

    version: int = 2
    features: list[FlagOut]


class StrategiesOut(RootModel[list[StrategyOut]]):
    model_config = ConfigDict(title="featureStrategiesSchema")


# --- dependencies and variants ---


class CreateDependency(Strict):
    """``createDependentFeatureSchema``: the parent a flag depends on, and whether it must
    be enabled (the default) or disabled; ``variants`` (when enabled) the parent's
    variants that satisfy it, none for any."""

    model_config = ConfigDict(title="createDependentFeatureSchema")

    feature: FlagName
    enabled: StrictBool = True
    variants: Annotated[list[Name], Field(max_length=MAX_LIST)] | None = None


class Names(RootModel[list[str]]):
    """Flag or variant names (``parentFeatureOptionsSchema``, ``parentVariantOptionsSchema``)."""

    model_config = ConfigDict(title="parentFeatureOptionsSchema")


class DependenciesExist(RootModel[bool]):
    model_config = ConfigDict(title="dependenciesExistSchema")


class Variants(RootModel[Annotated[list[Variant], Field(max_length=MAX_LIST)]]):
    model_config = ConfigDict(title="variantsSchema")


class PushVariants(Strict):
    """``pushVariantsSchema``: the same variants written to several environments."""

    model_config = ConfigDict(title="pushVariantsSchema")

    variants: Annotated[list[Variant], Field(max_length=MAX_LIST)] = empty(list)
    environments: Annotated[list[Name], Field(max_length=MAX_LIST)] = empty(list)


class VariantsOut(BaseModel):
    model_config = ConfigDict(title="featureVariantsSchema")

    version: int = 1
    variants: list[Variant]


# --- tags ---

TagPart = Annotated[str, Field(min_length=2, max_length=50)]
TagTypeName = Annotated[TagPart, Field(pattern=r"^[A-Za-z0-9_.!~*'()-]+$")]


class Tag(Strict):
    """``tagSchema``: a flag's tag; ``type`` a tag type that exists (``simple`` by default)."""

    model_config = ConfigDict(title="tagSchema")

    value: TagPart
    type: TagTypeName = "simple"


class TagsOut(BaseModel):
    model_config = ConfigDict(title="tagsSchema")

    version: int = 1
    tags: list[Tag]


class UpdateTags(Strict):
    """``updateTagsSchema``: tags added, then tags removed."""

    model_config = ConfigDict(title="updateTagsSchema")

    addedTags: Annotated[list[Tag], Field(max_length=MAX_LIST)]
    removedTags: Annotated[list[Tag], Field(max_length=MAX_LIST)]


class TagType(Strict):
    model_config = ConfigDict(title="tagTypeSchema")

    name: TagTypeName
    description: Description = ""
    icon: Annotated[str, Field(max_length=100)] | None = None
    color: Annotated[str, Field(pattern=r"^#[0-9A-Fa-f]{6}$")] | None = None


class TagTypesOut(BaseModel):
    model_config = ConfigDict(title="tagTypesSchema")

    version: int = 1
    tagTypes: list[TagType]


# --- segments ---


class UpsertSegment(Strict):
    model_config = ConfigDict(title="upsertSegmentSchema")

    name: Name
    description: Description | None = None
    project: Annotated[str, Field(min_length=1, max_length=100)] | None = None
    constraints: Annotated[list[Constraint], Field(max_length=MAX_LIST)]


class SegmentOut(BaseModel):
    model_config = ConfigDict(title="adminSegmentSchema")

    id: int
    name: str
    description: str | None
    project: str | None
    constraints: list[Constraint]
    usedInFeatures: int
    usedInProjects: int
    createdAt: datetime


class SegmentsOut(BaseModel):
    model_config = ConfigDict(title="segmentsSchema")

    segments: list[SegmentOut]


# --- JSON Patch (RFC 6902), as Unleash's PATCH endpoints take it ---


class PatchOp(StrEnum):
    ADD = "add"
    REMOVE = "remove"
    REPLACE = "replace"
    MOVE = "move"
    COPY = "copy"
    TEST = "test"


class PatchOperation(Strict):
    model_config = ConfigDict(title="patchSchema", populate_by_name=True)

    op: PatchOp
    path: Annotated[str, Field(max_length=1000)]
    value: Any = None
    from_: Annotated[str, Field(max_length=1000)] | None = Field(None, alias="from")


class Patches(RootModel[Annotated[list[PatchOperation], Field(max_length=MAX_LIST)]]):
    model_config = ConfigDict(title="patchesSchema")


# --- metrics of names no flag has ---


class UnknownFlagEnvironment(BaseModel):
    environment: str
    seenAt: datetime


class UnknownFlagReport(BaseModel):
    appName: str
    environments: list[UnknownFlagEnvironment]


class UnknownFlag(BaseModel):
    model_config = ConfigDict(title="unknownFlagSchema")

    name: str
    lastSeenAt: datetime
    lastEventAt: datetime | None = None
    reports: list[UnknownFlagReport]


class UnknownFlagsOut(BaseModel):
    model_config = ConfigDict(title="unknownFlagsResponseSchema")

    unknownFlags: list[UnknownFlag]
