"""Responses with a wire model as their JSON body, whole or streamed."""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator

from aiohttp import web
from pydantic import BaseModel

from relay.api.connections import write_part

log = logging.getLogger(__name__)


def model_response(model: BaseModel, status: int = 200) -> web.Response:
    return web.Response(
        body=model.model_dump_json(), status=status, content_type="application/json"
    )


async def streamed(request: web.Request, parts: AsyncGenerator[bytes, None]) -> web.StreamResponse:
    """A 200 JSON answer sent part by part as ``parts`` produces them, so a large one is never
    whole in memory. The first part is produced before anything is sent: an error until then
    is still an error answer. A failure later can only cut the connection, logged: the
    client sees an incomplete body (its chunked encoding never ends), never a whole one.
    Each part waits for the client to read the previous ones (``write_timeout``); the
    answer is ended by the middleware, whose wait for the end is timed too
    (``relay.api.connections.send``).

    To HEAD, the headers alone: aiohttp frames nothing written to a HEAD answer, so a
    part written would reach the connection as the start of the next answer."""
    first = await anext(parts)
    response = web.StreamResponse()
    response.content_type = "application/json"
    await response.prepare(request)
    if request.method == "HEAD":
        await parts.aclose()
        return response
    try:
        await write_part(request, response, first)
        async for part in parts:
            await write_part(request, response, part)
    except ConnectionError:
        log.debug("client closed the connection mid-answer", extra={"path": request.path})
    except Exception as exc:
        log.error("answer cut short", extra={"path": request.path, "error": repr(exc)})
        if request.transport is not None:
            request.transport.close()
    return response
