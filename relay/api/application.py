"""The aiohttp application both modes serve: middlewares, the routes every service has
(health, readiness, metrics, the OpenAPI document), and the document built from the routes.

Each mode's wiring (``relay.central.wiring``, ``relay.edge.wiring``) adds its own routes,
state and ``cleanup_ctx`` resources; ``relay.app`` picks the mode.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from importlib.metadata import version

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.typedefs import Middleware

from relay.api import backstage, docs
from relay.api.client_address import PROXY_TRUST, ProxyTrust
from relay.api.connections import write_in_slices
from relay.api.cors import (
    POLICIES,
    api_policy,
    cors_headers,
    cors_middleware,
    frontend_policy,
    proxy_policy,
)
from relay.api.middleware import STORAGE_TROUBLE, OncePerSecond, common_headers, observe
from relay.api.open_files import open_files
from relay.api.openapi import document
from relay.api.routing import Route, add_routes
from relay.api.shared import Shared
from relay.api.state import AUTH_FAILURES, OPENAPI, READY, SETTINGS, SHARED, OpenApi
from relay.api.throttle import FailureLimit
from relay.settings import Settings


def new_application(settings: Settings, shared: Shared) -> web.Application:
    """An application not ready yet (``/ready`` answers 503 until ``READY`` is set);
    ``shared``: what its worker shares with the service's others."""
    middlewares: list[Middleware] = [observe, cors_middleware()]
    app = web.Application(
        client_max_size=settings.max_body_bytes,
        middlewares=middlewares,
        # bodies are decoded by relay.api.body, within the limits and with JSON errors; the
        # server's own decoder answered 500 or plain text, and lost the connection's framing
        handler_args={"auto_decompress": False},
    )
    app[SETTINGS] = settings
    app[SHARED] = shared
    app[PROXY_TRUST] = ProxyTrust.of(settings.trust_proxy, settings.proxy_trusted_servers)
    app[POLICIES] = (
        frontend_policy(settings.frontend_cors_origins),
        proxy_policy(settings),
        api_policy(settings.cors_origins),
    )
    app[READY] = [False]
    app[AUTH_FAILURES] = FailureLimit(
        shared, settings.auth_failure_limit, settings.auth_failure_window
    )
    app[STORAGE_TROUBLE] = OncePerSecond()
    app.on_response_prepare.append(common_headers)
    app.on_response_prepare.append(cors_headers)
    app.on_response_prepare.append(write_in_slices)
    app.on_startup.append(open_files)
    logging.getLogger("aiohttp.server").addFilter(_CLIENT_FAULTS)
    return app


def serve_routes(app: web.Application, routes: Sequence[Route]) -> None:
    """Register the mode's routes and the shared ones, and document them all."""
    every = [*routes, *backstage.routes(app[SETTINGS]), *docs.ROUTES]
    add_routes(app, every)
    app[OPENAPI] = OpenApi(lambda: document(every, version("relay")))


class _ClientFaults(logging.Filter):
    """Requests that are not HTTP (bad request lines, headers, chunked framing) are the
    client's fault: aiohttp logs each with a traceback at error level, a cheap way for
    anyone to fill the disk. They become one line at debug, naming the kind of fault only:
    aiohttp's message quotes the request's bytes (a key in a bad header or an over-long
    URL)."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if not isinstance(error, HttpProcessingError):
            return True
        record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        record.msg, record.args = "malformed request: %s (%d)", (type(error).__name__, error.code)
        record.exc_info = record.exc_text = None
        return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)


_CLIENT_FAULTS = _ClientFaults()
