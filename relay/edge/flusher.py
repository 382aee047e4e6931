"""The relay's send loop: claim buffered counts into batches, send them, record the outcome.

Outcomes (``relay.upstream.Outcome``) decide everything:
- ok: the batch leaves the outbox;
- too_large (413): the batch is split in halves and retried; a single entry is dead-lettered;
- rejected (other 4xx): dead-lettered, kept in ``dead_letters`` with the reason;
- misconfigured (401/403/404, or a redirect): the environment's key or the URL is wrong; its
  batches stay and
  that environment waits ``backoff_max`` before trying again;
- retry (429, 5xx, timeout, connection error): everything stays; the loop waits with
  exponential backoff and jitter, capped at ``backoff_max``, or as long as ``Retry-After`` says.
While the upstream is failing, new counts keep aggregating in the buffer instead of piling
up as batches: a new batch is cut only when the outbox is empty.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Awaitable, Callable, Mapping

from prometheus_client import Counter

from relay.edge.outbox import CLAIM_ENTRIES, PENDING_PAGE, OutboxBatch, SqliteOutbox
from relay.edge.upstream import Outcome, SendResult, UpstreamClient

log = logging.getLogger(__name__)

FLUSHES = Counter("relay_flush_batches_total", "Batches sent upstream, by outcome", ["outcome"])
DEAD_LETTERED = Counter(
    "relay_dead_lettered_entries_total", "Entries the upstream refused for good"
)


class Flusher:
    def __init__(
        self,
        outbox: SqliteOutbox,
        upstream: UpstreamClient,
        keys: Mapping[str, str],
        interval: float,
        backoff_max: float,
        gather: Callable[[], Awaitable[object]],
    ) -> None:
        """``gather`` brings counts buffered elsewhere into the outbox's buffer before each
        flush: the other workers' shards (``relay.edge.shards``)."""
        self._outbox = outbox
        self._gather = gather
        self._upstream = upstream
        self._keys = dict(keys)
        self._interval = interval
        self._backoff_max = backoff_max
        self._failures = 0
        self._retry_at = 0.0
        self._blocked: dict[str, float] = {}
        self._warned_no_key: set[str] = set()
        self._task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()
        self.last_result: tuple[float, SendResult] | None = None  # (when, what): for reports

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="flusher")

    async def stop(self, final_flush_timeout: float) -> None:
        """Stop the loop, letting a flush in progress finish (it is cancelled only when the
        deadline passes), then one last flush; what is left stays on disk for the next
        start."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + final_flush_timeout
        if self._task is not None:
            self._stop.set()
            with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(self._task, final_flush_timeout)
            self._task = None
        self._retry_at = 0.0
        why = ""
        try:
            drained = await asyncio.wait_for(self.flush(), max(0.0, deadline - loop.time()))
        except TimeoutError:
            drained, why = False, "final_flush_timeout passed"
        stats = await self._outbox.stats()
        left = stats.entries + stats.outbox_entries
        why = why or self._why_kept() if left else ""
        log.info("final flush", extra={"drained": drained, "left_buffered": left, "why": why})

    def _why_kept(self) -> str:
        if self._blocked:
            return f"upstream refused the key of {', '.join(sorted(self._blocked))}"
        if self._warned_no_key:
            return f"no upstream key for {', '.join(sorted(self._warned_no_key))}"
        return "upstream unavailable" if self._failures else "upstream did not take it all"

    async def _run(self) -> None:
        while not self._stop.is_set():
            delay = max(self._interval, self._retry_at - time.monotonic())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), delay)
                return
            try:
                await self.flush()
            except Exception:  # a storage error must not end the loop: retry next interval
                log.exception("flush failed")

    async def flush(self) -> bool:
        """Send what is waiting, then what the buffer holds now; False if something had to
        wait. Counts arriving during the flush wait for the next one (so upstream traffic
        does not grow with SDK traffic), unless a backlog larger than one claim remains."""
        if time.monotonic() < self._retry_at:
            return False
        await self._gather()
        await self._warn_keyless()
        claim = True
        while True:
            active = self._active_environments()
            batches = await self._outbox.pending(active, PENDING_PAGE)
            if batches:
                for batch in batches:
                    # an environment refused mid-page waits; the others go on
                    blocked = batch.environment not in self._active_environments()
                    if not blocked and not await self._send(batch):
                        return False
                continue
            if not claim or not active:
                return not self._blocked
            claim = await self._outbox.claim(active, CLAIM_ENTRIES)

    def _active_environments(self) -> set[str]:
        now = time.monotonic()
        for env, until in list(self._blocked.items()):
            if until <= now:
                del self._blocked[env]
        return set(self._keys) - set(self._blocked)

    async def _send(self, batch: OutboxBatch) -> bool:
        """Send one batch and act on the outcome; False stops this flush (upstream failing)."""
        key = self._keys[batch.environment]
        result = await self._upstream.send_bulk(key, batch.body, batch.idempotency_key)
        FLUSHES.labels(result.outcome.value).inc()
        self.last_result = (time.time(), result)
        match result.outcome:
            case Outcome.OK:
                await self._outbox.ack(batch)
                if self._failures:
                    log.info("upstream recovered", extra={"failures": self._failures})
                self._failures = 0
            case Outcome.TOO_LARGE:
                if not await self._outbox.split(batch):
                    await self._dead_letter(batch, result)
            case Outcome.REJECTED:
                await self._dead_letter(batch, result)
            case Outcome.MISCONFIGURED:
                await self._outbox.record_failure(batch, result.detail)
                self._blocked[batch.environment] = time.monotonic() + self._backoff_max
                log.error(
                    "upstream refused the key or redirected: check RELAY_UPSTREAM_TOKENS"
                    " and RELAY_UPSTREAM_URL; batches are kept",
                    extra={
                        "environment": batch.environment,
                        "status": result.status,
                        "retry_in": self._backoff_max,
                    },
                )
            case Outcome.RETRY:
                await self._outbox.record_failure(batch, result.detail)
                self._back_off(result)
                return False
        return True

    def _back_off(self, result: SendResult) -> None:
        self._failures += 1
        delay = min(self._backoff_max, self._interval * 2 ** min(self._failures, 30))
        delay = delay * random.uniform(0.5, 1.0)
        if result.retry_after is not None:
            delay = min(self._backoff_max, max(delay, result.retry_after))
        self._retry_at = time.monotonic() + delay
        log.warning(
            "upstream unavailable, backing off",
            extra={
                "status": result.status,
                "detail": result.detail[:200],
                "retry_in": round(delay, 3),
                "failures": self._failures,
            },
        )

    async def _dead_letter(self, batch: OutboxBatch, result: SendResult) -> None:
        await self._outbox.dead_letter(batch, result.status, result.detail)
        DEAD_LETTERED.inc(batch.entries)
        log.error(
            "upstream refused a batch; kept in dead_letters",
            extra={
                "environment": batch.environment,
                "status": result.status,
                "entries": batch.entries,
                "reason": result.detail[:200],
            },
        )

    async def _warn_keyless(self) -> None:
        missing = await self._outbox.environments() - set(self._keys) - self._warned_no_key
        for env in sorted(missing):
            log.error(
                "no upstream key for this environment: its counts stay buffered;"
                " add a key to RELAY_UPSTREAM_TOKENS",
                extra={"environment": env},
            )
        self._warned_no_key |= missing
