"""The composition root: ``build_app(settings)`` is the only place that knows the mode.

Each resource or background task is one ``cleanup_ctx`` generator: opened before ``yield``,
closed after, so shutdown runs in reverse order of start-up.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from importlib.metadata import version

from aiohttp import web

from relay.api import admin, backstage, client, docs, edge
from relay.api.middleware import observe
from relay.api.routing import Route, add_routes
from relay.auth import KeySpec
from relay.ingest import Ingest
from relay.keys import KeyService
from relay.openapi import document
from relay.settings import Settings
from relay.state import (
    INGEST,
    KEY_RESOLVER,
    KEYS,
    METRICS,
    OPENAPI,
    PROJECTS,
    READY,
    SETTINGS,
)
from relay.store.metrics import SqliteMetricsStore
from relay.store.projects import SqliteProjectStore
from relay.store.sqlite import SqliteDatabase
from relay.store.tokens import SqliteKeyStore

log = logging.getLogger(__name__)

PRUNE_INTERVAL = 3600.0


def build_app(settings: Settings) -> web.Application:
    app = web.Application(client_max_size=settings.max_body_bytes, middlewares=[observe])
    app[SETTINGS] = settings
    app[READY] = [False]
    routes = [*_standalone(app, settings), *backstage.ROUTES, *docs.ROUTES]
    add_routes(app, routes)
    app[OPENAPI] = document(routes, version("relay"))
    return app


def _standalone(app: web.Application, settings: Settings) -> list[Route]:
    db = SqliteDatabase(settings.sqlite_path, "central", settings.sqlite_synchronous)
    key_store = SqliteKeyStore(db)
    projects = SqliteProjectStore(db)
    metrics = SqliteMetricsStore(db, settings.commit_max_requests, settings.idempotency_ttl)
    keys = KeyService(key_store, projects)
    app[KEY_RESOLVER] = key_store
    app[PROJECTS] = projects
    app[METRICS] = metrics
    app[KEYS] = keys
    app[INGEST] = Ingest(metrics)

    async def storage(app: web.Application) -> AsyncIterator[None]:
        await db.open()
        try:
            await keys.ensure(settings.init_admin_api_tokens, settings.init_client_api_tokens)
            _announce(await keys.bootstrap())
            metrics.start()
            app[READY][0] = True
            yield
            app[READY][0] = False
            await metrics.stop()
        finally:
            await db.close()

    app.cleanup_ctx.append(storage)
    app.cleanup_ctx.append(_every(PRUNE_INTERVAL, metrics.prune_idempotency, "prune"))
    return [*client.ROUTES, *admin.ROUTES, *edge.ROUTES]


def _announce(created: list[KeySpec]) -> None:
    """Print first-start keys once, on stdout and never in the log: only hashes are kept."""
    if not created:
        return
    lines = ["", "No API key existed, so these were created. They are shown only now:"]
    lines += [f"  {spec.principal.type.value:<6} {spec.secret}" for spec in created]
    lines += ["Create more with `relay keys create` or POST /api/admin/api-tokens.", ""]
    print("\n".join(lines), file=sys.stdout, flush=True)


def _every(
    seconds: float, job: Callable[[], Awaitable[object]], name: str
) -> Callable[[web.Application], AsyncIterator[None]]:
    async def loop() -> None:
        while True:
            await asyncio.sleep(seconds)
            try:
                await job()
            except Exception:
                log.exception("periodic job failed", extra={"job": name})

    async def ctx(app: web.Application) -> AsyncIterator[None]:
        task = asyncio.create_task(loop(), name=name)
        yield
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    return ctx
