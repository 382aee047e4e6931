"""Responses with a wire model as their JSON body."""

from __future__ import annotations

from aiohttp import web
from pydantic import BaseModel


def model_response(model: BaseModel, status: int = 200) -> web.Response:
    return web.Response(
        body=model.model_dump_json(), status=status, content_type="application/json"
    )
