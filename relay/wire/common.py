"""Types, limits and bodies every audience shares: names, counts, times, errors, key types.

The limits here are the service's documented input limits (docs/operations.md, "Limits").
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
    StrictInt,
    TypeAdapter,
    WithJsonSchema,
)
from pydantic_core import core_schema

MAX_NAME = 255
# Names that make up the key of a count or a registration (feature, app, environment,
# instance, variant) must also fit this many bytes of UTF-8: a key of four such names then
# fits PostgreSQL's index row limit (2,704 bytes), which four names of 255 four-byte
# characters do not. Checked where the keys are built (``core.convert``), nearly free there.
MAX_NAME_BYTES = 512
MAX_COUNT = 2**31 - 1  # Unleash stores counts in 32-bit integer columns
MAX_METRICS = 10_000
MAX_APPLICATIONS = 1_000
MAX_VARIANTS = 100
MAX_LIST = 100


# NUL characters are refused too (``api.body.read_json``): PostgreSQL text cannot hold
# them. A `pattern` here would double the cost of validating a bulk body.
Name = Annotated[str, Field(min_length=1, max_length=MAX_NAME)]
KeyName = Annotated[
    str,
    Field(
        min_length=1,
        max_length=MAX_NAME,
        description=f"1 to {MAX_NAME} characters, at most {MAX_NAME_BYTES} bytes in UTF-8",
    ),
]
Text = Annotated[str, Field(max_length=MAX_NAME)]
Count = Annotated[StrictInt, Field(ge=0, le=MAX_COUNT)]
# JSON has no infinity or NaN, but parsers read 1e999 as one: a number kept and served
# again must be finite, or serialising it back (as null) gives a record no read accepts.
NonNegativeFinite = Annotated[float, Field(ge=0, allow_inf_nan=False)]
# RFC 3339 requires an offset; a timestamp without one is read as UTC (``core.ingest_batch.epoch``),
# not refused, because a 4xx makes the Node SDK stop sending metrics for good. Years 1..9999
# in UTC are enforced where the instant is computed (``core.ingest_batch.epoch``, once per distinct
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


def empty(kind: type[list[Any]] | type[dict[str, Any]]) -> Any:
    """A field's default of ``[]`` or ``{}``, made anew for each model (and documented as
    that value). A literal ``[]`` or ``{}`` default is deep-copied for each model instead:
    a bulk of 4,000 metrics took 11 ms to validate with them, 5 ms with this."""
    return Field(default_factory=kind, json_schema_extra={"default": kind()})


def parse_time(value: str | float) -> datetime:
    """A ``RawTimestamp`` as ``Timestamp`` fields read it; pydantic's ``ValidationError`` if
    it is not a time."""
    return _TIME.validate_python(value)


class Wire(BaseModel):
    """Bodies from SDKs and relays: unknown keys are ignored, as Unleash does (newer peers
    send ``impactMetrics``...)."""

    model_config = ConfigDict(extra="ignore", frozen=True)


class Strict(BaseModel):
    """Admin bodies refuse unknown keys, as Unleash does."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class FlagType(StrEnum):
    """Unleash's flag types (what the flag is for: no effect on evaluation)."""

    EXPERIMENT = "experiment"
    KILL_SWITCH = "kill-switch"
    RELEASE = "release"
    OPERATIONAL = "operational"
    PERMISSION = "permission"
    SUNSET = "sunset"


class KeyType(StrEnum):
    """What an API key may do; Unleash's ``type`` of a token."""

    CLIENT = "client"
    FRONTEND = "frontend"
    ADMIN = "admin"

    @classmethod
    def _missing_(cls, value: object) -> KeyType | None:
        """Unleash takes a type in any case, and ``backend``, its newer name of ``client``."""
        if not isinstance(value, str):
            return None
        name = value.lower()
        return cls.CLIENT if name == "backend" else next((t for t in cls if t == name), None)


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


class Status(BaseModel):
    status: str
    countsWaitingForKey: list[str] | None = Field(
        None,
        description="A relay's environments whose counts wait: no key of theirs is known"
        " (none configured, none the upstream vouched for)",
    )
