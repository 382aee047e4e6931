"""The web page's frame: templates (Jinja2, autoescaped), the signed-in check, the CSRF
check, HTML error pages, static files and the routes.

Pages are rendered on the server and need no script; forms post with a CSRF token. Every
answer says ``Cache-Control: no-store`` (pages hold what only an admin may read) and a
Content-Security-Policy allowing nothing but this site's own styles and forms, so
injected markup could neither run a script nor send a form elsewhere.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import logging
import re
from collections.abc import Awaitable, Callable, Mapping
from importlib import resources
from typing import Any
from urllib.parse import parse_qs, quote, unquote

import jinja2
from aiohttp import web

from relay.api import errors
from relay.api.body import read_body
from relay.central.web.sessions import COOKIE, Session, SessionStore
from relay.core.audit import Actor
from relay.core.errors import DomainError, StorageError
from relay.core.ingest_batch import from_epoch
from relay.wire.common import MAX_NAME

log = logging.getLogger(__name__)

SESSIONS = web.AppKey("web_sessions", SessionStore)
SECURE_COOKIES = web.AppKey("web_secure_cookies", bool)
SESSION = web.RequestKey("web_session", Session)
DONE = "relay_done"
"""The cookie carrying the confirmation line of the last action to the page it leads to."""
MAX_DONE = 300

PageHandler = Callable[[web.Request], Awaitable[web.StreamResponse]]

_TEMPLATES = jinja2.Environment(
    loader=jinja2.PackageLoader("relay.central.web", "templates"),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)
_TEMPLATES.filters["quoted"] = lambda value: quote(str(value), safe="")
_TEMPLATES.globals["from_epoch"] = from_epoch

HEADERS: Mapping[str, str] = {
    "Cache-Control": "no-store",
    "Content-Security-Policy": "default-src 'none'; style-src 'self'; img-src 'self';"
    " form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
}

STATIC = {"style.css": "text/css"}
"""The files under ``static/``, each with its type: nothing else is served from there."""


def render(request: web.Request, template: str, status: int = 200, **context: Any) -> web.Response:
    """The page; with the confirmation line of the action that led here (``redirect``'s
    ``done``), shown by ``base.html`` this once."""
    session = request.get(SESSION)
    done = _opened(request.cookies.get(DONE, ""), session.csrf) if session else ""
    html = _TEMPLATES.get_template(template).render(
        session=session,
        csrf=session.csrf if session else "",
        here=request.path,
        back=request.path_qs,
        done=done,
        **context,
    )
    response = web.Response(
        text=html, status=status, content_type="text/html", charset="utf-8", headers=HEADERS
    )
    if DONE in request.cookies:
        response.del_cookie(DONE, path="/")
    return response


def actor(request: web.Request) -> Actor:
    """Who makes a page's change: the signed-in session's admin key, by name (or as shown,
    ``*:*.abcd****``, when it has none)."""
    session = request[SESSION]
    return Actor(session.key_name or session.key_display)


def redirect(location: str, done: str = "") -> web.Response:
    """303: after a form, the browser asks for the page again (no repost on reload).
    ``done`` says what the form did ("turned off checkout in production"): the next page
    shows it once. It travels in a short-lived cookie rather than the address, so a link
    cannot make the page claim something was done; ``page`` signs it with the session's
    secret, so neither can a cookie set from elsewhere (a sibling subdomain)."""
    response = web.Response(status=303, headers={**HEADERS, "Location": location})
    if done:
        response.set_cookie(
            DONE,
            quote(done[:MAX_DONE], safe=""),
            path="/",
            max_age=60,
            httponly=True,
            samesite="Strict",
        )
    return response


def page(handler: PageHandler) -> PageHandler:
    """A page for signed-in admins: anyone else is sent to the sign-in form. Domain errors
    (an unknown flag...) become an HTML page with their status, not the API's JSON."""

    @functools.wraps(handler)
    async def wrapped(request: web.Request) -> web.StreamResponse:
        try:
            session = await request.app[SESSIONS].find(request.cookies.get(COOKIE, ""))
            if session is None:  # back here after signing in; after a form, to the flags
                back = request.path_qs if request.method == "GET" else "/"
                return redirect(f"/login?next={quote(back, safe='')}")
            request[SESSION] = session
            for value in request.match_info.values():  # what no name can be: no such thing
                if len(value) > MAX_NAME or "\x00" in value:
                    raise errors.NotFoundError("Not found")
            for name, value in request.query.items():  # no store can keep NUL
                if "\x00" in value:
                    raise errors.BadDataError(f"`{name[:40]}` must not contain NUL characters")
            response = await handler(request)
            _sign_done(response, session.csrf)
            return response
        except DomainError as exc:
            error = errors.from_domain(exc)
            return render(request, "error.html", error.status, message=error.message)
        except errors.ApiError as exc:
            return render(request, "error.html", exc.status, message=exc.message)
        except StorageError as exc:
            log.error("storage unavailable", extra={"error": str(exc), "path": request.path})
            message = "The database is unavailable: retry in a moment"
            return render(request, "error.html", 503, message=message)

    return wrapped


def _mac(quoted: str, key: str) -> str:
    return hmac.new(key.encode(), quoted.encode(), hashlib.sha256).hexdigest()[:32]


def _sign_done(response: web.StreamResponse, key: str) -> None:
    """The confirmation line ``redirect`` set, signed with ``key`` (the session's CSRF
    token: secret, and this session's only)."""
    morsel = response.cookies.get(DONE)
    if morsel is not None and morsel.value:
        signed = f"{_mac(morsel.value, key)}.{morsel.value}"
        morsel.set(DONE, signed, signed)


def _opened(value: str, key: str) -> str:
    """The line of a cookie ``_sign_done`` signed with ``key``; nothing for any other."""
    mac, _, quoted = value.partition(".")
    if not hmac.compare_digest(mac.encode(), _mac(quoted, key).encode()):
        return ""
    return unquote(quoted)[:MAX_DONE]


API_PREFIXES = ("/api/", "/internal-backstage/", "/edge/")
"""Paths of the API (and the relay's validation path): their errors stay JSON."""


@web.middleware
async def not_found(request: web.Request, handler: PageHandler) -> web.StreamResponse:
    """A GET of a path no route has, outside the API, is someone at the page: it answers an
    HTML "not found" page (with the menu when signed in), not the API's JSON error."""
    try:
        return await handler(request)
    except web.HTTPNotFound:
        if request.method not in ("GET", "HEAD") or request.path.startswith(API_PREFIXES):
            raise
        session = await request.app[SESSIONS].find(request.cookies.get(COOKIE, ""))
        if session is not None:
            request[SESSION] = session
        return render(request, "not_found.html", 404, path=request.path)


async def form(request: web.Request, checked: bool = True, fields: int = 50) -> dict[str, str]:
    """The posted form's fields (the first value of each, at most ``fields`` of them), read
    within the service's body limits; with ``checked``, its CSRF token must be the
    session's (else 403)."""
    raw = await read_body(request)
    try:
        found = parse_qs(raw.decode("utf-8"), max_num_fields=fields, keep_blank_values=True)
    except (UnicodeDecodeError, ValueError):
        raise errors.BadDataError("The form cannot be read") from None
    values = {name: given[0] for name, given in found.items()}
    for name, value in values.items():  # as the API refuses it: no store can keep NUL
        if "\x00" in value:
            raise errors.BadDataError(f"`{name[:40]}` must not contain NUL characters")
    if checked:
        session = request.get(SESSION)
        token = values.get("csrf", "")
        if session is None or not hmac.compare_digest(token.encode(), session.csrf.encode()):
            raise errors.NoAccessError("The form is out of date: reload the page and try again")
    return values


_LOCAL = re.compile(r"/(?![/\\])[!-~]*")
"""A path on this site: one slash first, then visible ASCII only (browsers drop tabs and
newlines from addresses, so ``/\t/evil.example`` would become ``//evil.example``)."""


def local(target: str | None, default: str = "/") -> str:
    """A place on this site to go back to; anything else (another host, ``//x``) is not."""
    if target and _LOCAL.fullmatch(target) and "\\" not in target:
        return target
    return default


async def static(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    kind = STATIC.get(name)
    if kind is None:
        raise errors.NotFoundError("Not found")
    body = resources.files("relay.central.web").joinpath("static", name).read_bytes()
    headers = {"Cache-Control": "public, max-age=3600", "X-Content-Type-Options": "nosniff"}
    return web.Response(body=body, content_type=kind, headers=headers)
