"""The two shapes of the flags' admin routes, so that each route is one row of its table
(``admin_api``, ``model_api``, ``transfer_api``): a read answered with a model, and a
change, whose body (when it takes one) is refused with 400, 413 or 415 as ``read_json``
refuses it. Both take an admin key (``central.admin.admin_route``)."""

from __future__ import annotations

from pydantic import BaseModel

from relay.api.routing import Handler, Route
from relay.central.admin import admin_route

BODY = (400, 413, 415)


def read(path: str, handler: Handler, summary: str, out: type[BaseModel], *errors: int) -> Route:
    """``GET path``, answered 200 with ``out``; ``errors``: its own refusals."""
    return admin_route("GET", path, handler, summary, ok=(200, out), errors=errors)


def change(
    method: str,
    path: str,
    handler: Handler,
    summary: str,
    body: type[BaseModel] | None,
    ok: tuple[int, type[BaseModel] | None],
    *errors: int,
) -> Route:
    """``method path`` reading ``body`` (None: none), answered ``ok``; ``errors``: its
    refusals besides a body's."""
    refused = (*BODY, *errors) if body is not None else errors
    return admin_route(method, path, handler, summary, body=body, ok=ok, errors=refused)
