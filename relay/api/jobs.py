"""Periodic background jobs, each run as one ``cleanup_ctx`` of the application."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable

from aiohttp import web

log = logging.getLogger(__name__)


def every(
    seconds: float,
    job: Callable[[], Awaitable[object]],
    name: str,
    wake: asyncio.Event | None = None,
) -> Callable[[web.Application], AsyncIterator[None]]:
    """Run ``job`` every ``seconds``, and as soon as ``wake`` is set (the job clears it).
    On shutdown a run in progress is let finish, never cancelled: a cancelled await does
    not stop a statement already handed to the database thread, so the job's bookkeeping
    after it (counting evicted entries) would be lost."""
    stop = asyncio.Event()
    woken = wake or asyncio.Event()

    async def loop() -> None:
        while not stop.is_set():
            waits = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(woken.wait())]
            await asyncio.wait(waits, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
            for waiting in waits:
                waiting.cancel()
            if stop.is_set():
                return
            try:
                await job()
            except Exception:
                log.exception("periodic job failed", extra={"job": name})

    async def ctx(app: web.Application) -> AsyncIterator[None]:
        task = asyncio.create_task(loop(), name=name)
        yield
        stop.set()
        await task

    return ctx
