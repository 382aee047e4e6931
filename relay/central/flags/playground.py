"""The playground: an environment's flags (every project's) evaluated for a context a person
gives, each with the reason for its state (``Evaluation.reason``). The web page's playground
and ``relay flags evaluate`` share it. The flags are the client features cache's, compiled
by the Frontend API's ``Frontends`` (once per revision, shared with it), so what is shown
is what an SDK of that environment is answered.

A context given here is a person's, read through the Frontend API's model (so bounded as a
posted context is): ``userId``, ``sessionId``, ``remoteAddress`` and ``appName`` are fields,
any other key a property; its ``environment`` is the one chosen. With no ``sessionId`` or
``remoteAddress`` given there is none (the Frontend API gives a browser a fresh session and
its own address; here that would make answers change from one try to the next, or depend
on the operator's address); ``appName`` defaults as there.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from relay.central.flags.serving import ClientFeaturesCache
from relay.central.flags.writes import Writer
from relay.central.project_records import SqlProjectRecords
from relay.central.projects import ProjectStore
from relay.core.client_features import Scope
from relay.core.errors import InvalidInput, NotFound
from relay.core.evaluate import Compiled, Context, Evaluation
from relay.core.frontend import Frontends, shown_variant
from relay.core.frontend_context import FIELDS, context_of, from_model
from relay.store.sql import Database
from relay.wire.frontend import FrontendContext


@dataclass(frozen=True, slots=True)
class Playground:
    projects: ProjectStore
    flags: ClientFeaturesCache
    frontends: Frontends

    async def compiled(self, environment: str) -> Compiled:
        """Every flag of ``environment``, compiled (NotFound for an environment unknown)."""
        if not await self.projects.environment_exists(environment):
            raise NotFound(f"Could not find environment {environment}")
        rendered = await self.flags.answer(Scope(environment, None, None, False))
        return self.frontends.scoped(rendered).compiled

    async def evaluate(self, environment: str, name: str, context: Context) -> Evaluation:
        """One flag, explained (NotFound for a flag the environment does not have)."""
        found = (await self.compiled(environment)).evaluate_one(name, context, explain=True)
        if found is None:
            raise NotFound(f"Feature {name} does not exist")
        return found


def read_context(pairs: Iterable[tuple[str, str]], environment: str, now: datetime) -> Context:
    """A context from ``(key, value)`` pairs: known keys are fields, others properties,
    each given once; the bounds are those of a posted context (InvalidInput otherwise)."""
    fields: dict[str, str] = {}
    properties: dict[str, str] = {}
    for key, value in pairs:
        if not key:
            raise InvalidInput("A context key must not be empty")
        if key == "environment":
            raise InvalidInput("The environment is chosen apart, not given in the context")
        given = fields if key in FIELDS else properties
        if key in given:
            raise InvalidInput(f"The context key {key} is given twice")
        given[key] = value
    try:
        model = FrontendContext.model_validate({**fields, "properties": properties})
    except ValidationError as exc:
        error = exc.errors(include_url=False, include_input=False)[0]
        loc = error["loc"]  # (field, the union's member) or (properties, name, member)
        where = f"property {loc[1]}" if loc[0] == "properties" and len(loc) > 1 else loc[0]
        raise InvalidInput(f"The context's {where} is invalid: {error['msg']}") from None
    given_fields, given_properties = from_model(model)
    given_fields["environment"] = environment
    return context_of(given_fields, given_properties, None, now, session=lambda: None)


def pairs_of(lines: Iterable[str]) -> list[tuple[str, str]]:
    """``key=value`` lines (the command line's ``--context``, the page's properties box) as
    pairs: blank ones skipped, the key trimmed, the value as given (it may hold ``=``)."""
    pairs = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        key, equals, value = line.partition("=")
        if not equals:
            raise InvalidInput(f"Context entry {number} is not key=value")
        pairs.append((key.strip(), value))
    return pairs


async def evaluate_on(
    db: Database, name: str, environment: str, arguments: Sequence[str]
) -> dict[str, Any]:
    """``relay flags evaluate`` on a store: the flag's evaluation as it prints it (the
    Frontend API's variant, the reason in words)."""
    context = read_context(pairs_of(arguments), environment, datetime.now(UTC))
    place = Playground(
        ProjectStore(SqlProjectRecords(db, Writer(db))), ClientFeaturesCache(db), Frontends()
    )
    found = await place.evaluate(environment, name, context)
    return {
        "name": found.name,
        "project": found.project,
        "enabled": found.enabled,
        "variant": shown_variant(found.variant),
        "reason": str(found.reason),
    }
