"""Activation strategies, their constraints and variants: one set of models for a flag's
strategies, a project environment's default strategy (add-environment and
``default-strategy``) and segments' constraints.

Constraints are checked as Unleash checks them when they are saved (a number for ``NUM_*``,
a date for ``DATE_*``, a strict SemVer for ``SEMVER_*``, at least one value for the string
operators, a regular expression that compiles and is not inverted for ``REGEX``), so a
constraint the SDKs cannot evaluate is refused with a 400 rather than served.
"""

from __future__ import annotations

import json
import math
import re
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any

import re2  # type: ignore[import-untyped]
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    StrictBool,
    StrictInt,
    model_serializer,
    model_validator,
)

from relay.wire.common import MAX_LIST, Name, Strict, Text

_RE2 = re2.Options()
_RE2.log_errors = False  # a refused expression is the caller's 400, not a line on stderr

# sort orders are stored in 32-bit integer columns
SortOrder = Annotated[StrictInt, Field(ge=-(2**31), le=2**31 - 1)]
SegmentId = Annotated[StrictInt, Field(ge=1, le=2**31 - 1)]
Value = Annotated[str, Field(max_length=4096)]
Parameters = Annotated[dict[Name, Value], Field(max_length=MAX_LIST)]

# SemVer 2.0.0, without the leading "v" or "=" that only a loose parser takes
_SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*)(?:\.(?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*))*))?"
    r"(?:\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?$"
)


def semver(value: str) -> tuple[int, int, int, bool] | None:
    """(major, minor, patch, is a pre-release) of a strict SemVer, else None."""
    found = _SEMVER.match(value)
    if found is None:
        return None
    return int(found[1]), int(found[2]), int(found[3]), found[4] is not None


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
    values: Annotated[list[Value], Field(max_length=1000)] = []
    value: Value | None = None
    inverted: StrictBool = False
    caseInsensitive: StrictBool = False

    @model_validator(mode="after")
    def _evaluable(self) -> Constraint:
        problem = _constraint_problem(self)
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
    """Why an SDK could not evaluate ``c``, as Unleash refuses it; None when it can."""
    op = c.operator.value
    if op in _LIST_OPERATORS:
        return None if c.values else f"{op} needs at least one value in `values`"
    if not c.value:
        return f"{op} needs a single `value`"
    if op.startswith("NUM_"):
        try:
            number = float(c.value)
        except ValueError:
            number = math.nan
        return None if math.isfinite(number) else f"{op} needs a number, not {c.value!r}"
    if op.startswith("DATE_"):
        try:
            datetime.fromisoformat(c.value)
        except ValueError:
            return f"{op} needs an ISO 8601 date, not {c.value!r}"
        return None
    if op.startswith("SEMVER_"):
        return None if semver(c.value) else f"{op} needs a SemVer version, not {c.value!r}"
    try:  # REGEX, in RE2's syntax, as Unleash checks it (its SDKs take that syntax)
        re2.compile(c.value, _RE2)
    except re2.error as exc:
        return f"REGEX needs a valid RE2 regular expression: {exc.args[0].decode(errors='replace')}"
    return "REGEX cannot be inverted" if c.inverted else None


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


class Strategy(Strict):
    """``createFeatureStrategySchema``: a strategy as sent, for a flag in an environment or
    as a project environment's default."""

    model_config = ConfigDict(title="createFeatureStrategySchema")

    name: Name
    title: Text | None = None
    disabled: StrictBool | None = None
    sortOrder: SortOrder | None = None
    constraints: Annotated[list[Constraint], Field(max_length=MAX_LIST)] = []
    variants: Annotated[list[StrategyVariant], Field(max_length=MAX_LIST)] = []
    parameters: Parameters = {}
    segments: Annotated[list[SegmentId], Field(max_length=MAX_LIST)] = []


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
