"""What the web page changes (POST): signing in and out, turning a flag on or off in an
environment, creating and revoking keys. Every form but sign-in carries the session's CSRF
token (``site.form``); each change goes through the service the admin API uses."""

from __future__ import annotations

from aiohttp import web
from pydantic import ValidationError

from relay.api.auth import identify
from relay.api.errors import ApiError, BadDataError, from_domain, from_validation
from relay.central.state import FLAGS, KEYS
from relay.central.web.pages import keys_page
from relay.central.web.sessions import COOKIE, clear_cookie
from relay.central.web.site import (
    SECURE_COOKIES,
    SESSION,
    SESSIONS,
    actor,
    form,
    local,
    page,
    redirect,
    render,
)
from relay.core.errors import DomainError
from relay.core.keys import hash_key, strip_scheme
from relay.wire.admin import CreateApiKey
from relay.wire.common import KeyType


async def sign_in_form(request: web.Request) -> web.Response:
    return render(request, "login.html", next=local(request.query.get("next")), error="")


async def sign_in(request: web.Request) -> web.Response:
    """The admin key, posted once, becomes a session cookie. Each attempt counts against
    the address's budget of invalid keys (``relay.api.throttle``), as a key in a header
    does; the key is never put in a page, a URL or a log."""
    try:
        values = await form(request, checked=False)
        target = local(values.get("next"))
        key = strip_scheme(values.get("key", ""))
        if not key:
            raise BadDataError("Enter an admin key")
        principal = (await identify(request, [key]))[key]
    except ApiError as exc:
        return render(request, "login.html", exc.status, next="/", error=exc.message)
    if principal is None or principal.type is not KeyType.ADMIN:
        error = "That is not an admin key of this service"
        return render(request, "login.html", 401, next=target, error=error)
    session_id = await request.app[SESSIONS].open(hash_key(key))
    response = redirect(target)
    secure = request.secure or request.app[SECURE_COOKIES]
    request.app[SESSIONS].set_cookie(response, session_id, secure)
    return response


@page
async def sign_out(request: web.Request) -> web.Response:
    await form(request)
    await request.app[SESSIONS].close(request.cookies.get(COOKIE, ""))
    response = redirect("/login")
    clear_cookie(response)
    return response


@page
async def switch(request: web.Request) -> web.Response:
    """Turn a flag on or off in one environment (the admin API's ``.../on`` and ``/off``)."""
    values = await form(request)
    name, environment = request.match_info["name"], request.match_info["environment"]
    flags = request.app[FLAGS]
    project = await flags.project_of(name)
    on = values.get("on") == "true"
    await flags.set_enabled(actor(request), project, name, environment, on)
    done = f"Turned {'on' if on else 'off'} {name} in {environment}"
    return redirect(local(values.get("next")), done)


@page
async def create_key(request: web.Request) -> web.Response:
    """The new key's secret is shown in this answer only (never stored, never again)."""
    values = await form(request)
    admin = values.get("type") == KeyType.ADMIN.value  # every environment and project
    try:
        body = CreateApiKey(
            type=values.get("type", ""),  # checked here
            environment=None if admin else values.get("environment") or None,
            projects=["*" if admin else values.get("project") or "*"],
            tokenName=values.get("name") or None,
        )
        secret, record = await request.app[KEYS].issue(actor(request), body)
    except ValidationError as exc:
        return await keys_page(request, 400, from_validation(exc, root="").message)
    except DomainError as exc:
        return await keys_page(request, from_domain(exc).status, exc.message)
    return render(request, "key_created.html", 201, secret=secret, record=record)


@page
async def revoke_key(request: web.Request) -> web.Response:
    """Asks first (the page has no script for a dialog): revoking cannot be undone, and
    revoking the key of this session ends it."""
    values = await form(request)
    key_id = request.match_info["id"]
    found = [k for k in await request.app[KEYS].listed() if k.id == key_id]
    if not found:
        return await keys_page(request, 404, f"No API key with the id {key_id}")
    if values.get("confirm") != "yes":
        return render(request, "revoke.html", record=found[0])
    record = await request.app[KEYS].revoke(actor(request), key_id)
    if record.id == request[SESSION].key_id:  # this session ended with its key
        response = redirect("/login")
        clear_cookie(response)
        return response
    revoked = record.principal.token_name or record.principal.display
    return redirect("/keys", f"Revoked the key {revoked} (id {record.id})")
