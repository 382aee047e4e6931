"""Admin endpoints of flags (admin key), at Unleash's paths with Unleash's statuses: flags
per project, their environments and strategies, the archive, segments, unknown flags.
Every handler is one call to a service (``flags``, ``strategies``, ``segments``), changes
made as the request's ``actor``."""

from __future__ import annotations

from aiohttp import web

from relay.api.body import read_json
from relay.api.paging import offset, whole
from relay.api.responses import model_response
from relay.api.routing import Route
from relay.central.admin import actor
from relay.central.flags.admin_routes import change, read
from relay.central.flags.segments import segment_id
from relay.central.state import FLAGS, SEGMENTS, STRATEGIES, USAGE
from relay.wire import flags as wire
from relay.wire.strategies import SetStrategySortOrder, Strategy, StrategyOut

DEFAULT_ARCHIVED = 100
MAX_ARCHIVED = 1000


def _flag(request: web.Request) -> tuple[str, str]:
    return request.match_info["projectId"], request.match_info["featureName"]


def _env(request: web.Request) -> tuple[str, str, str]:
    return *_flag(request), request.match_info["environment"]


def _strategy(request: web.Request) -> tuple[str, str, str, str]:
    return *_env(request), request.match_info["strategyId"]


async def list_flags(request: web.Request) -> web.Response:
    found = await request.app[FLAGS].of_project(request.match_info["projectId"])
    return model_response(wire.ProjectFlagsOut(features=found))


async def create_flag(request: web.Request) -> web.Response:
    body = await read_json(request, wire.CreateFlag)
    created = await request.app[FLAGS].create(actor(request), request.match_info["projectId"], body)
    return model_response(created, status=201)


async def get_flag(request: web.Request) -> web.Response:
    return model_response(await request.app[FLAGS].get(*_flag(request), archived=False))


async def update_flag(request: web.Request) -> web.Response:
    body = await read_json(request, wire.UpdateFlag)
    return model_response(await request.app[FLAGS].update(actor(request), *_flag(request), body))


async def patch_flag(request: web.Request) -> web.Response:
    body = await read_json(request, wire.Patches)
    return model_response(
        await request.app[FLAGS].patch(actor(request), *_flag(request), body.root)
    )


async def archive_flag(request: web.Request) -> web.Response:
    await request.app[FLAGS].archive(actor(request), *_flag(request))
    return web.Response(status=202)


async def revive_flag(request: web.Request) -> web.Response:
    await request.app[FLAGS].revive(actor(request), request.match_info["featureName"])
    return web.Response(status=200)


async def delete_archived(request: web.Request) -> web.Response:
    await request.app[FLAGS].delete(actor(request), request.match_info["featureName"])
    return web.Response(status=200)


async def archived_flags(request: web.Request) -> web.Response:
    return await _archived(request, None)


async def project_archived_flags(request: web.Request) -> web.Response:
    return await _archived(request, request.match_info["projectId"])


async def _archived(request: web.Request, project: str | None) -> web.Response:
    """Archived flags, the most recently archived first, ``limit`` (at most
    ``MAX_ARCHIVED``) after ``offset``."""
    query = request.query
    limit = whole(query.get("limit"), "limit", MAX_ARCHIVED, DEFAULT_ARCHIVED)
    skip = offset(query.get("offset"), 2**31 - 1)
    found = await request.app[FLAGS].archived(project, skip, limit)
    return model_response(wire.ProjectFlagsOut(features=found))


async def get_flag_environment(request: web.Request) -> web.Response:
    return model_response(await request.app[FLAGS].environment(*_env(request)))


async def turn_on(request: web.Request) -> web.Response:
    await request.app[FLAGS].set_enabled(actor(request), *_env(request), True)
    return web.Response(status=200)


async def turn_off(request: web.Request) -> web.Response:
    await request.app[FLAGS].set_enabled(actor(request), *_env(request), False)
    return web.Response(status=200)


async def list_strategies(request: web.Request) -> web.Response:
    found = await request.app[STRATEGIES].of_environment(*_env(request))
    return model_response(wire.StrategiesOut(found))


async def add_strategy(request: web.Request) -> web.Response:
    body = await read_json(request, Strategy)
    return model_response(await request.app[STRATEGIES].add(actor(request), *_env(request), body))


async def get_strategy(request: web.Request) -> web.Response:
    return model_response(await request.app[STRATEGIES].get(*_strategy(request)))


async def replace_strategy(request: web.Request) -> web.Response:
    body = await read_json(request, Strategy)
    return model_response(
        await request.app[STRATEGIES].replace(actor(request), *_strategy(request), body)
    )


async def patch_strategy(request: web.Request) -> web.Response:
    body = await read_json(request, wire.Patches)
    return model_response(
        await request.app[STRATEGIES].patch(actor(request), *_strategy(request), body.root)
    )


async def delete_strategy(request: web.Request) -> web.Response:
    await request.app[STRATEGIES].delete(actor(request), *_strategy(request))
    return web.Response(status=200)


async def set_sort_order(request: web.Request) -> web.Response:
    body = await read_json(request, SetStrategySortOrder)
    await request.app[STRATEGIES].set_sort_order(actor(request), *_env(request), body.root)
    return web.Response(status=200)


async def list_segments(request: web.Request) -> web.Response:
    return model_response(wire.SegmentsOut(segments=await request.app[SEGMENTS].all()))


async def create_segment(request: web.Request) -> web.Response:
    body = await read_json(request, wire.UpsertSegment)
    return model_response(await request.app[SEGMENTS].create(actor(request), body), status=201)


async def get_segment(request: web.Request) -> web.Response:
    found = await request.app[SEGMENTS].get(segment_id(request.match_info["id"]))
    return model_response(found)


async def update_segment(request: web.Request) -> web.Response:
    body = await read_json(request, wire.UpsertSegment)
    await request.app[SEGMENTS].update(actor(request), segment_id(request.match_info["id"]), body)
    return web.Response(status=204)


async def delete_segment(request: web.Request) -> web.Response:
    await request.app[SEGMENTS].delete(actor(request), segment_id(request.match_info["id"]))
    return web.Response(status=204)


async def get_unknown_flags(request: web.Request) -> web.Response:
    found = await request.app[USAGE].unknown_flags()
    return model_response(wire.UnknownFlagsOut(unknownFlags=found))


_FEATURES = "/api/admin/projects/{projectId}/features"
_FEATURE = f"{_FEATURES}/{{featureName}}"
_ENV = f"{_FEATURE}/environments/{{environment}}"
_STRATEGY = f"{_ENV}/strategies/{{strategyId}}"

ROUTES: list[Route] = [
    read(
        _FEATURES,
        list_flags,
        "A project's flags (none for a project that is not there)",
        wire.ProjectFlagsOut,
    ),
    change(
        "POST",
        _FEATURES,
        create_flag,
        "Create a flag",
        wire.CreateFlag,
        (201, wire.FlagOut),
        404,
        409,
    ),
    read(_FEATURE, get_flag, "A flag and its environments", wire.FlagOut, 404),
    change(
        "PUT",
        _FEATURE,
        update_flag,
        "Change a flag's description, type, stale, impressionData",
        wire.UpdateFlag,
        (200, wire.FlagOut),
        404,
    ),
    change(
        "PATCH",
        _FEATURE,
        patch_flag,
        "Change a flag with a JSON Patch",
        wire.Patches,
        (200, wire.FlagOut),
        404,
    ),
    change(
        "DELETE",
        _FEATURE,
        archive_flag,
        "Archive a flag (no longer served; name kept)",
        None,
        (202, None),
        404,
    ),
    change(
        "POST",
        "/api/admin/archive/revive/{featureName}",
        revive_flag,
        "Revive an archived flag (off everywhere)",
        None,
        (200, None),
        404,
    ),
    change(
        "DELETE",
        "/api/admin/archive/{featureName}",
        delete_archived,
        "Delete an archived flag for good (one not archived is left alone)",
        None,
        (200, None),
    ),
    read(
        "/api/admin/archive/features",
        archived_flags,
        "Archived flags, most recently archived first (limit, offset)",
        wire.ProjectFlagsOut,
        400,
    ),
    read(
        "/api/admin/archive/features/{projectId}",
        project_archived_flags,
        "A project's archived flags, most recently archived first (limit, offset)",
        wire.ProjectFlagsOut,
        400,
        404,
    ),
    read(_ENV, get_flag_environment, "A flag in one environment", wire.FlagEnvironmentOut, 404),
    change(
        "POST",
        f"{_ENV}/on",
        turn_on,
        "Turn a flag on in an environment",
        None,
        (200, None),
        400,
        404,
    ),
    change(
        "POST",
        f"{_ENV}/off",
        turn_off,
        "Turn a flag off in an environment",
        None,
        (200, None),
        400,
        404,
    ),
    read(
        f"{_ENV}/strategies",
        list_strategies,
        "A flag's strategies in an environment",
        wire.StrategiesOut,
        404,
    ),
    change(
        "POST",
        f"{_ENV}/strategies",
        add_strategy,
        "Add a strategy",
        Strategy,
        (200, StrategyOut),
        404,
    ),
    change(
        "POST",
        f"{_ENV}/strategies/set-sort-order",
        set_sort_order,
        "Reorder a flag's strategies in an environment (400 for a strategy not there)",
        SetStrategySortOrder,
        (200, None),
        404,
    ),
    read(_STRATEGY, get_strategy, "One strategy", StrategyOut, 404),
    change(
        "PUT", _STRATEGY, replace_strategy, "Replace a strategy", Strategy, (200, StrategyOut), 404
    ),
    change(
        "PATCH",
        _STRATEGY,
        patch_strategy,
        "Change a strategy with a JSON Patch",
        wire.Patches,
        (200, StrategyOut),
        404,
    ),
    change(
        "DELETE",
        _STRATEGY,
        delete_strategy,
        "Delete a strategy (the last one turns the flag off there)",
        None,
        (200, None),
        400,
        404,
    ),
    read("/api/admin/segments", list_segments, "Segments", wire.SegmentsOut),
    change(
        "POST",
        "/api/admin/segments",
        create_segment,
        "Create a segment",
        wire.UpsertSegment,
        (201, wire.SegmentOut),
        404,
        409,
    ),
    read("/api/admin/segments/{id}", get_segment, "One segment", wire.SegmentOut, 404),
    change(
        "PUT",
        "/api/admin/segments/{id}",
        update_segment,
        "Change a segment",
        wire.UpsertSegment,
        (204, None),
        404,
        409,
    ),
    change(
        "DELETE",
        "/api/admin/segments/{id}",
        delete_segment,
        "Delete a segment no strategy uses",
        None,
        (204, None),
        404,
        409,
    ),
    read(
        "/api/admin/metrics/unknown-flags",
        get_unknown_flags,
        "Metrics of names no flag has (last 24 h)",
        wire.UnknownFlagsOut,
    ),
]
