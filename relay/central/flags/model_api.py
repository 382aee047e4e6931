"""Admin endpoints of dependencies, environment variants and tags (admin key), at Unleash
8.2's paths with its statuses. Every handler is one call to a service (``dependencies``,
``variants``, ``tags``)."""

from __future__ import annotations

from aiohttp import web

from relay.api.body import read_json
from relay.api.responses import model_response
from relay.api.routing import Route
from relay.central.admin import actor
from relay.central.flags.admin_routes import change, read
from relay.central.state import DEPENDENCIES, TAGS, VARIANTS
from relay.wire import flags as wire


def _flag(request: web.Request) -> tuple[str, str]:
    return request.match_info["projectId"], request.match_info["featureName"]


def _env(request: web.Request) -> tuple[str, str, str]:
    return *_flag(request), request.match_info["environment"]


async def add_dependency(request: web.Request) -> web.Response:
    body = await read_json(request, wire.CreateDependency)
    await request.app[DEPENDENCIES].add(actor(request), *_flag(request), body)
    return web.Response(status=200)


async def delete_dependency(request: web.Request) -> web.Response:
    await request.app[DEPENDENCIES].delete(
        actor(request), *_flag(request), request.match_info["parent"]
    )
    return web.Response(status=200)


async def delete_dependencies(request: web.Request) -> web.Response:
    await request.app[DEPENDENCIES].delete(actor(request), *_flag(request))
    return web.Response(status=200)


async def list_parent_options(request: web.Request) -> web.Response:
    return model_response(
        wire.Names(await request.app[DEPENDENCIES].possible_parents(*_flag(request)))
    )


async def list_parent_variant_options(request: web.Request) -> web.Response:
    found = await request.app[DEPENDENCIES].parent_variants(*_flag(request))
    return model_response(wire.Names(found))


async def check_dependencies_exist(request: web.Request) -> web.Response:
    return model_response(wire.DependenciesExist(await request.app[DEPENDENCIES].any()))


async def get_environment_variants(request: web.Request) -> web.Response:
    found = await request.app[VARIANTS].of_environment(*_env(request))
    return model_response(wire.VariantsOut(variants=found))


async def overwrite_environment_variants(request: web.Request) -> web.Response:
    body = await read_json(request, wire.Variants)
    saved = await request.app[VARIANTS].replace(actor(request), *_env(request), body.root)
    return model_response(wire.VariantsOut(variants=saved))


async def patch_environment_variants(request: web.Request) -> web.Response:
    body = await read_json(request, wire.Patches)
    saved = await request.app[VARIANTS].patch(actor(request), *_env(request), body.root)
    return model_response(wire.VariantsOut(variants=saved))


async def push_variants(request: web.Request) -> web.Response:
    body = await read_json(request, wire.PushVariants)
    saved = await request.app[VARIANTS].push(actor(request), *_flag(request), body)
    return model_response(wire.VariantsOut(variants=saved))


async def list_tags(request: web.Request) -> web.Response:
    found = await request.app[TAGS].of_flag(request.match_info["featureName"])
    return model_response(wire.TagsOut(tags=found))


async def add_tag(request: web.Request) -> web.Response:
    body = await read_json(request, wire.Tag)
    return model_response(
        await request.app[TAGS].add(actor(request), request.match_info["featureName"], body),
        status=201,
    )


async def update_tags(request: web.Request) -> web.Response:
    body = await read_json(request, wire.UpdateTags)
    name = request.match_info["featureName"]
    found = await request.app[TAGS].update(actor(request), name, body.addedTags, body.removedTags)
    return model_response(wire.TagsOut(tags=found))


async def remove_tag(request: web.Request) -> web.Response:
    info = request.match_info
    await request.app[TAGS].remove(actor(request), info["featureName"], info["type"], info["value"])
    return web.Response(status=200)


async def list_tag_types(request: web.Request) -> web.Response:
    return model_response(wire.TagTypesOut(tagTypes=await request.app[TAGS].types()))


async def create_tag_type(request: web.Request) -> web.Response:
    body = await read_json(request, wire.TagType)
    return model_response(await request.app[TAGS].create_type(actor(request), body), status=201)


async def delete_tag_type(request: web.Request) -> web.Response:
    await request.app[TAGS].delete_type(actor(request), request.match_info["name"])
    return web.Response(status=200)


_FEATURE = "/api/admin/projects/{projectId}/features/{featureName}"
_VARIANTS = f"{_FEATURE}/environments/{{environment}}/variants"
_TAGS = "/api/admin/features/{featureName}/tags"

ROUTES: list[Route] = [
    change(
        "POST",
        f"{_FEATURE}/dependencies",
        add_dependency,
        "Make a flag depend on a parent flag (replacing its parent)",
        wire.CreateDependency,
        (200, None),
        404,
    ),
    change(
        "DELETE",
        f"{_FEATURE}/dependencies/{{parent}}",
        delete_dependency,
        "Remove a flag's dependency on a parent",
        None,
        (200, None),
        400,
        404,
    ),
    change(
        "DELETE",
        f"{_FEATURE}/dependencies",
        delete_dependencies,
        "Remove a flag's dependencies",
        None,
        (200, None),
        400,
        404,
    ),
    read(f"{_FEATURE}/parents", list_parent_options, "The flags a flag may depend on", wire.Names),
    read(
        f"{_FEATURE}/parent-variants",
        list_parent_variant_options,
        "The variant names a dependency on a flag may name (none for a flag not there)",
        wire.Names,
    ),
    read(
        "/api/admin/projects/{projectId}/dependencies",
        check_dependencies_exist,
        "Whether any flag depends on another",
        wire.DependenciesExist,
    ),
    read(
        _VARIANTS,
        get_environment_variants,
        "A flag's variants in an environment",
        wire.VariantsOut,
        404,
    ),
    change(
        "PUT",
        _VARIANTS,
        overwrite_environment_variants,
        "Replace a flag's variants in an environment (a flag that has some)",
        wire.Variants,
        (200, wire.VariantsOut),
        404,
    ),
    change(
        "PATCH",
        _VARIANTS,
        patch_environment_variants,
        "Change a flag's variants in an environment with a JSON Patch (a flag that has some)",
        wire.Patches,
        (200, wire.VariantsOut),
        404,
    ),
    change(
        "PUT",
        f"{_FEATURE}/variants-batch",
        push_variants,
        "Set a flag's variants in several environments",
        wire.PushVariants,
        (200, wire.VariantsOut),
        404,
    ),
    read(_TAGS, list_tags, "A flag's tags", wire.TagsOut, 404),
    change(
        "POST",
        _TAGS,
        add_tag,
        "Tag a flag (a tag it has: no change)",
        wire.Tag,
        (201, wire.Tag),
        404,
    ),
    change(
        "PUT",
        _TAGS,
        update_tags,
        "Add, then remove, tags of a flag",
        wire.UpdateTags,
        (200, wire.TagsOut),
        404,
    ),
    change(
        "DELETE",
        f"{_TAGS}/{{type}}/{{value}}",
        remove_tag,
        "Remove a tag from a flag",
        None,
        (200, None),
        404,
    ),
    read("/api/admin/tag-types", list_tag_types, "Tag types", wire.TagTypesOut),
    change(
        "POST",
        "/api/admin/tag-types",
        create_tag_type,
        "Create a tag type",
        wire.TagType,
        (201, wire.TagType),
        409,
    ),
    change(
        "DELETE",
        "/api/admin/tag-types/{name}",
        delete_tag_type,
        "Delete a tag type and its tags",
        None,
        (200, None),
        404,
    ),
]
