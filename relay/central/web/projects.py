"""The projects and environments pages: projects made, renamed and deleted, environments
made, changed (type, sort order) and deleted, an environment enabled in a project or
removed from it, and the strategy a flag gets when turned on there with none. Each form is
one action handler calling ``ProjectStore`` or ``EnvironmentStore``, as the admin API does,
so Unleash's refusals (the default project, one with active flags, the last environment,
one a key is bound to) are shown in its words; deletions ask first (``forms.confirmed``)."""

from __future__ import annotations

from aiohttp import web

from relay.central.state import ENVIRONMENTS, PROJECTS
from relay.central.web.forms import act, action, confirmed, stripped
from relay.central.web.site import actor, form, page, render
from relay.core.errors import InvalidInput
from relay.core.flags import FLEXIBLE_ROLLOUT
from relay.core.ingest_batch import whole_number
from relay.wire.admin import (
    CreateEnvironment,
    CreateProject,
    ProjectEnvironment,
    UpdateEnvironment,
    UpdateProject,
)
from relay.wire.strategies import Strategy

STICKINESS = ("default", "userId", "sessionId", "random")


@page
async def projects(request: web.Request) -> web.Response:
    return await _projects(request)


async def _projects(request: web.Request, status: int = 200, error: str = "") -> web.Response:
    store = request.app[PROJECTS]
    listed = [await store.get(project_id) for project_id, _ in await store.all()]
    return render(request, "projects.html", status, projects=listed, error=error)


@page
@action("/projects", _projects)
async def create_project(request: web.Request, values: dict[str, str]) -> str:
    description = values.get("description") or None
    body = CreateProject.model_validate(
        {**stripped(values, "id", "name"), "description": description}
    )
    made = await request.app[PROJECTS].create(actor(request), body)
    return f"Created the project {made.name} ({made.id})"


@page
async def project(request: web.Request) -> web.Response:
    return await _project(request)


async def _project(request: web.Request, status: int = 200, error: str = "") -> web.Response:
    store = request.app[PROJECTS]
    found = await store.get(request.match_info["id"])
    enabled = {e.environment for e in found.environments}
    others = [e.name for e in await request.app[ENVIRONMENTS].listed() if e.name not in enabled]
    return render(
        request,
        "project.html",
        status,
        project=found,
        others=others,
        stickiness=STICKINESS,
        error=error,
    )


def _here(request: web.Request) -> str:
    return f"/projects/{request.match_info['id']}"


@page
@action(_here, _project)
async def add_environment(request: web.Request, values: dict[str, str]) -> str:
    project_id = request.match_info["id"]
    body = ProjectEnvironment.model_validate({"environment": values.get("environment", "")})
    await request.app[PROJECTS].add_environment(actor(request), project_id, body)
    return f"Enabled {body.environment} in {project_id}"


@page
async def remove_environment(request: web.Request) -> web.Response:
    """Asks first: the project's flags lose their state and strategies there."""
    values = await form(request)
    project_id, environment = request.match_info["id"], request.match_info["environment"]
    if values.get("confirm") != "yes":
        found = await request.app[PROJECTS].get(project_id)
        if environment not in {e.environment for e in found.environments}:
            return await _project(request, 404, f"{project_id} does not have {environment}")
        return render(request, "remove_environment.html", project=found, environment=environment)

    async def work() -> str:
        await request.app[PROJECTS].remove_environment(actor(request), project_id, environment)
        return f"Removed {environment} from {project_id}"

    return await act(work, _here(request), lambda s, e: _project(request, s, e))


@page
@action(_here, _project)
async def default_strategy(request: web.Request, values: dict[str, str]) -> str:
    """A gradual rollout: the percentage, its stickiness and group."""
    project_id, environment = request.match_info["id"], request.match_info["environment"]
    rollout = values.get("rollout", "").strip()
    percent = whole_number(rollout, 100)
    if percent is None:
        shown = repr(rollout[:20])
        raise InvalidInput(f"The rollout is a whole percentage from 0 to 100, not {shown}")
    parameters = {
        "rollout": str(percent),
        "stickiness": values.get("stickiness") or "default",
        "groupId": values.get("groupId", "").strip(),
    }
    strategy = Strategy.model_validate({"name": FLEXIBLE_ROLLOUT, "parameters": parameters})
    await request.app[PROJECTS].set_default_strategy(
        actor(request), project_id, environment, strategy
    )
    share = parameters["rollout"]
    return f"Flags turned on in {environment} of {project_id} now get {share} % by default"


@page
async def environments(request: web.Request) -> web.Response:
    return await _environments(request)


async def _environments(request: web.Request, status: int = 200, error: str = "") -> web.Response:
    listed = await request.app[ENVIRONMENTS].listed()
    return render(request, "environments.html", status, environments=listed, error=error)


@page
@action("/environments", _environments)
async def create_environment(request: web.Request, values: dict[str, str]) -> str:
    body = CreateEnvironment.model_validate(
        {**stripped(values, "name", "type"), "sortOrder": _sort_order(values)}
    )
    made = await request.app[ENVIRONMENTS].create(actor(request), body)
    return f"Created the environment {made.name}"


def _sort_order(values: dict[str, str]) -> int | None:
    order = values.get("sortOrder", "").strip()
    try:
        return int(order) if order else None
    except ValueError:
        raise InvalidInput(f"The sort order is a whole number, not {order[:20]!r}") from None


@page
@action("/environments", _environments)
async def update_environment(request: web.Request, values: dict[str, str]) -> str:
    """Its type and sort order (its name is its identity: keys carry it)."""
    name = request.match_info["environment"]
    body = UpdateEnvironment.model_validate(
        {"type": values.get("type", "").strip() or None, "sortOrder": _sort_order(values)}
    )
    saved = await request.app[ENVIRONMENTS].update(actor(request), name, body)
    return f"Saved {name}: type {saved.type}, sort order {saved.sortOrder}"


@page
@action("/environments", _environments)
async def delete_environment(request: web.Request, values: dict[str, str]) -> str:
    name = request.match_info["environment"]
    confirmed(values, f"the environment {name}")
    await request.app[ENVIRONMENTS].delete(actor(request), name)
    return f"Deleted the environment {name}, with every flag's state and strategies there"


@page
@action(_here, _project)
async def rename_project(request: web.Request, values: dict[str, str]) -> str:
    project_id = request.match_info["id"]
    description = values.get("description", "").strip() or None
    body = UpdateProject.model_validate({**stripped(values, "name"), "description": description})
    saved = await request.app[PROJECTS].update(actor(request), project_id, body)
    return f"Saved the project {project_id}: {saved.name}"


@page
@action("/projects", _project)
async def delete_project(request: web.Request, values: dict[str, str]) -> str:
    """Unleash's refusals (the default project, one with flags not archived) are shown on
    the project's page; its archived flags go with it."""
    project_id = request.match_info["id"]
    confirmed(values, f"the project {project_id}")
    await request.app[PROJECTS].delete(actor(request), project_id)
    return f"Deleted the project {project_id}"
