"""Admin endpoints of projects and environments (admin key): create, rename or change,
delete, and which environments a project has enabled. Each handler is one call to the
store, made as the request's actor."""

from __future__ import annotations

from aiohttp import web

from relay.api.body import read_json
from relay.api.responses import model_response
from relay.api.routing import Route
from relay.central.admin import actor, admin_route
from relay.central.state import ENVIRONMENTS, PROJECTS
from relay.wire import admin as wire
from relay.wire.strategies import Strategy


async def add_environment(request: web.Request) -> web.Response:
    body = await read_json(request, wire.ProjectEnvironment)
    project = request.match_info["projectId"]
    await request.app[PROJECTS].add_environment(actor(request), project, body)
    return web.Response(status=200)


async def remove_environment(request: web.Request) -> web.Response:
    info = request.match_info
    await request.app[PROJECTS].remove_environment(
        actor(request), info["projectId"], info["environment"]
    )
    return web.Response(status=200)


async def set_default_strategy(request: web.Request) -> web.Response:
    body = await read_json(request, Strategy)
    info = request.match_info
    saved = await request.app[PROJECTS].set_default_strategy(
        actor(request), info["projectId"], info["environment"], body
    )
    return web.Response(text=saved, content_type="application/json")


async def list_projects(request: web.Request) -> web.Response:
    return model_response(wire.ProjectsOut(projects=await request.app[PROJECTS].listed()))


async def get_project(request: web.Request) -> web.Response:
    return model_response(await request.app[PROJECTS].get(request.match_info["projectId"]))


async def create_project(request: web.Request) -> web.Response:
    body = await read_json(request, wire.CreateProject)
    return model_response(await request.app[PROJECTS].create(actor(request), body), status=201)


async def update_project(request: web.Request) -> web.Response:
    body = await read_json(request, wire.UpdateProject)
    project = request.match_info["projectId"]
    return model_response(await request.app[PROJECTS].update(actor(request), project, body))


async def delete_project(request: web.Request) -> web.Response:
    await request.app[PROJECTS].delete(actor(request), request.match_info["projectId"])
    return web.Response(status=200)


async def list_environments(request: web.Request) -> web.Response:
    found = await request.app[ENVIRONMENTS].listed()
    return model_response(wire.EnvironmentsOut(environments=found))


async def create_environment(request: web.Request) -> web.Response:
    body = await read_json(request, wire.CreateEnvironment)
    created = await request.app[ENVIRONMENTS].create(actor(request), body)
    return model_response(created, status=201)


async def update_environment(request: web.Request) -> web.Response:
    body = await read_json(request, wire.UpdateEnvironment)
    name = request.match_info["name"]
    return model_response(await request.app[ENVIRONMENTS].update(actor(request), name, body))


async def delete_environment(request: web.Request) -> web.Response:
    await request.app[ENVIRONMENTS].delete(actor(request), request.match_info["name"])
    return web.Response(status=200)


_PROJECT = "/api/admin/projects/{projectId}"

ROUTES: list[Route] = [
    admin_route(
        "POST",
        f"{_PROJECT}/environments",
        add_environment,
        "Add an environment to a project",
        body=wire.ProjectEnvironment,
        errors=(400, 404, 409, 413, 415),
    ),
    admin_route(
        "DELETE",
        f"{_PROJECT}/environments/{{environment}}",
        remove_environment,
        "Remove an environment from a project (one it does not have: 200)",
        errors=(404,),
    ),
    admin_route(
        "POST",
        f"{_PROJECT}/environments/{{environment}}/default-strategy",
        set_default_strategy,
        "Set the strategy a flag gets when turned on there with none",
        body=Strategy,
        ok=(200, Strategy),
        errors=(400, 404, 413, 415),
    ),
    admin_route(
        "GET",
        _PROJECT,
        get_project,
        "A project and its environments",
        ok=(200, wire.ProjectOut),
        errors=(404,),
    ),
    admin_route(
        "PUT",
        _PROJECT,
        update_project,
        "Rename a project (its id stays)",
        body=wire.UpdateProject,
        ok=(200, wire.ProjectOut),
        errors=(400, 404, 413, 415),
    ),
    admin_route(
        "DELETE",
        _PROJECT,
        delete_project,
        "Delete a project: not the default one, nor one with flags that are not archived",
        errors=(403, 404),
    ),
    admin_route(
        "GET",
        "/api/admin/projects",
        list_projects,
        "Every project, with its count of flags that are not archived",
        ok=(200, wire.ProjectsOut),
    ),
    admin_route(
        "POST",
        "/api/admin/projects",
        create_project,
        "Create a project",
        body=wire.CreateProject,
        ok=(201, wire.ProjectOut),
        errors=(400, 409, 413, 415),
    ),
    admin_route(
        "GET",
        "/api/admin/environments",
        list_environments,
        "Every environment, in order",
        ok=(200, wire.EnvironmentsOut),
    ),
    admin_route(
        "POST",
        "/api/admin/environments",
        create_environment,
        "Create an environment",
        body=wire.CreateEnvironment,
        ok=(201, wire.EnvironmentOut),
        errors=(400, 409, 413, 415),
    ),
    admin_route(
        "PUT",
        "/api/admin/environments/update/{name}",
        update_environment,
        "Change an environment's type or order (its name stays)",
        body=wire.UpdateEnvironment,
        ok=(200, wire.EnvironmentOut),
        errors=(400, 404, 413, 415),
    ),
    admin_route(
        "DELETE",
        "/api/admin/environments/{name}",
        delete_environment,
        "Delete an environment no key is bound to (not the last one)",
        errors=(403, 404, 409),
    ),
]
