"""The strategy form of the web page: its fields read into the body the admin API takes
(``relay.wire.strategies.Strategy``, checked by that model, so the page and the API never
disagree on a value), and a saved strategy read back into the fields.

Without a script, rows are added by posting the form back: it always ends with one blank
constraint row and one blank variant row, and "add another" re-renders the posted fields
(a blank row filled in becomes a row) without saving.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from pydantic import ValidationError

from relay.core import describe
from relay.wire.strategies import (
    Constraint,
    Operator,
    PayloadType,
    Strategy,
    StrategyOut,
    StrategyVariant,
    WeightType,
)

KINDS = {
    "default": "Standard (everyone)",
    "flexibleRollout": "Gradual rollout",
    "userWithId": "User IDs",
    "remoteAddress": "IP addresses",
    "applicationHostname": "Hostnames",
    "custom": "A custom strategy",
}
LISTED = {"userWithId": "userIds", "remoteAddress": "IPs", "applicationHostname": "hostNames"}
"""Built-in strategies whose one parameter is a comma-separated list."""
LIST_OPERATORS = ("IN", "NOT_IN", "STR_CONTAINS", "STR_STARTS_WITH", "STR_ENDS_WITH")
OPERATORS = {op.value: f"{op.value} ({describe.operator(op.value)})" for op in Operator}
"""Each operator and what the select shows of it."""
STICKINESS = ("default", "userId", "sessionId", "random")
CONTEXT_NAMES = (
    "userId",
    "sessionId",
    "remoteAddress",
    "environment",
    "appName",
    "currentTime",
)
PAYLOAD_TYPES = [t.value for t in PayloadType]
MAX_ROWS = 100
"""Constraints and variants a form reads (the model's own bound)."""
_SHARE = re.compile(r"[0-9]{1,3}(?:\.[0-9])?")
"""A variant's share in %: what a weight out of 1000 can be (``33.3``)."""
_SEGMENT = re.compile(r"segment-([0-9]{1,100})")
"""A segment's checkbox (ids past 2^31 - 1 are the model's to refuse)."""
FIELDS = 1_500
"""Fields one strategy form may post: 100 rows of each kind, segments and the rest."""


class FormProblem(Exception):
    """A field of the form the admin API would refuse: where, in the form's words, and why."""

    def __init__(self, where: str, message: str) -> None:
        super().__init__(f"{where}: {message}")
        self.where, self.message = where, message


@dataclass
class ConstraintRow:
    contextName: str = ""
    operator: str = "IN"
    values: str = ""
    """One value per line."""
    inverted: bool = False
    caseInsensitive: bool = False

    def body(self) -> dict[str, Any]:
        lines = [line.strip() for line in self.values.splitlines() if line.strip()]
        one = (
            {"values": lines} if self.operator in LIST_OPERATORS else {"value": self.values.strip()}
        )
        flags = {"inverted": self.inverted, "caseInsensitive": self.caseInsensitive}
        return {"contextName": self.contextName.strip(), "operator": self.operator, **one, **flags}


@dataclass
class VariantRow:
    name: str = ""
    share: str = ""
    """A fixed percentage (``33.3``); blank: a share of what the fixed ones leave."""
    payloadType: str = ""
    payload: str = ""


@dataclass
class StrategyForm:
    """The fields of the form, as shown and as posted."""

    kind: str
    name: str = ""
    """A custom strategy's name (the built-ins' is their kind)."""
    title: str = ""
    disabled: bool = False
    rollout: str = "100"
    stickiness: str = "default"
    group: str = ""
    listed: str = ""
    parameters: str = ""
    """A custom strategy's parameters, ``name=value`` a line."""
    constraints: list[ConstraintRow] = field(default_factory=list)
    variants: list[VariantRow] = field(default_factory=list)
    segments: set[int] = field(default_factory=set)

    @classmethod
    def saved(cls, strategy: StrategyOut) -> StrategyForm:
        kind = strategy.name if strategy.name in KINDS else "custom"
        params = dict(strategy.parameters)
        form = cls(
            kind=kind,
            name=strategy.name,
            title=strategy.title or "",
            disabled=strategy.disabled,
            segments=set(strategy.segments),
        )
        if kind == "flexibleRollout":
            form.rollout = params.pop("rollout", "100")
            form.stickiness = params.pop("stickiness", "default")
            form.group = params.pop("groupId", "")
        elif kind in LISTED:
            form.listed = params.pop(LISTED[kind], "")
        form.parameters = "\n".join(f"{k}={v}" for k, v in params.items())
        form.constraints = constraint_rows(strategy.constraints)
        form.variants = variant_rows(strategy.variants)
        return form

    @classmethod
    def posted(cls, values: Mapping[str, str]) -> StrategyForm:
        """The fields as posted; rows marked "remove" and blank rows left out."""
        kind = values.get("kind", "")
        form = cls(
            kind=kind if kind in KINDS else "custom",
            name=values.get("name", "").strip(),
            title=values.get("title", "").strip(),
            disabled="disabled" in values,
            rollout=values.get("rollout", "100").strip(),
            stickiness=values.get("stickiness", "default").strip(),
            group=values.get("group", "").strip(),
            listed=values.get("listed", ""),
            parameters=values.get("parameters", ""),
        )
        form.constraints = posted_constraints(values)
        form.variants = posted_variants(values)
        form.segments = {int(found[1]) for key in values if (found := _SEGMENT.fullmatch(key))}
        return form

    @property
    def strategy_name(self) -> str:
        return self.name if self.kind == "custom" else self.kind

    def body(self) -> Strategy:
        """The strategy the form says, checked by the admin API's model: ``FormProblem``
        names the first field it refuses in words (the page shows it, nothing is saved).
        Parameters of a built-in kind that its form has no field for (an API client set
        them) are kept, as "other parameters"."""
        params: dict[str, str] = {}
        for number, line in enumerate(self.parameters.splitlines(), 1):
            if line.strip():
                key, equals, value = line.partition("=")
                if not equals:
                    raise FormProblem("Parameters", f"line {number} is not name=value")
                params[key.strip()] = value.strip()
        if self.kind == "flexibleRollout":
            params |= {
                "rollout": self.rollout,
                "stickiness": self.stickiness,
                "groupId": self.group,
            }
        elif self.kind in LISTED:
            items = [item.strip() for item in self.listed.replace("\n", ",").split(",")]
            params[LISTED[self.kind]] = ",".join(item for item in items if item)
        stickiness = self.stickiness if self.kind == "flexibleRollout" else "default"
        body = {
            "name": self.strategy_name,
            "title": self.title or None,
            "disabled": self.disabled,
            "parameters": params,
            "constraints": [row.body() for row in self.constraints],
            "variants": [
                variant_body(i, row, stickiness) for i, row in enumerate(self.variants, 1)
            ],
            "segments": sorted(self.segments),
        }
        try:
            return Strategy.model_validate(body)
        except ValidationError as exc:
            first = exc.errors(include_url=False, include_input=False)[0]
            raise FormProblem(_where(first["loc"]), _message(first["msg"])) from None


def constraint_rows(constraints: Sequence[Constraint]) -> list[ConstraintRow]:
    """Saved constraints (a strategy's, a segment's) as the editor's rows."""
    return [
        ConstraintRow(
            c.contextName,
            c.operator.value,
            "\n".join(c.values) if c.operator.value in LIST_OPERATORS else c.value or "",
            c.inverted,
            c.caseInsensitive,
        )
        for c in constraints
    ]


def variant_rows(variants: Sequence[StrategyVariant]) -> list[VariantRow]:
    """Saved variants (a strategy's, an environment's) as the editor's rows."""
    return [
        VariantRow(
            v.name,
            "" if v.weightType is WeightType.VARIABLE else f"{v.weight / 10:g}",
            v.payload.type.value if v.payload else "",
            v.payload.value if v.payload else "",
        )
        for v in variants
    ]


def posted_constraints(values: Mapping[str, str], prefix: str = "c") -> list[ConstraintRow]:
    """The constraint rows a form posted (``constraint_rows`` of strategy_macros.html with
    that prefix), rows marked "remove" and blank ones left out."""
    rows = []
    for i in range(MAX_ROWS + 1):
        at = f"{prefix}{i}-"
        row = ConstraintRow(
            values.get(f"{at}context", ""),
            values.get(f"{at}operator", "IN"),
            values.get(f"{at}values", ""),
            f"{at}inverted" in values,
            f"{at}case" in values,
        )
        if f"{at}remove" not in values and (row.contextName.strip() or row.values.strip()):
            rows.append(row)
    return rows


def posted_variants(values: Mapping[str, str], prefix: str = "v") -> list[VariantRow]:
    """The variant rows a form posted (``variant_rows`` with that prefix), as above."""
    rows = []
    for i in range(MAX_ROWS + 1):
        at = f"{prefix}{i}-"
        row = VariantRow(
            values.get(f"{at}name", "").strip(),
            values.get(f"{at}share", "").strip(),
            values.get(f"{at}payload-type", ""),
            values.get(f"{at}payload", ""),
        )
        if f"{at}remove" not in values and (row.name or row.share):
            rows.append(row)
    return rows


def variant_body(number: int, row: VariantRow, stickiness: str) -> dict[str, Any]:
    """A variant row as the API's body has it: a share in % becomes a ``fix`` weight out of
    1000, a blank one ``variable``. Usable for any variants of the same shape."""
    variant: dict[str, Any] = {"name": row.name, "stickiness": stickiness}
    if row.share:
        if not _SHARE.fullmatch(row.share) or Decimal(row.share) > 100:
            raise FormProblem(
                f"Variant {number} share",
                "a percentage from 0 to 100, with at most one decimal",
            )
        weight = Decimal(row.share) * 10
        variant |= {"weight": int(weight), "weightType": WeightType.FIX.value}
    else:
        variant |= {"weight": 0, "weightType": WeightType.VARIABLE.value}
    if row.payloadType:
        variant["payload"] = {"type": row.payloadType, "value": row.payload}
    return variant


_PLACES = {"constraints": "Constraint", "variants": "Variant", "segments": "Segment"}


def _where(loc: tuple[int | str, ...]) -> str:
    """``("constraints", 0, "value")`` -> ``Constraint 1 value``, as the form labels it."""
    if len(loc) >= 2 and loc[0] in _PLACES and isinstance(loc[1], int):
        rest = " ".join(str(part) for part in loc[2:] if isinstance(part, str))
        return f"{_PLACES[str(loc[0])]} {loc[1] + 1} {rest}".strip()
    return " ".join(str(part) for part in loc).capitalize()


def _message(text: str) -> str:
    return text.removeprefix("Value error, ")
