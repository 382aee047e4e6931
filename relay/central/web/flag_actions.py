"""What the web page changes of a flag itself (POST, then a redirect with a confirmation
line): create one, change its description, type, stale and impression data, archive it.
Each goes through ``FlagService``, as the admin API's endpoints do, with its bodies
(``relay.wire.flags``), so the page refuses what the API refuses."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from aiohttp import web
from pydantic import ValidationError

from relay.api.errors import from_domain, from_validation
from relay.central.state import FLAGS, PROJECTS
from relay.central.web.site import actor, form, page, redirect, render
from relay.core.errors import DomainError
from relay.wire.common import FlagType
from relay.wire.flags import CreateFlag, UpdateFlag

TYPES = [t.value for t in FlagType]


async def _newflag_page(
    request: web.Request, values: dict[str, str], status: int = 200, error: str = ""
) -> web.Response:
    return render(
        request,
        "new_flag.html",
        status,
        projects=await request.app[PROJECTS].all(),
        types=TYPES,
        values=values,
        error=error,
    )


@page
async def new_flag(request: web.Request) -> web.Response:
    return await _newflag_page(request, {"project": request.query.get("project", "default")})


@page
async def create_flag(request: web.Request) -> web.Response:
    """A new flag, off everywhere; a mistake shows the form again with what was typed."""
    values = await form(request)
    project = values.get("project", "")
    try:
        body = CreateFlag.model_validate(
            {
                "name": values.get("name", "").strip(),
                "type": values.get("type", ""),
                "description": values.get("description", "").strip() or None,
                "impressionData": "impressionData" in values,
            }
        )
        await request.app[FLAGS].create(actor(request), project, body)
    except ValidationError as exc:
        return await _newflag_page(request, values, 400, from_validation(exc, root="").message)
    except DomainError as exc:
        return await _newflag_page(request, values, from_domain(exc).status, exc.message)
    return redirect(flag_page(body.name), f"Created {body.name} in project {project}")


@page
async def flag_settings(request: web.Request) -> web.Response:
    """Description, type, stale, impression data: every field of the form is saved (a
    checkbox left empty is false)."""
    values = await form(request)
    name = request.match_info["name"]
    flags = request.app[FLAGS]
    fields: dict[str, Any] = {
        "description": values.get("description", "").strip() or None,
        "type": values.get("type", ""),
        "stale": "stale" in values,
        "impressionData": "impressionData" in values,
    }
    try:
        body = UpdateFlag.model_validate(fields)
    except ValidationError as exc:
        return render(request, "error.html", 400, message=from_validation(exc, root="").message)
    await flags.update(actor(request), await flags.project_of(name), name, body)
    return redirect(flag_page(name), f"Saved the settings of {name}")


@page
async def archive_flag(request: web.Request) -> web.Response:
    """Asks first; archived, a flag is served to no SDK (it can be revived)."""
    values = await form(request)
    name = request.match_info["name"]
    flags = request.app[FLAGS]
    project = await flags.project_of(name)
    if values.get("confirm") != "yes":
        return render(request, "archive.html", flag=await flags.get(project, name))
    await flags.archive(actor(request), project, name)
    return redirect("/", f"Archived {name}")


def flag_page(name: str, environment: str = "") -> str:
    """A flag's page (at its environment's strategies, when one is named)."""
    place = f"#env-{quote(environment, safe='')}" if environment else ""
    return f"/flags/{quote(name, safe='')}{place}"
