"""The archive page: archived flags, the most recently archived first, ``FLAGS_PAGE`` a page
(``FlagService.archived``, the admin API's read), each with when it was archived, a button
to revive it (off in every environment, as the admin API's revive) and one to delete it for
good."""

from __future__ import annotations

from aiohttp import web

from relay.api.paging import offset, whole
from relay.central.state import FLAGS
from relay.central.web.forms import act, confirmed
from relay.central.web.pages import FLAGS_PAGE, MAX_FLAGS_PAGE
from relay.central.web.site import actor, form, page, render


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
async def revive(request: web.Request) -> web.Response:
    await form(request)
    name = request.match_info["name"]

    async def work() -> str:
        await request.app[FLAGS].revive(actor(request), name)
        return f"Revived {name}: it is off in every environment"

    return await act(work, "/archive", lambda s, e: _archive(request, s, e))


@page
async def delete(request: web.Request) -> web.Response:
    """For good (asks first): its strategies and history of states go, its name is free."""
    values = await form(request)
    name = request.match_info["name"]

    async def work() -> str:
        confirmed(values, name)
        await request.app[FLAGS].delete(actor(request), name)
        return f"Deleted {name} for good"

    return await act(work, "/archive", lambda s, e: _archive(request, s, e))
