"""``buffer.db``, the one file every worker writes counts into, with the reserve beside it
(``relay.store.reserve``): checked for damage at start, older relays' per-worker files
moved into it, and held open for the application's life (``cleanup_ctx`` factories).

With one worker these start-up steps run in the worker; with several, ``initialise`` runs
them once before the workers start, and each worker only opens the file."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from pathlib import Path

from aiohttp import web

from relay.settings import Settings
from relay.store.metrics import MetricsStore
from relay.store.reserve import (
    START_PATIENCE,
    Reserve,
    open_with_room,
    reserve_size,
    wal_bound,
)
from relay.store.salvage import check_buffers
from relay.store.shards import drain_shards
from relay.store.sql import BUFFER_SCHEMA
from relay.store.sqlite import SqliteDatabase

log = logging.getLogger(__name__)


class BufferFile:
    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        size = reserve_size(settings.buffer_max_bytes, settings.data_dir)
        self.reserve = Reserve(settings.data_dir / "buffer.reserve", size)
        self.wal_bytes = wal_bound(size)
        """Where the buffer's WAL is checkpointed (``wal_bound``)."""
        self.db = SqliteDatabase(
            settings.buffer_path, BUFFER_SCHEMA, settings.sqlite_synchronous, self.wal_bytes
        )
        self._unchecked: list[Path] = []

    def counts(self) -> MetricsStore:
        """The store the worker's requests write their counts through (group commits of at
        most the WAL's bound)."""
        settings = self._settings
        return MetricsStore(
            self.db,
            settings.commit_max_requests,
            settings.idempotency_ttl,
            touched=True,
            group_bytes=self.wal_bytes,
        )

    async def check(self, ran_before: bool) -> list[Path]:
        """The file and older relays' per-worker files checked, a damaged one salvaged
        (``relay.store.salvage``), before anything opens them; returns those that
        could not be checked."""
        settings = self._settings
        return await check_buffers(
            settings.buffer_path, settings.sqlite_synchronous, self.wal_bytes, ran_before
        )

    async def drain_shards(self) -> None:
        """What an older relay's workers buffered in files of their own moved into the open
        ``buffer.db`` (``relay.store.shards``)."""
        settings = self._settings
        store = MetricsStore(
            self.db, settings.commit_max_requests, settings.idempotency_ttl, touched=True
        )
        store.start()
        try:
            await drain_shards(
                settings.buffer_path, store, settings.sqlite_synchronous, self.wal_bytes
            )
        finally:
            await store.stop()

    def checked(self, ran_before: bool) -> Callable[[web.Application], AsyncIterator[None]]:
        """One worker: the start-up check, before the cache file adopts what an older
        ``buffer.db`` holds of flags; what it could not check is said once the file opened
        (on a read-only disk the open's error alone is)."""

        async def ctx(app: web.Application) -> AsyncIterator[None]:
            self._unchecked = await self.check(ran_before)
            yield

        return ctx

    async def opened(self, app: web.Application) -> AsyncIterator[None]:
        """Opened (on a full disk with the room the reserve hands back), the older relays'
        files drained into it by a worker alone, and closed last."""
        try:
            await open_with_room(self.db, self.reserve, START_PATIENCE)
            if self._settings.workers == 1:
                await self.drain_shards()
            for path in self._unchecked:
                log.warning(
                    "buffer file not checked for damage at start: it could not be opened"
                    " then (disk full?)",
                    extra={"path": str(path)},
                )
            yield
        finally:
            await self.db.close()


def writing(store: MetricsStore) -> Callable[[web.Application], AsyncIterator[None]]:
    """``store``'s group commit, running while the application serves; stopping it commits
    what it holds."""

    async def ctx(app: web.Application) -> AsyncIterator[None]:
        store.start()
        yield
        await store.stop()

    return ctx
