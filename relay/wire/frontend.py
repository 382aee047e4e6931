"""The Frontend API's bodies (browser and mobile SDKs): the context a ``POST /api/frontend``
carries, and the toggles every frontend answer lists (Unleash's ``frontendApiFeaturesSchema``).

A context holds the fields Unleash names, and any other field as a property, as Unleash's
``createContext`` takes them; values are strings, numbers or booleans (read as their text).
It is bounded like every body: ``MAX_PROPERTIES`` properties of ``MAX_NAME`` characters.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    TypeAdapter,
    model_validator,
)

from relay.wire.common import MAX_LIST, MAX_NAME

MAX_PROPERTIES = MAX_LIST
MAX_VALUE = 4096
"""Characters of one context value: room for a long user agent, never a megabyte."""

Value = Annotated[str, Field(max_length=MAX_VALUE)] | StrictInt | StrictFloat | StrictBool
Properties = Annotated[
    dict[Annotated[str, Field(max_length=MAX_NAME)], Value | None],
    Field(max_length=MAX_PROPERTIES),
]


class FrontendContext(BaseModel):
    """Unleash's ``sdkContextSchema``: other fields are properties. ``currentTime`` is read
    as a property too: date constraints use the server's clock, as Unleash does."""

    model_config = ConfigDict(title="sdkContextSchema", extra="allow")

    appName: Value | None = None
    environment: Value | None = None
    userId: Value | None = None
    sessionId: Value | None = None
    remoteAddress: Value | None = None
    properties: Properties | None = None

    @model_validator(mode="after")
    def _bounded(self) -> FrontendContext:
        """Other fields are properties: as many, as long and as simple as those."""
        extra = self.__pydantic_extra__ or {}
        if len(extra) + len(self.properties or ()) > MAX_PROPERTIES:
            raise ValueError(f"at most {MAX_PROPERTIES} properties")
        _EXTRA.validate_python(extra)
        return self

    @property
    def extra(self) -> dict[str, Value | None]:
        return self.__pydantic_extra__ or {}


_EXTRA: TypeAdapter[dict[str, Value | None]] = TypeAdapter(Properties)


class FrontendRequest(BaseModel):
    """``POST /api/frontend``'s body."""

    model_config = ConfigDict(title="frontendApiFeaturesPostSchema")

    context: FrontendContext = Field(default_factory=FrontendContext)


class Payload(BaseModel):
    type: Literal["json", "csv", "string", "number"] | str
    value: str


class EvaluatedVariant(BaseModel):
    name: str
    enabled: bool
    payload: Payload | None = None
    feature_enabled: bool
    featureEnabled: bool = Field(description="The same as feature_enabled (deprecated name)")


class Toggle(BaseModel):
    model_config = ConfigDict(title="frontendApiFeatureSchema")

    name: str
    enabled: bool
    variant: EvaluatedVariant
    impressionData: bool


class Toggles(BaseModel):
    model_config = ConfigDict(title="frontendApiFeaturesSchema")

    toggles: list[Toggle]
