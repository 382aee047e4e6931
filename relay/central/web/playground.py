"""The playground page (GET, it changes nothing): an environment and a context chosen in a
form, every flag of the environment evaluated for it, with its variant and the strategy,
constraint or dependency that decided it (``relay.central.flags.playground``).

Bounded like the other pages: ``PLAYGROUND_PAGE`` flags a page by name (``next`` links the
following), ``q`` filters by name; a page evaluates its own flags only. The context is
bounded as a posted Frontend API context is; a mistake in it is shown above the form (400).
"""

from __future__ import annotations

from datetime import UTC, datetime

from aiohttp import web
from pydantic import TypeAdapter

from relay.api.paging import CursorName, next_url, position, whole
from relay.api.state import FRONTENDS
from relay.central.flags.playground import Playground, pairs_of, read_context
from relay.central.state import CLIENT_FEATURES, PROJECTS
from relay.central.web.site import page, render
from relay.core.errors import InvalidInput, NotFound
from relay.core.evaluate import Evaluation
from relay.wire.common import MAX_NAME

PLAYGROUND_PAGE, MAX_PLAYGROUND_PAGE = 100, 1_000
FIELDS = ("appName", "userId", "sessionId", "remoteAddress")
"""The context's fields the form has an input for; any other is a property."""
PREFERRED = "development"
"""The environment chosen when none is: the one ``relay flags on`` turns flags on in."""

_PLACE = TypeAdapter(tuple[CursorName])  # the last flag shown


@page
async def playground(request: web.Request) -> web.Response:
    query = request.query
    environments = await request.app[PROJECTS].environment_names()
    default = PREFERRED if PREFERRED in environments else next(iter(environments), "")
    environment = query.get("environment", default)
    form = {name: query.get(name, "") for name in (*FIELDS, "properties")}
    name_filter = query.get("q", "").strip()[:MAX_NAME]
    limit = whole(query.get("limit"), "limit", MAX_PLAYGROUND_PAGE, PLAYGROUND_PAGE)
    after = position(query["after"], _PLACE)[0] if "after" in query else None
    shown: list[Evaluation] = []
    following, error, status = None, "", 200
    if "environment" in query:  # the form was sent
        try:
            shown, more = await _evaluate(request, environment, form, name_filter, after, limit)
        except (InvalidInput, NotFound) as exc:
            error, status, more = exc.message, 400, False
        if more:
            following = next_url(request, limit, [shown[-1].name])
    return render(
        request,
        "playground.html",
        status,
        environments=environments,
        environment=environment,
        form=form,
        query=name_filter,
        asked="environment" in query,
        first=after is None,
        shown=shown,
        next=following,
        error=error,
    )


async def _evaluate(
    request: web.Request,
    environment: str,
    form: dict[str, str],
    name_filter: str,
    after: str | None,
    limit: int,
) -> tuple[list[Evaluation], bool]:
    """This page's flags (``limit`` of them after ``after``) evaluated, and whether there
    are more."""
    pairs = [(name, form[name]) for name in FIELDS if form[name]]
    pairs += pairs_of(form["properties"].splitlines())
    context = read_context(pairs, environment, datetime.now(UTC))
    place = Playground(request.app[PROJECTS], request.app[CLIENT_FEATURES], request.app[FRONTENDS])
    compiled = await place.compiled(environment)
    wanted = name_filter.casefold()
    names = sorted(
        name
        for name in compiled.by_name
        if wanted in name.casefold() and (after is None or name > after)
    )
    found = []
    for name in names[:limit]:
        evaluation = compiled.evaluate_one(name, context, explain=True)
        if evaluation is not None:
            found.append(evaluation)
    return found, len(names) > limit
