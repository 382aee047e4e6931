"""The central service's database as a resource of its application: chosen from the
settings, opened (with what must hold before the first request: keys provisioned and
loaded), and closed after every other resource has ended."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable

from aiohttp import web

from relay.core.errors import StorageError
from relay.settings import Settings
from relay.store.postgres import PostgresDatabase
from relay.store.sql import CENTRAL_SCHEMA, Database
from relay.store.sqlite import SqliteDatabase

log = logging.getLogger(__name__)


def central_database(settings: Settings) -> Database:
    """PostgreSQL when ``database_url`` names it, else a SQLite file."""
    if settings.database_url is not None and settings.uses_postgres:
        return PostgresDatabase(
            settings.database_url,
            CENTRAL_SCHEMA,
            settings.database_pool_size,
            settings.database_timeout,
        )
    return SqliteDatabase(settings.sqlite_path, CENTRAL_SCHEMA, settings.sqlite_synchronous)


def opened(
    db: Database,
    settings: Settings,
    ready: list[bool],
    prepare: Callable[[], Awaitable[None]],
) -> Callable[[web.Application], AsyncIterator[None]]:
    """Open ``db`` and run ``prepare`` on it, then say the service is ``ready``. A SQLite
    file that cannot be opened is a configuration error (start-up fails); a shared
    PostgreSQL may be down when a replica starts, so the replica starts anyway, not ready
    (503), and keeps trying (``_until_open``). Listed first, it ends last: the database
    closes after every job and store that writes to it has stopped."""

    async def attempt() -> None:
        await db.open()
        try:
            await prepare()
        except StorageError:
            await db.close()
            raise
        ready[0] = True

    async def ctx(app: web.Application) -> AsyncIterator[None]:
        opening: asyncio.Task[None] | None = None
        try:
            try:
                await attempt()
            except StorageError as exc:
                if not settings.uses_postgres:
                    raise
                log.error(
                    "database unavailable at start-up: answering 503 and retrying",
                    extra={"error": str(exc)},
                )
                opening = asyncio.create_task(_until_open(attempt), name="database-open")
            yield
        finally:
            ready[0] = False
            if opening is not None:
                opening.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await opening
            await db.close()

    return ctx


async def _until_open(attempt: Callable[[], Awaitable[None]]) -> None:
    """Retried with a growing delay (up to 30 s) until the database answers; the replica is
    ready as soon as it does."""
    delay = 1.0
    while True:
        await asyncio.sleep(delay)
        try:
            await attempt()
        except StorageError as exc:
            delay = min(delay * 2, 30.0)
            log.warning("database still unavailable", extra={"error": str(exc), "retry_in": delay})
        else:
            log.info("database available: ready")
            return
