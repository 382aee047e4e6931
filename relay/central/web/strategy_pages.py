"""A flag's strategies on the web page: listed per environment in words, the form of each
kind (add, edit), remove, and move up or down (Unleash's ``set-sort-order``). Every change
is one call to ``StrategyService``, the admin API's, with its body checked by the API's
model (``strategy_form``); then a redirect to the flag's page with a confirmation line."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from relay.api.errors import from_domain
from relay.central.state import FLAGS, SEGMENTS, STRATEGIES
from relay.central.web import strategy_form as sf
from relay.central.web.flag_actions import TYPES, flag_page
from relay.central.web.site import actor, form, page, redirect, render
from relay.core import describe
from relay.core.errors import DomainError
from relay.wire.flags import FlagOut, SegmentOut
from relay.wire.strategies import StrategyOut, StrategySortOrder


def _place(request: web.Request) -> tuple[str, str]:
    return request.match_info["name"], request.match_info["environment"]


async def _segments(request: web.Request, project: str) -> list[SegmentOut]:
    """Segments a strategy of ``project`` may use: global ones and the project's."""
    found = await request.app[SEGMENTS].all()
    return [s for s in found if s.project in (None, project)]


async def configuration(request: web.Request, flag: FlagOut) -> dict[str, Any]:
    """What the flag's page shows of its strategies: each in words, with its variants."""
    names = await _segment_names(request)
    words = {
        s.id: (_in_words(s, names, flag.name), describe.variants(s.variants))
        for environment in flag.environments
        for s in environment.strategies
    }
    return {"words": words, "kinds": sf.KINDS, "types": TYPES}


async def _segment_names(request: web.Request) -> dict[int, str]:
    return {s.id: s.name for s in await request.app[SEGMENTS].all()}


def _in_words(strategy: StrategyOut, segment_names: dict[int, str], flag: str) -> str:
    segments = [segment_names.get(i, f"#{i}") for i in strategy.segments]
    s = strategy
    return describe.strategy(s.name, s.parameters, s.constraints, segments, flag)


async def _form_page(
    request: web.Request,
    project: str,
    fields: sf.StrategyForm,
    strategy_id: str | None,
    status: int = 200,
    problem: str = "",
) -> web.Response:
    name, environment = _place(request)
    return render(
        request,
        "strategy.html",
        status,
        name=name,
        environment=environment,
        strategy_id=strategy_id,
        form=fields,
        segments=await _segments(request, project),
        problem=problem,
        sf=sf,
    )


@page
async def new_strategy(request: web.Request) -> web.Response:
    name, environment = _place(request)
    project = await request.app[FLAGS].project_of(name)
    await request.app[FLAGS].environment(project, name, environment)  # 404 if not there
    kind = request.query.get("kind", "flexibleRollout")
    fields = sf.StrategyForm(kind=kind if kind in sf.KINDS else "custom", group=name)
    return await _form_page(request, project, fields, None)


@page
async def edit_strategy(request: web.Request) -> web.Response:
    name, environment = _place(request)
    project = await request.app[FLAGS].project_of(name)
    saved = await request.app[STRATEGIES].get(project, name, environment, request.match_info["id"])
    return await _form_page(request, project, sf.StrategyForm.saved(saved), saved.id)


@page
async def save_strategy(request: web.Request) -> web.Response:
    """Add (no id) or replace a strategy; "add another" shows the form again with one
    more blank row, saving nothing; a refused field shows the form with why (4xx)."""
    values = await form(request, fields=sf.FIELDS)
    name, environment = _place(request)
    strategy_id = request.match_info.get("id")
    project = await request.app[FLAGS].project_of(name)
    fields = sf.StrategyForm.posted(values)
    if "more" in values:
        return await _form_page(request, project, fields, strategy_id)
    strategies = request.app[STRATEGIES]
    try:
        body = fields.body()
        if strategy_id is None:
            await strategies.add(actor(request), project, name, environment, body)
        else:
            await strategies.replace(actor(request), project, name, environment, strategy_id, body)
    except sf.FormProblem as exc:
        return await _form_page(request, project, fields, strategy_id, 400, str(exc))
    except DomainError as exc:
        status = from_domain(exc).status
        return await _form_page(request, project, fields, strategy_id, status, exc.message)
    what = sf.KINDS.get(fields.kind, fields.kind).lower()
    verb = "Added" if strategy_id is None else "Saved"
    done = f"{verb} the {what} strategy of {name} in {environment}"
    return redirect(flag_page(name, environment), done)


@page
async def delete_strategy(request: web.Request) -> web.Response:
    """Asks first, showing the strategy in words (a removed one cannot be brought back)."""
    values = await form(request)
    name, environment = _place(request)
    project = await request.app[FLAGS].project_of(name)
    strategies = request.app[STRATEGIES]
    found = await strategies.get(project, name, environment, request.match_info["id"])
    if values.get("confirm") != "yes":
        words = _in_words(found, await _segment_names(request), name)
        return render(
            request,
            "remove_strategy.html",
            name=name,
            environment=environment,
            strategy=found,
            called=_called(found),
            words=words,
        )
    await strategies.delete(actor(request), project, name, environment, found.id)
    done = f"Removed the {_called(found)} strategy of {name} in {environment}"
    return redirect(flag_page(name, environment), done)


@page
async def move_strategy(request: web.Request) -> web.Response:
    """One place up or down: every strategy of the environment gets its new place as its
    sort order (0, 1, 2...), in one ``set-sort-order``."""
    values = await form(request)
    name, environment = _place(request)
    project = await request.app[FLAGS].project_of(name)
    strategies = request.app[STRATEGIES]
    listed = await strategies.of_environment(project, name, environment)
    index = next((i for i, s in enumerate(listed) if s.id == request.match_info["id"]), None)
    up = values.get("direction") == "up"
    other = None if index is None else index - 1 if up else index + 1
    if index is None or other is None or not 0 <= other < len(listed):
        return redirect(flag_page(name, environment), "Nothing moved")
    listed[index], listed[other] = listed[other], listed[index]
    order = [StrategySortOrder(id=s.id, sortOrder=i) for i, s in enumerate(listed)]
    await strategies.set_sort_order(actor(request), project, name, environment, order)
    moved = listed[other]
    done = (
        f"Moved the {_called(moved)} strategy of {name} in {environment}"
        f" {'up' if up else 'down'}, to place {other + 1}"
    )
    return redirect(flag_page(name, environment), done)


def _called(strategy: StrategyOut) -> str:
    """A strategy as the confirmation line names it: its title, else its kind."""
    return strategy.title or sf.KINDS.get(strategy.name, strategy.name).lower()
