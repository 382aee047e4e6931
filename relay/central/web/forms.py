"""What the page's forms share: one way to run an action (a change made, then the next page
with its confirmation line, or the form again with what was wrong). The constraint editor
is the strategy form's (``strategy_form``, ``strategy_macros.html``)."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable

from aiohttp import web
from pydantic import ValidationError

from relay.api.errors import from_domain
from relay.central.web.site import form, redirect
from relay.core.errors import DomainError, InvalidInput

Again = Callable[[int, str], Awaitable[web.Response]]
"""The form's page again, with a status and what was wrong."""
Shown = Callable[[web.Request, int, str], Awaitable[web.Response]]
"""A page of ``request``, with a status and what was wrong (``Again`` for any request)."""
Work = Callable[[web.Request, dict[str, str]], Awaitable[str]]
"""A form's change, made of the request and its fields: the confirmation line."""


def problem(exc: ValidationError) -> str:
    """What is wrong, in the words of the API's own checks ("NUM_GT needs a decimal
    number, not 'abc'"), without pydantic's prefixes."""
    said = []
    for error in exc.errors(include_url=False, include_input=False):
        where = ".".join(str(part) for part in error["loc"])
        message = str(error["msg"]).removeprefix("Value error, ")
        said.append(f"{where}: {message}" if where else message)
    return "; ".join(said)


async def act(work: Callable[[], Awaitable[str]], location: str, again: Again) -> web.Response:
    """Run ``work`` (it returns the confirmation line) and go to ``location``; a mistake in
    the form (400) or a refusal of the service (404, 409...) shows the form again."""
    try:
        done = await work()
    except ValidationError as exc:
        return await again(400, problem(exc))
    except DomainError as exc:
        return await again(from_domain(exc).status, exc.message)
    return redirect(location, done)


def action(
    location: str | Callable[[web.Request], str], again: Shown
) -> Callable[[Work], Callable[[web.Request], Awaitable[web.Response]]]:
    """A form's handler made of its ``Work``: the form read (its CSRF token checked, a
    refusal there is the page's error), then the work run by ``act``, to ``location`` (or
    where it says for the request) or to the form's page ``again``."""

    def handler(work: Work) -> Callable[[web.Request], Awaitable[web.Response]]:
        @functools.wraps(work)
        async def handle(request: web.Request) -> web.Response:
            values = await form(request)
            where = location if isinstance(location, str) else location(request)
            return await act(
                lambda: work(request, values), where, lambda s, e: again(request, s, e)
            )

        return handle

    return handler


def stripped(values: dict[str, str], *names: str) -> dict[str, str]:
    """The form's fields ``names``, without the blanks around them ("" for one not sent)."""
    return {name: values.get(name, "").strip() for name in names}


def confirmed(values: dict[str, str], what: str) -> None:
    """A deletion that cannot be undone asks first: its form's "yes" box (``confirm`` of
    ``macros.html``'s ``delete_form``) must be ticked, else nothing happens (400)."""
    if values.get("confirm") != "yes":
        raise InvalidInput(f"Tick the box to confirm that {what} is to be deleted for good")
