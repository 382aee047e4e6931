"""The projects and environments pages: projects made, environments made, an environment
enabled in a project or removed from it, and the strategy a flag gets when turned on there
with none. Each form is one action handler calling ``ProjectStore``, as the admin API does
(rename and delete will be one more handler each, on the same pages)."""

from __future__ import annotations

from aiohttp import web

from relay.central.state import ENVIRONMENTS, PROJECTS
from relay.central.web.forms import act
from relay.central.web.site import actor, form, page, render
from relay.core.errors import InvalidInput
from relay.core.flags import FLEXIBLE_ROLLOUT
from relay.wire.admin import CreateEnvironment, CreateProject, ProjectEnvironment
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
async def create_project(request: web.Request) -> web.Response:
    values = await form(request)

    async def work() -> str:
        body = CreateProject.model_validate(
            {
                "id": values.get("id", "").strip(),
                "name": values.get("name", "").strip(),
                "description": values.get("description") or None,
            }
        )
        made = await request.app[PROJECTS].create(actor(request), body)
        return f"Created the project {made.name} ({made.id})"

    async def again(status: int, error: str) -> web.Response:
        return await _projects(request, status, error)

    return await act(work, "/projects", again)


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
async def add_environment(request: web.Request) -> web.Response:
    values = await form(request)
    project_id = request.match_info["id"]

    async def work() -> str:
        body = ProjectEnvironment.model_validate({"environment": values.get("environment", "")})
        await request.app[PROJECTS].add_environment(actor(request), project_id, body)
        return f"Enabled {body.environment} in {project_id}"

    return await act(work, _here(request), lambda s, e: _project(request, s, e))


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
async def default_strategy(request: web.Request) -> web.Response:
    """A gradual rollout: the percentage, its stickiness and group."""
    values = await form(request)
    project_id, environment = request.match_info["id"], request.match_info["environment"]

    async def work() -> str:
        rollout = values.get("rollout", "").strip()
        if not rollout.isdigit() or int(rollout) > 100:
            shown = repr(rollout[:20])
            raise InvalidInput(f"The rollout is a whole percentage from 0 to 100, not {shown}")
        parameters = {
            "rollout": str(int(rollout)),
            "stickiness": values.get("stickiness") or "default",
            "groupId": values.get("groupId", "").strip(),
        }
        strategy = Strategy.model_validate({"name": FLEXIBLE_ROLLOUT, "parameters": parameters})
        await request.app[PROJECTS].set_default_strategy(
            actor(request), project_id, environment, strategy
        )
        share = parameters["rollout"]
        return f"Flags turned on in {environment} of {project_id} now get {share} % by default"

    return await act(work, _here(request), lambda s, e: _project(request, s, e))


@page
async def environments(request: web.Request) -> web.Response:
    return await _environments(request)


async def _environments(request: web.Request, status: int = 200, error: str = "") -> web.Response:
    listed = await request.app[ENVIRONMENTS].listed()
    return render(request, "environments.html", status, environments=listed, error=error)


@page
async def create_environment(request: web.Request) -> web.Response:
    values = await form(request)

    async def work() -> str:
        order = values.get("sortOrder", "").strip()
        try:
            sort_order = int(order) if order else None
        except ValueError:
            raise InvalidInput(f"The sort order is a whole number, not {order[:20]!r}") from None
        body = CreateEnvironment.model_validate(
            {
                "name": values.get("name", "").strip(),
                "type": values.get("type", "").strip(),
                "sortOrder": sort_order,
            }
        )
        made = await request.app[ENVIRONMENTS].create(actor(request), body)
        return f"Created the environment {made.name}"

    return await act(work, "/environments", lambda s, e: _environments(request, s, e))
