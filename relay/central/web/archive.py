"""The archive page: archived flags, the most recently archived first, ``FLAGS_PAGE`` a page
(``FlagService.archived``, the admin API's read), each with when it was archived, a button
to revive it (off in every environment, as the admin API's revive) and one to delete it for
good."""

from __future__ import annotations

from aiohttp import web

from relay.api.paging import offset, whole
from relay.central.state import FLAGS
from relay.central.web.forms import action, confirmed
from relay.central.web.pages import FLAGS_PAGE, MAX_FLAGS_PAGE
from relay.central.web.site import actor, page, render


@page
async def archive(request: web.Request) -> web.Response:
    return await _archive(request)


async def _archive(request: web.Request, status: int = 200, error: str = "") -> web.Response:
    limit = whole(request.query.get("limit"), "limit", MAX_FLAGS_PAGE, FLAGS_PAGE)
    skip = offset(request.query.get("offset"), 2**31 - 1)
    found = await request.app[FLAGS].archived(None, skip, limit + 1)
    shown, more = found[:limit], len(found) > limit
    following = f"/archive?offset={skip + limit}&limit={limit}" if more else None
    return render(
        request,
        "archived.html",
        status,
        flags=shown,
        first=skip == 0,
        next=following,
        error=error,
    )


@page
@action("/archive", _archive)
async def revive(request: web.Request, values: dict[str, str]) -> str:
    name = request.match_info["name"]
    await request.app[FLAGS].revive(actor(request), name)
    return f"Revived {name}: it is off in every environment"


@page
@action("/archive", _archive)
async def delete(request: web.Request, values: dict[str, str]) -> str:
    """For good (asks first): its strategies and history of states go, its name is free."""
    name = request.match_info["name"]
    confirmed(values, name)
    await request.app[FLAGS].delete(actor(request), name)
    return f"Deleted {name} for good"
