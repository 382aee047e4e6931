"""The segments page: the segments with their constraints in words and what uses them, a form
to make one or change one (the constraint editor of ``forms``), and delete for those no
strategy uses. Every change goes through ``SegmentService``, as the admin API's do."""

from __future__ import annotations

from aiohttp import web

from relay.central.flags.segments import segment_id
from relay.central.state import PROJECTS, SEGMENTS
from relay.central.web.forms import (
    FIELDS_PER_ROW,
    MAX_CONSTRAINT_ROWS,
    ConstraintRow,
    act,
    checked_constraints,
    constraint_rows,
    editing,
)
from relay.central.web.site import actor, form, page, render
from relay.core.errors import InvalidInput
from relay.wire.flags import SegmentOut, UpsertSegment
from relay.wire.strategies import Operator

FIELDS = FIELDS_PER_ROW * MAX_CONSTRAINT_ROWS + 10


@page
async def segments(request: web.Request) -> web.Response:
    return render(request, "segments.html", segments=await request.app[SEGMENTS].all())


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
    return await _form(request, found, fields, [ConstraintRow.of(c) for c in found.constraints])


@page
async def save_segment(request: web.Request) -> web.Response:
    """Create (``POST /segments``) or change (``POST /segments/{id}``) a segment; a form
    posted by its "add a constraint" or "remove" button is shown again with the rows
    changed, nothing saved."""
    values = await form(request, fields=FIELDS)
    service = request.app[SEGMENTS]
    found = None
    if "id" in request.match_info:
        found = await service.get(segment_id(request.match_info["id"]))
    rows = constraint_rows(values)

    async def again(status: int, error: str) -> web.Response:
        return await _form(request, found, values, rows, status, error)

    if editing(values):
        return await again(200, "")

    async def work() -> str:
        constraints = checked_constraints(rows)
        if constraints is None:
            raise InvalidInput("A constraint is not right: see the rows marked below")
        body = UpsertSegment.model_validate(
            {
                "name": values.get("name", "").strip(),
                "description": values.get("description") or None,
                "project": values.get("project") or None,
                "constraints": constraints,
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

    async def again(status: int, error: str) -> web.Response:
        listed = await service.all()
        return render(request, "segments.html", status, segments=listed, error=error)

    return await act(work, "/segments", again)


async def _form(
    request: web.Request,
    found: SegmentOut | None,
    values: dict[str, str],
    rows: list[ConstraintRow] | None = None,
    status: int = 200,
    error: str = "",
) -> web.Response:
    return render(
        request,
        "segment.html",
        status,
        segment=found,
        values=values,
        rows=rows or [ConstraintRow()],
        operators=[o.value for o in Operator],
        projects=await request.app[PROJECTS].all(),
        max_rows=MAX_CONSTRAINT_ROWS,
        error=error,
    )
