"""What a flag's page shows and changes beyond its strategies: its dependency on a parent
flag (set, replaced, removed through ``DependencyService``), its environment variants
(``VariantService.push``, Unleash's ``variants-batch``: the same variants set in the
environments chosen) and its tags (``TagService``). Each goes through the admin API's
service with its body, so the page refuses what the API refuses, in its words."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from relay.central.state import DEPENDENCIES, FLAGS, TAGS, VARIANTS
from relay.central.web import strategy_form as sf
from relay.central.web.flag_actions import flag_page
from relay.central.web.forms import Again, act
from relay.central.web.site import actor, form, page, redirect, render
from relay.core import describe
from relay.core.errors import InvalidInput
from relay.wire.client_features import ClientDependency
from relay.wire.flags import CreateDependency, FlagOut, PushVariants, Tag


def _refused(request: web.Request) -> Again:
    """A refused dependency or tag: the error page with the API's words (the flag's page
    has several forms; which one's field was wrong is the message's to say)."""

    async def again(status: int, error: str) -> web.Response:
        return render(request, "error.html", status, message=error)

    return again


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
        "tags": await request.app[TAGS].of_flag(flag.name),
        "tag_types": [t.name for t in await request.app[TAGS].types()],
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

    return await act(work, f"{flag_page(name)}#dependency", _refused(request))


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


@page
async def add_tag(request: web.Request) -> web.Response:
    values = await form(request)
    name = request.match_info["name"]

    async def work() -> str:
        tag = Tag.model_validate(
            {"type": values.get("type", "simple"), "value": values.get("value", "").strip()}
        )
        await request.app[TAGS].add(actor(request), name, tag)
        return f"Tagged {name} {tag.type}:{tag.value}"

    return await act(work, f"{flag_page(name)}#tags", _refused(request))


@page
async def remove_tag(request: web.Request) -> web.Response:
    values = await form(request)
    name = request.match_info["name"]
    tag_type, value = values.get("type", ""), values.get("value", "")
    await request.app[TAGS].remove(actor(request), name, tag_type, value)
    return redirect(f"{flag_page(name)}#tags", f"Removed the tag {tag_type}:{value} of {name}")
