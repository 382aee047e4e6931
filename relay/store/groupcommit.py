"""Group commit: concurrent writers share one transaction, and each waits for its commit.

This is what lets "202 means durable" be fast: a request is answered only after the
transaction holding its counts has committed, but one commit (one fsync) serves every
request that arrived while the previous one was being written.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Generic, TypeVar

from relay.core.errors import DataRefused, StorageError, Unstorable

log = logging.getLogger(__name__)

Conn = TypeVar("Conn")
Item = TypeVar("Item")
Result = TypeVar("Result")

Work = Callable[[Conn], Awaitable[Sequence[Result | BaseException]]]
Plan = Callable[[Sequence[Item]], Work[Conn, Result]]
Run = Callable[[Work[Conn, Result]], Awaitable[Sequence[Result | BaseException]]]


class GroupCommitter(Generic[Conn, Item, Result]):
    """Feeds queued items to ``plan`` in groups, one write transaction per group.

    ``plan`` runs on the event loop and returns the group's transaction work: what needs no
    database (merging, building rows) is done there, so the write lock, which other worker
    processes wait for, is held for the statements only. ``run`` runs that work in one
    transaction (any backend: it commits when the work returns and rolls back when it
    raises). The work returns each item's result, or the exception its waiter gets.

    ``linger``: seconds a group may wait for as many items as the previous group held, when
    fewer are queued (0: never). Under load the items answered by one commit come back
    together for the next, a little apart: without it the first starts a group of its own
    and the rest the next one, twice the commits. Where nothing is in flight it costs
    nothing (a group of one waits for no one)."""

    def __init__(
        self,
        run: Run[Conn, Result],
        plan: Plan[Item, Conn, Result],
        max_items: int,
        linger: float = 0.0,
        size: Callable[[Item], int] | None = None,
        max_bytes: int | None = None,
    ) -> None:
        """A group takes at most ``max_items`` items, and stops taking more once their
        ``size`` reaches ``max_bytes`` (a transaction's WAL is at least what it writes: a
        small buffer's bound must not be passed by one commit)."""
        self._run_in_transaction = run
        self._plan = plan
        self._max_items = max_items
        self._linger = linger
        self._size = size
        self._max_bytes = max_bytes
        self._queue: asyncio.Queue[tuple[Item, asyncio.Future[Result]]] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self._last = 1  # items of the previous group
        self._enough: asyncio.Event | None = None  # set when the lingering group is full

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="group-commit")

    async def stop(self) -> None:
        """Commit what is queued, then end the writer."""
        if self._task is None:
            return
        await self._queue.join()
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self._task = None

    async def submit(self, item: Item) -> Result:
        if self._task is None:
            raise StorageError("storage is shutting down")
        future: asyncio.Future[Result] = asyncio.get_running_loop().create_future()
        future.add_done_callback(_retrieve)
        await self._queue.put((item, future))
        if self._enough is not None and self._queue.qsize() + 1 >= self._last:
            self._enough.set()
        # shield: a client that hangs up must not cancel the commit other requests share
        return await asyncio.shield(future)

    async def _run(self) -> None:
        while True:
            group = [await self._queue.get()]
            if self._linger and self._queue.qsize() + 1 < min(self._last, self._max_items):
                await self._wait_for_more()
            size = self._sized(group[0][0])
            while len(group) < self._max_items and not self._queue.empty():
                if self._max_bytes is not None and size >= self._max_bytes:
                    break
                group.append(self._queue.get_nowait())
                size += self._sized(group[-1][0])
            self._last = len(group)
            try:
                await self._commit(group)
            finally:
                for _ in group:
                    self._queue.task_done()

    def _sized(self, item: Item) -> int:
        return 0 if self._size is None else self._size(item)

    async def _wait_for_more(self) -> None:
        self._enough = asyncio.Event()
        try:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._linger):
                    await self._enough.wait()
        finally:
            self._enough = None

    async def _commit(self, group: list[tuple[Item, asyncio.Future[Result]]]) -> None:
        """A group whose data the database refuses is committed again in halves, down to
        the one item at fault: one request's data never fails the requests it shared a
        transaction with."""
        try:
            results = await self._run_in_transaction(self._plan([item for item, _ in group]))
        except DataRefused as exc:
            if len(group) > 1:
                await self._commit(group[: len(group) // 2])
                await self._commit(group[len(group) // 2 :])
                return
            log.error("the database refused a request's data", extra={"error": str(exc)})
            [(_, future)] = group
            if not future.done():
                future.set_exception(Unstorable("This request's data cannot be stored"))
            return
        except Exception as exc:  # every waiter learns of the failure; the writer lives on
            for _, future in group:
                if not future.done():
                    future.set_exception(exc)
            return
        for (_, future), result in zip(group, results, strict=True):
            if future.done():
                continue
            if isinstance(result, BaseException):
                future.set_exception(result)
            else:
                future.set_result(result)


def _retrieve(future: asyncio.Future[Any]) -> None:
    """Mark a failure as seen even when its waiter has gone (the client hung up)."""
    if not future.cancelled():
        future.exception()
