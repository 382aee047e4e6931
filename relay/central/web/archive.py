"""The archive page: archived flags, ``FLAGS_PAGE`` a page, each with when it was archived
and a button to revive it (off in every environment, as the admin API's revive)."""

from __future__ import annotations

from aiohttp import web

from relay.api.paging import next_url, position, whole
from relay.central.state import FLAGS
from relay.central.web.forms import act
from relay.central.web.pages import FLAG_PLACE, FLAGS_PAGE, MAX_FLAGS_PAGE
from relay.central.web.site import actor, form, page, render


@page
async def archive(request: web.Request) -> web.Response:
    return await _archive(request)


async def _archive(request: web.Request, status: int = 200, error: str = "") -> web.Response:
    limit = whole(request.query.get("limit"), "limit", MAX_FLAGS_PAGE, FLAGS_PAGE)
    after = position(request.query["after"], FLAG_PLACE) if "after" in request.query else None
    found = await request.app[FLAGS].page(after, limit + 1, archived=True)
    shown, more = found[:limit], len(found) > limit
    following = next_url(request, limit, [shown[-1].project, shown[-1].name]) if more else None
    return render(
        request,
        "archived.html",
        status,
        flags=shown,
        first=after is None,
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
