"""Activation strategies, their constraints and variants: one set of models for a flag's
strategies, a project environment's default strategy (add-environment and
``default-strategy``) and segments' constraints.

Constraints are checked when they are saved, so that one the SDKs cannot evaluate is refused
with a 400 (its ``value`` named) rather than served: for ``NUM_*`` a plain decimal number that
every SDK parses to the same finite number (the Node SDK's ``Number()`` makes NaN of ``1_000``
and Arabic-Indic digits, which Python's ``float`` takes); for ``DATE_*`` an RFC 3339
date-time with its offset, to the second or the millisecond (no ISO week or ordinal dates, no
local times, which SDKs read in their own zone); for ``SEMVER_*`` a strict SemVer that the
Node SDK's ``semver`` takes (256 characters, parts up to 2^53 - 1); at least one value for
the string operators; for ``REGEX`` an expression RE2 compiles, never inverted. What was
saved is read back as it was (``SAVED``), so a constraint an older version took never makes
a read fail.
"""

from __future__ import annotations

import json
import math
import re
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any, NamedTuple

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    RootModel,
    SerializerFunctionWrapHandler,
    StrictBool,
    StrictInt,
    ValidationInfo,
    field_validator,
    model_serializer,
    model_validator,
)

from relay.wire.common import MAX_LIST, Name, Strict, Text, empty

REGEX_MEMORY = 256 * 1024
"""RE2's ``max_mem`` per expression, when saved and when evaluated
(``relay.core.evaluate.constraints``): its program and the DFA states its searches cache
(8 MiB by default, which a caller's values could fill in every expression of a scope). An
expression whose program does not fit (about 12,000 instructions: ``\\p{L}{20}``) is refused."""

# sort orders are stored in 32-bit integer columns
SortOrder = Annotated[StrictInt, Field(ge=-(2**31), le=2**31 - 1)]
SegmentId = Annotated[StrictInt, Field(ge=1, le=2**31 - 1)]
Value = Annotated[str, Field(max_length=4096)]
Parameters = Annotated[dict[Name, Value], Field(max_length=MAX_LIST)]

# what JavaScript's Number(), Python's float, Go's ParseFloat and Java's parseDouble all read
# as the same number: ASCII digits, no "_", no hexadecimal, no ".5" or "5." (Ruby refuses them)
_NUMBER = re.compile(r"[+-]?[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
# RFC 3339's date-time, with the upper-case T and Z that Go's time.RFC3339 requires, and
# seconds whole or to the millisecond: yggdrasil (the engine of the Python, Ruby, .NET...
# SDKs) holds a constraint with any other fraction false both before and after its time
_DATE_TIME = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{3})?(?:Z|[+-][0-9]{2}:[0-9]{2})"
)
_SEMVER_LENGTH = 256  # node-semver's MAX_LENGTH
_SAFE_INTEGER = 2**53 - 1  # node-semver refuses a larger major, minor or patch
# SemVer 2.0.0, without the leading "v" or "=" that only a loose parser takes
_SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*)(?:\.(?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*))*))?"
    r"(?:\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?$",
    re.ASCII,  # \d is [0-9]: "1\u0665.2.3" is no version to node-semver
)


class SemVer(NamedTuple):
    """A strict SemVer's parts; ``precedence`` orders versions as SemVer 2.0.0 does (build
    metadata ignored, a pre-release before its release, numeric identifiers before others)."""

    major: int
    minor: int
    patch: int
    prerelease: tuple[str, ...]

    @property
    def precedence(self) -> tuple[Any, ...]:
        identifiers = tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in self.prerelease)
        return self.major, self.minor, self.patch, not self.prerelease, identifiers


def semver(value: str) -> SemVer | None:
    """The parts of a strict SemVer, else None (what node-semver's strict parser takes)."""
    found = _SEMVER.fullmatch(value) if len(value) <= _SEMVER_LENGTH else None
    if found is None or max(len(found[i]) for i in (1, 2, 3)) > len(str(_SAFE_INTEGER)):
        return None
    major, minor, patch = int(found[1]), int(found[2]), int(found[3])
    if max(major, minor, patch) > _SAFE_INTEGER:
        return None
    return SemVer(major, minor, patch, tuple(found[4].split(".")) if found[4] else ())


def number(value: str) -> float | None:
    """A constraint's decimal number as every SDK reads it, else None."""
    parsed = float(value) if _NUMBER.fullmatch(value) else math.nan
    return parsed if math.isfinite(parsed) else None


def date_time(value: str) -> datetime | None:
    """An RFC 3339 date-time with its offset (to the second or the millisecond), else None."""
    if _DATE_TIME.fullmatch(value) is None:
        return None
    try:  # a real day and time (no 02-30, no 24:00, no leap second), within years 1 to 9999
        return datetime.fromisoformat(value).astimezone(UTC)
    except (ValueError, OverflowError):
        return None


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


_LIST_OPERATORS = {"IN", "NOT_IN", "STR_CONTAINS", "STR_STARTS_WITH", "STR_ENDS_WITH"}

# The validation context of what is read back from storage: checked when it was saved, under
# the rules of its day, it is shown as it is (``model_validate(..., context=SAVED)``).
SAVED = {"saved": True}


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
    values: Annotated[list[Value], Field(max_length=1000)] = empty(list)
    value: Value | None = None
    inverted: StrictBool = False
    caseInsensitive: StrictBool = False

    @field_validator("value")
    @classmethod
    def _value_evaluable(cls, value: str | None, info: ValidationInfo) -> str | None:
        operator = info.data.get("operator")
        if value is None or operator is None or info.context is SAVED:
            return value
        problem = _value_problem(operator.value, value)
        if problem is not None:
            raise ValueError(problem)
        return value

    @model_validator(mode="after")
    def _evaluable(self, info: ValidationInfo) -> Constraint:
        problem = None if info.context is SAVED else _constraint_problem(self)
        if problem is not None:
            raise ValueError(problem)
        return self

    @model_serializer(mode="wrap")
    def _without_empty_value(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """``value`` only when there is one, as Unleash stores and serves constraints."""
        data: dict[str, Any] = handler(self)
        if data.get("value") is None:
            data.pop("value", None)
        return data


def _constraint_problem(c: Constraint) -> str | None:
    """Why an SDK could not evaluate ``c`` as a whole (its value is checked on its own)."""
    op = c.operator.value
    if op in _LIST_OPERATORS:
        return None if c.values else f"{op} needs at least one value in `values`"
    if not c.value:
        return f"{op} needs a single `value`"
    return "REGEX cannot be inverted" if op == "REGEX" and c.inverted else None


def _value_problem(op: str, value: str) -> str | None:
    """Why the SDKs could not read ``value`` for ``op``; None when they all can."""
    shown = repr(value[:40])
    if op.startswith("NUM_"):
        return None if number(value) is not None else f"{op} needs a decimal number, not {shown}"
    if op.startswith("DATE_"):
        valid = date_time(value) is not None
        return None if valid else f"{op} needs an RFC 3339 date-time, not {shown}"
    if op.startswith("SEMVER_"):
        return None if semver(value) else f"{op} needs a SemVer version, not {shown}"
    if op != "REGEX":
        return None
    import re2  # type: ignore[import-untyped]  # here: only a service saving flags needs it

    options = re2.Options()
    options.log_errors = False  # a refused expression is the caller's 400, not a line on stderr
    options.max_mem = REGEX_MEMORY
    try:  # in RE2's syntax, as Unleash checks it (its SDKs take that syntax)
        re2.compile(value, options)
    except re2.error as exc:
        return f"REGEX needs a valid RE2 regular expression: {exc.args[0].decode(errors='replace')}"
    return None


class VariantPayload(Strict):
    type: PayloadType
    value: Annotated[str, Field(max_length=64 * 1024)]

    @model_validator(mode="after")
    def _json_parses(self) -> VariantPayload:
        if self.type is PayloadType.JSON:
            try:
                json.loads(self.value)
            except ValueError:
                raise ValueError("a json payload's value must be valid JSON") from None
        return self


class StrategyVariant(Strict):
    model_config = ConfigDict(title="strategyVariantSchema")

    name: Name
    weight: Annotated[StrictInt, Field(ge=0, le=1000)]
    weightType: WeightType
    stickiness: Name
    payload: VariantPayload | None = None


class VariantOverride(Strict):
    model_config = ConfigDict(title="overrideSchema")

    contextName: Name
    values: Annotated[list[Value], Field(max_length=1000)] = empty(list)


class Variant(StrategyVariant):
    """``variantSchema``: a flag's own variant in one environment (Unleash's environment
    variants): a strategy variant, ``weightType`` and ``stickiness`` defaulted as Unleash
    defaults them, with overrides (context values that get it whatever the weights)."""

    model_config = ConfigDict(title="variantSchema")

    weightType: WeightType = WeightType.VARIABLE
    stickiness: Name = "default"
    overrides: Annotated[list[VariantOverride], Field(max_length=MAX_LIST)] = empty(list)

    @model_serializer(mode="wrap")
    def _without_empty(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """``overrides`` and ``payload`` only when there are some, as Unleash keeps what
        it was sent."""
        data: dict[str, Any] = handler(self)
        for name in ("overrides", "payload"):
            if not data.get(name):
                data.pop(name, None)
        return data


class Strategy(Strict):
    """``createFeatureStrategySchema``: a strategy as sent, for a flag in an environment or
    as a project environment's default."""

    model_config = ConfigDict(title="createFeatureStrategySchema")

    name: Name
    title: Text | None = None
    disabled: StrictBool | None = None
    sortOrder: SortOrder | None = None
    constraints: Annotated[list[Constraint], Field(max_length=MAX_LIST)] = empty(list)
    variants: Annotated[list[StrategyVariant], Field(max_length=MAX_LIST)] = empty(list)
    parameters: Parameters = empty(dict)
    segments: Annotated[list[SegmentId], Field(max_length=MAX_LIST)] = empty(list)


class StrategyOut(BaseModel):
    """``featureStrategySchema``: a saved strategy of a flag in one environment."""

    model_config = ConfigDict(title="featureStrategySchema")

    id: str
    name: str
    title: str | None = None
    disabled: bool = False
    featureName: str
    sortOrder: int
    constraints: list[Constraint]
    variants: list[StrategyVariant]
    parameters: dict[str, str]
    segments: list[int]


class StrategySortOrder(Strict):
    """One strategy's new place in ``set-sort-order``."""

    id: Annotated[str, Field(min_length=1, max_length=100)]
    sortOrder: SortOrder


class SetStrategySortOrder(RootModel[Annotated[list[StrategySortOrder], Field(max_length=1000)]]):
    """``setStrategySortOrderSchema``: new sort orders of a flag's strategies in one
    environment (those not named keep theirs)."""

    model_config = ConfigDict(title="setStrategySortOrderSchema")
