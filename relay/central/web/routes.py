"""The web page put on the central service's application: its state and its routes.

Pages are not part of the API, so they are registered here rather than through the API's
route table (``relay.api.routing``), and are absent from the OpenAPI document."""

from __future__ import annotations

from aiohttp import web

from relay.central.web import actions, pages
from relay.central.web.sessions import SessionStore
from relay.central.web.site import SECURE_COOKIES, SESSIONS, static
from relay.settings import Settings
from relay.store.sql import Database


def add_web(app: web.Application, db: Database, settings: Settings) -> SessionStore:
    """The session store is returned for the wiring's job that forgets expired sessions."""
    sessions = app[SESSIONS] = SessionStore(db, settings.web_session_ttl)
    app[SECURE_COOKIES] = settings.web_secure_cookies
    router = app.router
    router.add_get("/", pages.flags)
    router.add_get("/flags/{name:[^/]+}", pages.flag)
    router.add_post("/flags/{name:[^/]+}/environments/{environment:[^/]+}", actions.switch)
    router.add_get("/applications", pages.applications)
    router.add_get("/relays", pages.relays)
    router.add_get("/unknown-flags", pages.unknown)
    router.add_get("/keys", pages.keys)
    router.add_post("/keys", actions.create_key)
    router.add_post("/keys/{id:[^/]+}/revoke", actions.revoke_key)
    router.add_get("/login", actions.sign_in_form)
    router.add_post("/login", actions.sign_in)
    router.add_post("/logout", actions.sign_out)
    router.add_get("/static/{name}", static)
    return sessions
