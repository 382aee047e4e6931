"""The web page put on the central service's application: its state and its routes.

Pages are not part of the API, so they are registered here rather than through the API's
route table (``relay.api.routing``), and are absent from the OpenAPI document."""

from __future__ import annotations

from aiohttp import web

from relay.api.routing import Handler
from relay.central.web import (
    actions,
    archive,
    events,
    flag_actions,
    flag_links,
    pages,
    playground,
    projects,
    segments,
    strategy_pages,
)
from relay.central.web.session_records import SqlSessionRecords
from relay.central.web.sessions import SessionStore
from relay.central.web.site import SECURE_COOKIES, SESSIONS, not_found, static
from relay.settings import Settings
from relay.store.sql import Database

_FLAG = "/flags/{name:[^/]+}"
_STRATEGIES = f"{_FLAG}/environments/{{environment:[^/]+}}/strategies"
_ENVIRONMENT = "/projects/{id:[^/]+}/environments/{environment:[^/]+}"

PAGES: list[tuple[str, str, Handler]] = [
    ("GET", "/", pages.flags),
    ("GET", "/new-flag", flag_actions.new_flag),
    ("POST", "/flags", flag_actions.create_flag),
    ("GET", _FLAG, pages.flag),
    ("POST", f"{_FLAG}/settings", flag_actions.flag_settings),
    ("POST", f"{_FLAG}/archive", flag_actions.archive_flag),
    ("POST", f"{_FLAG}/environments/{{environment:[^/]+}}", actions.switch),
    ("POST", f"{_FLAG}/dependencies", flag_links.set_dependency),
    ("POST", f"{_FLAG}/dependencies/delete", flag_links.remove_dependency),
    ("POST", f"{_FLAG}/tags", flag_links.add_tag),
    ("POST", f"{_FLAG}/tags/delete", flag_links.remove_tag),
    ("GET", f"{_FLAG}/environments/{{environment:[^/]+}}/variants", flag_links.variants_form),
    ("POST", f"{_FLAG}/environments/{{environment:[^/]+}}/variants", flag_links.save_variants),
    ("GET", "/events", events.events),
    ("GET", f"{_STRATEGIES}/new", strategy_pages.new_strategy),
    ("POST", _STRATEGIES, strategy_pages.save_strategy),
    ("GET", f"{_STRATEGIES}/{{id:[^/]+}}", strategy_pages.edit_strategy),
    ("POST", f"{_STRATEGIES}/{{id:[^/]+}}", strategy_pages.save_strategy),
    ("POST", f"{_STRATEGIES}/{{id:[^/]+}}/delete", strategy_pages.delete_strategy),
    ("POST", f"{_STRATEGIES}/{{id:[^/]+}}/move", strategy_pages.move_strategy),
    ("GET", "/playground", playground.playground),
    ("GET", "/applications", pages.applications),
    ("GET", "/relays", pages.relays),
    ("GET", "/unknown-flags", pages.unknown),
    ("GET", "/segments", segments.segments),
    ("POST", "/segments", segments.save_segment),
    ("GET", "/segments/new", segments.segment_form),
    ("GET", r"/segments/{id:\d+}", segments.segment_form),
    ("POST", r"/segments/{id:\d+}", segments.save_segment),
    ("POST", r"/segments/{id:\d+}/delete", segments.delete_segment),
    ("GET", "/projects", projects.projects),
    ("POST", "/projects", projects.create_project),
    ("GET", "/projects/{id:[^/]+}", projects.project),
    ("POST", "/projects/{id:[^/]+}/rename", projects.rename_project),
    ("POST", "/projects/{id:[^/]+}/delete", projects.delete_project),
    ("POST", "/projects/{id:[^/]+}/environments", projects.add_environment),
    ("POST", f"{_ENVIRONMENT}/remove", projects.remove_environment),
    ("POST", f"{_ENVIRONMENT}/default-strategy", projects.default_strategy),
    ("GET", "/environments", projects.environments),
    ("POST", "/environments", projects.create_environment),
    ("POST", "/environments/{environment:[^/]+}", projects.update_environment),
    ("POST", "/environments/{environment:[^/]+}/delete", projects.delete_environment),
    ("GET", "/archive", archive.archive),
    ("POST", "/archive/{name:[^/]+}/revive", archive.revive),
    ("POST", "/archive/{name:[^/]+}/delete", archive.delete),
    ("GET", "/keys", pages.keys),
    ("POST", "/keys", actions.create_key),
    ("POST", "/keys/{id:[^/]+}/revoke", actions.revoke_key),
    ("GET", "/login", actions.sign_in_form),
    ("POST", "/login", actions.sign_in),
    ("POST", "/logout", actions.sign_out),
    ("GET", "/static/{name}", static),
]


def add_web(app: web.Application, db: Database, settings: Settings) -> SessionStore:
    """The session store is returned for the wiring's job that forgets expired sessions."""
    sessions = app[SESSIONS] = SessionStore(SqlSessionRecords(db), settings.web_session_ttl)
    app[SECURE_COOKIES] = settings.web_secure_cookies
    app.middlewares.append(not_found)
    for method, path, handler in PAGES:
        app.router.add_route(method, path, handler)
    return sessions
