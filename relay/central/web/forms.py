"""What the page's forms share: one way to run an action (a change made, then the next page
with its confirmation line, or the form again with what was wrong), and the constraint
editor (rows of a form read into ``relay.wire`` constraints, checked as the API checks them).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from aiohttp import web
from pydantic import ValidationError

from relay.api.errors import from_domain
from relay.central.web.site import redirect
from relay.core.errors import DomainError
from relay.wire.strategies import Constraint, Operator

Again = Callable[[int, str], Awaitable[web.Response]]
"""The form's page again, with a status and what was wrong."""

MAX_CONSTRAINT_ROWS = 30
"""Rows of a constraint editor read from one form (each row is 5 fields)."""
FIELDS_PER_ROW = 5
LIST_OPERATORS = frozenset(
    {Operator.IN, Operator.NOT_IN, Operator.STR_CONTAINS, Operator.STR_STARTS_WITH,
     Operator.STR_ENDS_WITH}
)  # fmt: skip


def problem(exc: ValidationError) -> str:
    """What is wrong, in the words of the API's own checks ("NUM_GT needs a decimal
    number, not 'abc'"), without pydantic's prefixes."""
    said = []
    for error in exc.errors(include_url=False, include_input=False):
        where = ".".join(str(part) for part in error["loc"])
        message = str(error["msg"]).removeprefix("Value error, ")
        said.append(f"{where}: {message}" if where else message)
    return "; ".join(said)


async def act(work: Callable[[], Awaitable[str]], location: str, again: Again) -> web.Response:
    """Run ``work`` (it returns the confirmation line) and go to ``location``; a mistake in
    the form (400) or a refusal of the service (404, 409...) shows the form again."""
    try:
        done = await work()
    except ValidationError as exc:
        return await again(400, problem(exc))
    except DomainError as exc:
        return await again(from_domain(exc).status, exc.message)
    return redirect(location, done)


@dataclass
class ConstraintRow:
    """One row of the editor as the person typed it, and what is wrong with it."""

    context: str = ""
    operator: str = Operator.IN.value
    values: str = ""
    inverted: bool = False
    case_insensitive: bool = False
    error: str = ""

    @classmethod
    def of(cls, c: Constraint) -> ConstraintRow:
        values = c.values if c.operator in LIST_OPERATORS else [c.value or ""]
        return cls(c.contextName, c.operator.value, "\n".join(values), c.inverted,
                   c.caseInsensitive)  # fmt: skip

    def blank(self) -> bool:
        return not self.context.strip() and not self.values.strip()

    def checked(self) -> Constraint | None:
        """The constraint, or None with ``error`` set: values one per line, a single one
        for the operators that take one."""
        lines = [line.strip() for line in self.values.splitlines() if line.strip()]
        data: dict[str, object] = {
            "contextName": self.context.strip(),
            "operator": self.operator,
            "inverted": self.inverted,
            "caseInsensitive": self.case_insensitive,
        }
        if self.operator in LIST_OPERATORS:
            data["values"] = lines
        elif len(lines) > 1:
            self.error = f"{self.operator} takes one value, not {len(lines)}"
            return None
        else:
            data["value"] = lines[0] if lines else ""
        try:
            return Constraint.model_validate(data)
        except ValidationError as exc:
            self.error = problem(exc)
            return None


def constraint_rows(values: Mapping[str, str]) -> list[ConstraintRow]:
    """The editor's rows as posted (``context.N``, ``operator.N``, ``values.N``,
    ``inverted.N``, ``case.N`` for N below ``rows``), but the one its ``remove`` button
    names; and a blank one more when ``add`` was pressed."""
    count = min(_count(values.get("rows")), MAX_CONSTRAINT_ROWS)
    removed = values.get("remove")
    rows = [
        ConstraintRow(
            values.get(f"context.{n}", ""),
            values.get(f"operator.{n}", Operator.IN.value),
            values.get(f"values.{n}", ""),
            f"inverted.{n}" in values,
            f"case.{n}" in values,
        )
        for n in range(count)
        if str(n) != removed
    ]
    if "add" in values and len(rows) < MAX_CONSTRAINT_ROWS:
        rows.append(ConstraintRow())
    return rows


def editing(values: Mapping[str, str]) -> bool:
    """The form was posted to add or remove a row, not to be saved."""
    return "add" in values or "remove" in values


def checked_constraints(rows: list[ConstraintRow]) -> list[Constraint] | None:
    """Every row that is not blank as a constraint, or None when a row is wrong (each such
    row then says why)."""
    found = [(row, row.checked()) for row in rows if not row.blank()]
    constraints = [c for _, c in found if c is not None]
    return constraints if len(constraints) == len(found) else None


def _count(text: str | None) -> int:
    return int(text) if text and text.isdigit() and len(text) < 4 else 0
