"""What every admin endpoint of the central service shares: its route (admin keys only,
401 and 403 documented) and the request's ``actor``, the admin key's name, as which every
change is made and logged. The endpoints themselves live beside what they serve: keys in
``keys_api``, usage reads in ``usage_api``, projects and environments in ``projects_api``,
flags in ``relay.central.flags.admin_api``, the event log in ``events_api``."""

from __future__ import annotations

from aiohttp import web
from pydantic import BaseModel

from relay.api.auth import ADMIN_KEYS, PRINCIPAL
from relay.api.routing import Handler, Route
from relay.core.audit import Actor


def actor(request: web.Request) -> Actor:
    """Who makes the request's change: its admin key (by name, never its secret)."""
    return Actor.of_key(request[PRINCIPAL])


def admin_route(
    method: str,
    path: str,
    handler: Handler,
    summary: str,
    *,
    body: type[BaseModel] | None = None,
    ok: tuple[int, type[BaseModel] | None] = (200, None),
    errors: tuple[int, ...] = (),
) -> Route:
    return Route(
        method,
        path,
        handler,
        summary,
        "admin",
        auth=ADMIN_KEYS,
        body=body,
        responses=dict([ok]),
        errors=(401, 403, *errors),
    )
