"""The segments page: the segments with their constraints in words and what uses them, a form
to make one or change one (the strategy form's constraint editor: ``constraint_rows`` of
strategy_macros.html, read back by ``strategy_form.posted_constraints``), and delete for
those no strategy uses. Every change goes through ``SegmentService``, as the admin API's do."""

from __future__ import annotations

from aiohttp import web

from relay.central.flags.segments import segment_id
from relay.central.state import PROJECTS, SEGMENTS
from relay.central.web import strategy_form as sf
from relay.central.web.forms import act
from relay.central.web.site import actor, form, page, render
from relay.core import describe
from relay.wire.flags import SegmentOut, UpsertSegment


@page
async def segments(request: web.Request) -> web.Response:
    return await _listed(request)


async def _listed(request: web.Request, status: int = 200, error: str = "") -> web.Response:
    """The segments, each constraint in the words the flag page uses for strategies."""
    found = await request.app[SEGMENTS].all()
    words = {s.id: [describe.constraint(c) for c in s.constraints] for s in found}
    return render(request, "segments.html", status, segments=found, words=words, error=error)


@page
async def segment_form(request: web.Request) -> web.Response:
    """The form of a new segment (``/segments/new``) or of one to change."""
    if "id" not in request.match_info:
        return await _form(request, None, {"name": "", "description": "", "project": ""})
    found = await request.app[SEGMENTS].get(segment_id(request.match_info["id"]))
    fields = {
        "name": found.name,
        "description": found.description or "",
        "project": found.project or "",
    }
    return await _form(request, found, fields, sf.constraint_rows(found.constraints))


@page
async def save_segment(request: web.Request) -> web.Response:
    """Create (``POST /segments``) or change (``POST /segments/{id}``) a segment; a form
    posted by its "add another constraint" button is shown again (rows marked "remove"
    gone, one blank row more), nothing saved."""
    values = await form(request, fields=sf.FIELDS)
    service = request.app[SEGMENTS]
    found = None
    if "id" in request.match_info:
        found = await service.get(segment_id(request.match_info["id"]))
    rows = sf.posted_constraints(values)

    async def again(status: int, error: str) -> web.Response:
        return await _form(request, found, values, rows, status, error)

    if "more" in values:
        return await again(200, "")

    async def work() -> str:
        body = UpsertSegment.model_validate(
            {
                "name": values.get("name", "").strip(),
                "description": values.get("description") or None,
                "project": values.get("project") or None,
                "constraints": [row.body() for row in rows],
            }
        )
        if found is None:
            made = await service.create(actor(request), body)
            return f"Created the segment {made.name}"
        await service.update(actor(request), found.id, body)
        return f"Saved the segment {body.name}"

    return await act(work, "/segments", again)


@page
async def delete_segment(request: web.Request) -> web.Response:
    await form(request)
    service = request.app[SEGMENTS]
    found = await service.get(segment_id(request.match_info["id"]))

    async def work() -> str:
        await service.delete(actor(request), found.id)
        return f"Deleted the segment {found.name}"

    return await act(work, "/segments", lambda s, e: _listed(request, s, e))


async def _form(
    request: web.Request,
    found: SegmentOut | None,
    values: dict[str, str],
    rows: list[sf.ConstraintRow] | None = None,
    status: int = 200,
    error: str = "",
) -> web.Response:
    return render(
        request,
        "segment.html",
        status,
        segment=found,
        values=values,
        rows=rows or [],
        sf=sf,
        projects=await request.app[PROJECTS].all(),
        error=error,
    )
