"""What a flag's page shows and changes beyond its strategies: its dependency on a parent
flag (set, replaced, removed through ``DependencyService``) and its environment variants
(``VariantService.push``, Unleash's ``variants-batch``: the same variants set in the
environments chosen). Both go through the admin API's services with its bodies, so the page
refuses what the API refuses, in its words."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from relay.central.state import DEPENDENCIES, FLAGS, VARIANTS
from relay.central.web import strategy_form as sf
from relay.central.web.flag_actions import flag_page
from relay.central.web.forms import act
from relay.central.web.site import actor, form, page, redirect, render
from relay.core import describe
from relay.core.errors import InvalidInput
from relay.wire.client_features import ClientDependency
from relay.wire.flags import CreateDependency, FlagOut, PushVariants


def dependency_words(dependency: ClientDependency) -> str:
    """``only while parent is on, with variant blue or green`` / ``... is off``."""
    if not dependency.enabled:
        return f"only while {dependency.feature} is off"
    text = f"only while {dependency.feature} is on"
    if dependency.variants:
        return f"{text}, with variant {' or '.join(dependency.variants)}"
    return text


async def links(request: web.Request, flag: FlagOut) -> dict[str, Any]:
    """The flag page's dependency and environment variants: in words, and the parents a
    new dependency may name (none for a flag others depend on: Unleash keeps one level)."""
    parents: list[str] = []
    if not flag.children and not flag.archived:
        parents = await request.app[DEPENDENCIES].possible_parents(flag.project, flag.name)
    return {
        "dependencies": [dependency_words(d) for d in flag.dependencies],
        "parents": parents,
        "environment_variants": {
            e.name: describe.variants(e.variants) for e in flag.environments if e.variants
        },
    }


@page
async def set_dependency(request: web.Request) -> web.Response:
    """The flag's parent (replacing any it had): on or off, optionally with the parent's
    variants that satisfy it (comma-separated, or one a line)."""
    values = await form(request)
    name = request.match_info["name"]
    flags = request.app[FLAGS]
    project = await flags.project_of(name)
    enabled = values.get("enabled", "true") != "false"
    variants = [v.strip() for v in values.get("variants", "").replace("\n", ",").split(",")]

    async def work() -> str:
        body = CreateDependency.model_validate(
            {
                "feature": values.get("parent", ""),
                "enabled": enabled,
                "variants": [v for v in variants if v] or None,
            }
        )
        await request.app[DEPENDENCIES].add(actor(request), project, name, body)
        shown = ClientDependency(feature=body.feature, enabled=enabled, variants=body.variants)
        return f"{name} is now served {dependency_words(shown)}"

    async def again(status: int, error: str) -> web.Response:
        return render(request, "error.html", status, message=error)

    return await act(work, f"{flag_page(name)}#dependency", again)


@page
async def remove_dependency(request: web.Request) -> web.Response:
    await form(request)
    name = request.match_info["name"]
    project = await request.app[FLAGS].project_of(name)
    await request.app[DEPENDENCIES].delete(actor(request), project, name)
    return redirect(f"{flag_page(name)}#dependency", f"{name} no longer depends on another flag")


async def _variants_page(
    request: web.Request,
    flag: FlagOut,
    rows: list[sf.VariantRow],
    stickiness: str,
    chosen: set[str],
    status: int = 200,
    problem: str = "",
) -> web.Response:
    return render(
        request,
        "environment_variants.html",
        status,
        flag=flag,
        environment=request.match_info["environment"],
        rows=rows,
        stickiness=stickiness,
        chosen=chosen,
        sf=sf,
        problem=problem,
    )


@page
async def variants_form(request: web.Request) -> web.Response:
    name, environment = request.match_info["name"], request.match_info["environment"]
    flags = request.app[FLAGS]
    flag = await flags.get(await flags.project_of(name), name)
    saved = await request.app[VARIANTS].of_environment(flag.project, name, environment)
    stickiness = saved[0].stickiness if saved else "default"
    return await _variants_page(request, flag, sf.variant_rows(saved), stickiness, {environment})


@page
async def save_variants(request: web.Request) -> web.Response:
    """Unleash's ``variants-batch``: the posted variants, weights fixed as Unleash fixes
    them, in every environment ticked. Overrides a variant had (set through the API) are
    kept by its name; "add another variant" shows the form again, saving nothing."""
    values = await form(request, fields=sf.FIELDS)
    name, environment = request.match_info["name"], request.match_info["environment"]
    flags = request.app[FLAGS]
    flag = await flags.get(await flags.project_of(name), name)
    rows = sf.posted_variants(values)
    stickiness = values.get("stickiness", "default").strip() or "default"
    chosen = {e.name for e in flag.environments if f"env-{e.name}" in values}

    async def again(status: int, error: str) -> web.Response:
        return await _variants_page(request, flag, rows, stickiness, chosen, status, error)

    if "more" in values:
        return await again(200, "")
    saved = await request.app[VARIANTS].of_environment(flag.project, name, environment)
    overrides = {v.name: v.overrides for v in saved}

    async def work() -> str:
        try:
            variants = [
                sf.variant_body(i, row, stickiness) | {"overrides": overrides.get(row.name, [])}
                for i, row in enumerate(rows, 1)
            ]
        except sf.FormProblem as exc:
            raise InvalidInput(str(exc)) from None
        body = PushVariants.model_validate({"variants": variants, "environments": sorted(chosen)})
        await request.app[VARIANTS].push(actor(request), flag.project, name, body)
        where = ", ".join(sorted(chosen))
        return f"Set {len(variants)} environment variants of {name} in {where}"

    return await act(work, flag_page(name, environment), again)
