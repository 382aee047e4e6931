"""Unleash 8.2's ``/api/admin/features-batch/export|validate|import`` (admin key): each
handler one call to ``transfer.TransferService``. Bodies are bounded by ``max_body_bytes``
and an import by ``MAX_IMPORT_FLAGS`` flags (400 past it, in Unleash's error shape)."""

from __future__ import annotations

from aiohttp import web

from relay.api.body import read_json
from relay.api.responses import model_response
from relay.api.routing import Route
from relay.central.admin import actor
from relay.central.flags.admin_routes import change
from relay.central.state import TRANSFER
from relay.wire import transfer as t

_BATCH = "/api/admin/features-batch"


async def export_features(request: web.Request) -> web.Response:
    """``downloadFile`` is taken and, as in Unleash 8.2's server, changes nothing."""
    query = await read_json(request, t.ExportQuery)
    result = await request.app[TRANSFER].export(actor(request), query)
    return web.Response(
        body=result.model_dump_json(exclude_none=True), content_type="application/json"
    )


async def validate_import(request: web.Request) -> web.Response:
    body = await read_json(request, t.ImportBody)
    return model_response(await request.app[TRANSFER].validate(actor(request), body))


async def import_features(request: web.Request) -> web.Response:
    body = await read_json(request, t.ImportBody)
    await request.app[TRANSFER].import_(actor(request), body)
    return web.Response(status=200)


ROUTES: list[Route] = [
    change(
        "POST",
        f"{_BATCH}/export",
        export_features,
        "Export flags of one environment in Unleash's format",
        t.ExportQuery,
        (200, t.ExportResult),
    ),
    change(
        "POST",
        f"{_BATCH}/validate",
        validate_import,
        "What an import would refuse (errors) and do (warnings)",
        t.ImportBody,
        (200, t.ValidationOut),
        404,
    ),
    change(
        "POST",
        f"{_BATCH}/import",
        import_features,
        "Import flags in Unleash's format into a project's environment, all or nothing",
        t.ImportBody,
        (200, None),
        403,
        404,
        409,
    ),
]
