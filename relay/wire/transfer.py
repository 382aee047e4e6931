"""Unleash 8.2's export and import of flags (``/api/admin/features-batch/export|import|
validate``): the query, the export file (``exportResultSchema``), the import body
(``importTogglesSchema``) and the validation answer (``importTogglesValidateSchema``).

One model is both what an export writes and what an import reads, so a file we write is a
file we take. Items keep Unleash's field names; fields Unleash writes that we do not keep
(``createdAt``, ``lastSeenAt``, ``createdByUserId``...) are ignored on the way in, while
what we keep is checked as the admin API checks it (strategies, variants, tags).
"""

from __future__ import annotations

from collections import Counter
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, model_validator

from relay.wire.common import FlagType, Name, Strict, empty
from relay.wire.flags import (
    CreateDependency,
    Description,
    FlagName,
    TagPart,
    TagType,
    TagTypeName,
)
from relay.wire.strategies import Strategy, Variant

MAX_IMPORT_FLAGS = 250
"""Flags one import may carry (Unleash's own limit is the project's flag limit): with the
request body limit (``max_body_bytes``) it bounds one import's transaction, which other
writes wait for (about 6 ms a flag: 250 hold SQLite's metric posts some 1.5 s, 1,000 held
them 6 s). A larger project moves in parts, chosen by name or tag, parents first."""

MAX_FLAG_STRATEGIES = 30
"""Strategies one flag may carry in a file (Unleash's own default limit per flag and
environment, so no file of a default Unleash passes it): each strategy imported re-reads
its flag's, so the work grows with their square: on one flag 1,000 (a 41 KB body) held the
store's write 13 s and 5,000 (205 KB, within ``max_body_bytes``) 299 s."""

MAX_IMPORT_ITEMS = 20 * MAX_IMPORT_FLAGS
"""Strategies, environments, tags... one import may carry, in each list."""


class _Item(BaseModel):
    """An item of Unleash's file: fields we do not keep are ignored."""

    model_config = ConfigDict(extra="ignore", frozen=True)


_MANY = Field(max_length=MAX_IMPORT_ITEMS)


class ExportedFeature(_Item):
    name: FlagName
    type: FlagType = FlagType.RELEASE
    description: Description | None = None
    project: Name | None = None
    stale: StrictBool = False
    impressionData: StrictBool = False
    archived: StrictBool = False


class ExportedStrategy(Strategy):
    """A flag's strategy in the exported environment (``featureName`` says whose; ``id``
    is the source's, a new one is given on import; ``segments`` are the source's ids, named
    in ``segments`` of the file)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    id: Annotated[str, Field(max_length=100)] | None = None
    featureName: FlagName


class ExportedEnvironment(_Item):
    """A flag's state in the exported environment: on or off, its environment variants."""

    name: FlagName
    featureName: FlagName | None = None
    environment: Name | None = None
    enabled: StrictBool
    variants: Annotated[list[Variant], Field(max_length=100)] = empty(list)


class ExportedTag(_Item):
    """A flag's tag, its parts checked as ``wire.flags.Tag`` checks them."""

    featureName: FlagName
    tagType: TagTypeName
    tagValue: TagPart


class ExportedTagType(TagType):
    model_config = ConfigDict(extra="ignore", frozen=True)


class ExportedSegment(_Item):
    """A segment a strategy names: matched by name where the file is imported."""

    id: StrictInt
    name: Name


class ExportedContextField(_Item):
    """A context field a strategy or variant uses (we keep no context field definitions:
    exported empty, taken and ignored on import)."""

    name: Name


class ExportedDependency(_Item):
    feature: FlagName
    dependencies: Annotated[list[CreateDependency], Field(max_length=1)]


class ExportedLinks(_Item):
    """A flag's links (Unleash 8.2 exports them; we keep none: exported empty, taken and
    ignored on import)."""

    feature: FlagName


class ExportResult(_Item):
    """Unleash's ``exportResultSchema``."""

    model_config = ConfigDict(extra="ignore", frozen=True, title="exportResultSchema")

    features: Annotated[list[ExportedFeature], Field(max_length=MAX_IMPORT_FLAGS)]
    featureStrategies: Annotated[list[ExportedStrategy], _MANY]
    featureEnvironments: Annotated[list[ExportedEnvironment], _MANY] = empty(list)
    contextFields: Annotated[list[ExportedContextField], _MANY] = empty(list)
    featureTags: Annotated[list[ExportedTag], _MANY] = empty(list)
    segments: Annotated[list[ExportedSegment], _MANY] = empty(list)
    tagTypes: Annotated[list[ExportedTagType], _MANY] = empty(list)
    dependencies: Annotated[list[ExportedDependency], _MANY] = empty(list)
    links: Annotated[list[ExportedLinks], _MANY] = empty(list)

    @model_validator(mode="after")
    def _strategies_bounded(self) -> ExportResult:
        """A flag's strategies at most ``MAX_FLAG_STRATEGIES``, its state once (the file is
        one environment's: each repeat was one more write of the flag, 5,000 took 5.7 s)."""
        crowded = Counter(s.featureName for s in self.featureStrategies)
        over = sorted(name for name, count in crowded.items() if count > MAX_FLAG_STRATEGIES)
        if over:
            raise ValueError(
                f"flags with more than {MAX_FLAG_STRATEGIES} strategies: {', '.join(over)}"
            )
        states = Counter(e.name for e in self.featureEnvironments)
        twice = sorted(name for name, count in states.items() if count > 1)
        if twice:
            raise ValueError(f"flags named twice in featureEnvironments: {', '.join(twice)}")
        return self


class ExportQuery(Strict):
    """Which flags to export, from which environment: named ones, those with a tag value,
    a project's, else every flag. ``downloadFile`` is taken and changes nothing, as in
    Unleash 8.2's server (its web page saves the answer as a file)."""

    model_config = ConfigDict(extra="forbid", frozen=True, title="exportQuerySchema")

    environment: Name
    features: Annotated[list[FlagName], Field(max_length=MAX_IMPORT_FLAGS)] | None = None
    tag: TagPart | None = None
    project: Name | None = None
    downloadFile: StrictBool = False


class ImportBody(Strict):
    """Unleash's ``importTogglesSchema``: the file's flags into a project's environment."""

    model_config = ConfigDict(extra="forbid", frozen=True, title="importTogglesSchema")

    project: Name
    environment: Name
    data: ExportResult


class ValidationItem(BaseModel):
    message: str
    affectedItems: list[str]


class ValidationOut(BaseModel):
    """Unleash's ``importTogglesValidateSchema``: errors refuse the import, warnings say
    what it will do; ``permissions`` is always empty (an admin key may do all of it)."""

    model_config = ConfigDict(title="importTogglesValidateSchema")

    errors: list[ValidationItem]
    warnings: list[ValidationItem]
    permissions: list[ValidationItem] = empty(list)
