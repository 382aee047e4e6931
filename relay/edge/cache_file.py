"""``cache.db`` (``relay.store.cache_file``) open for the application's life."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

from aiohttp import web

from relay.store.cache_file import open_cache
from relay.store.reserve import START_PATIENCE, Reserve, open_with_room
from relay.store.sqlite import SqliteDatabase


def opened(
    cache: SqliteDatabase, reserve: Reserve, buffer: Path | None
) -> Callable[[web.Application], AsyncIterator[None]]:
    """``cache`` open while the application serves. ``buffer``: the buffer file whose older
    flag copies it adopts (``open_cache``), by a worker alone; with several, ``initialise``
    did that before they started, and each only opens the file."""

    async def ctx(app: web.Application) -> AsyncIterator[None]:
        try:
            if buffer is None:
                await open_with_room(cache, reserve, START_PATIENCE)
            else:
                await open_cache(cache, buffer, reserve)
            yield
        finally:
            await cache.close()

    return ctx
