"""The relay's send loop: claim buffered counts into batches, send them, record the outcome.

Outcomes (``relay.edge.upstream.Outcome``) decide everything:
- ok: the batch leaves the outbox;
- too_large (413) or rejected (other 4xx): the upstream applied none of it, so it is split
  in halves (new keys) and each retried, until the entries refused on their own are left:
  each goes to ``dead_letters`` with the status and reason, and is counted;
- misconfigured (401/403/404, or a redirect): the environment's key or the URL is wrong; its
  batches stay and that environment waits ``backoff_max`` before trying again;
- retry (429, 5xx, timeout, connection error): the batch stays, with its key; the loop waits
  with exponential backoff and jitter, capped at ``backoff_max``, or as long as
  ``Retry-After`` says.

No batch can hold the others back. Batches are tried fewest attempts first, so one that
failed waits behind the rest. A batch that fails right after the upstream accepted another
(a failure of its own, not of the upstream's) is skipped for the rest of the flush, and
after ``STRIKES`` such failures set aside whole in ``dead_letters``, with its key, counted
and logged. It is never split: a 5xx or a timeout does not say the upstream applied
nothing (a commit whose answer was lost), and halves under new keys would
then count twice; resent under its own key, an applied batch is answered 202 and leaves.

An upstream that refuses everything (a 4xx for ``REFUSALS`` batches in a row, none
accepted between) is not bisected entry by entry, two requests an entry: the flush stops,
its batches are kept, and it waits ``backoff_max``, with an error in the log. Bisecting a
batch for one bad entry never refuses more than two in a row.

While the upstream is failing, new counts keep aggregating in the buffer rather than piling
up as batches: new batches are cut when no batch waits that has not been tried yet, and
while the upstream has not accepted anything since its last failure, only a small probe
(``PROBE_ENTRIES``), which shows whether it is back or only refuses some batches.

A claim that the disk cannot hold (full) is retried at once in halves, down to one entry,
and the size that fitted is where the next claim starts: a full buffer drains in steps that
fit. A claim that fails even so does not stop the batches already waiting from being sent:
their acknowledgements free pages, a claim needs some. Any other storage failure makes the
loop back off: exponentially from ``interval``, capped at ``backoff_max``, without jitter
(nothing else competes for the disk), counted apart from the upstream's failures (a batch
the upstream accepts does not make a disk that refuses its acknowledgement any better). The
first failure is logged as a warning, the next ones at debug, and the recovery once.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Collection

from aiohttp import web
from prometheus_client import Counter

from relay.core.errors import DiskFull, StorageError
from relay.edge.metrics.keys import UpstreamKeys
from relay.edge.upstream import Outcome, SendResult, UpstreamClient
from relay.store.buffer_space import BufferSpace
from relay.store.outbox import CLAIM_ENTRIES, PENDING_PAGE, Outbox, OutboxBatch

log = logging.getLogger(__name__)

FLUSHES = Counter("relay_flush_batches_total", "Batches sent upstream, by outcome", ["outcome"])
DEAD_LETTERED = Counter(
    "relay_dead_lettered_entries_total",
    "Entries the upstream refused for good, by reason (too_large, rejected, failing)",
    ["reason"],
)

# Failures of one batch, each right after the upstream accepted another, before it is set
# aside: random 5xx at a rate p set an innocent batch aside with probability p^10.
STRIKES = 10
REFUSALS = 32
PROBE_ENTRIES = 100


class _Sent(enum.Enum):
    ACCEPTED = enum.auto()
    REFUSED = enum.auto()  # 4xx: split, or dead-lettered
    SETTLED = enum.auto()  # set aside, or its environment blocked
    FAILED_ALONE = enum.auto()  # failed right after an accepted batch: skipped this flush
    STOP = enum.auto()  # the upstream is failing: back off


class Flusher:
    def __init__(
        self,
        outbox: Outbox,
        upstream: UpstreamClient,
        keys: UpstreamKeys,
        interval: float,
        backoff_max: float,
        final_timeout: float,
        on_disk_full: Callable[[], Awaitable[bool]],
        space: BufferSpace,
        most_claimed: int = CLAIM_ENTRIES,
    ) -> None:
        """``on_disk_full`` hands back the space set aside for draining
        (``relay.store.reserve``); True if there was some. ``keys`` chooses each
        environment's key before each flush. ``space`` tells what stayed buffered after the
        final flush (``final_timeout`` seconds at most). ``most_claimed``: entries one claim
        moves at most (``claim_entries``)."""
        self._outbox = outbox
        self._space = space
        self._on_disk_full = on_disk_full
        self._upstream = upstream
        self._book = keys
        self._keys: dict[str, str] = {}  # environment -> key, this flush
        self._interval = interval
        self._backoff_max = backoff_max
        self._final_timeout = final_timeout
        self._failures = 0
        self._storage_failures = 0
        self._retry_at = 0.0
        self._healthy = True  # the upstream accepted the last batch it answered
        self._most_claimed = most_claimed
        self._claim_size = most_claimed
        self._strikes: dict[int, int] = {}
        self._blocked: dict[str, float] = {}
        self._task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()
        self.last_result: tuple[float, SendResult] | None = None  # (when, what): for reports

    @property
    def waiting(self) -> frozenset[str]:
        return self._book.waiting

    async def flushing(self, app: web.Application) -> AsyncIterator[None]:
        """The leader's flushes while the application serves, and a final one as it stops."""
        self._task = asyncio.create_task(self._run(), name="flusher")
        yield
        await self.stop(self._final_timeout)

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
        stats = await self._space.stats()
        left = stats.entries + stats.outbox_entries
        why = why or self._why_kept() if left else ""
        log.info("final flush", extra={"drained": drained, "left_buffered": left, "why": why})

    def _why_kept(self) -> str:
        if self._storage_failures:
            return "buffer storage failed (disk full?)"
        if self._blocked:
            return f"upstream refused the key of {', '.join(sorted(self._blocked))}"
        if self._book.waiting:
            return f"no upstream key for {', '.join(sorted(self._book.waiting))}"
        return "upstream unavailable" if self._failures else "upstream did not take it all"

    async def _run(self) -> None:
        while not self._stop.is_set():
            delay = max(self._interval, self._retry_at - time.monotonic())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), delay)
                return
            try:
                await self.flush()
            except Exception:  # a bug must not end the loop: retry after a backoff
                log.exception("flush failed")
                self._back_off("flush failed", None, None)

    async def flush(self) -> bool:
        """Send what is waiting, then what the buffer holds now; False if something had to
        wait. Counts arriving during the flush wait for the next one (so upstream traffic
        does not grow with SDK traffic), unless a backlog larger than one claim remains."""
        if time.monotonic() < self._retry_at:
            return False
        try:
            drained = await self._flush()
        except StorageError as exc:  # a full disk, most likely: never a tight retry loop
            if isinstance(exc, DiskFull):
                await self._on_disk_full()
            self._storage_failed(exc)
            return False
        if self._storage_failures:
            log.info("buffer storage works again", extra={"failures": self._storage_failures})
            self._storage_failures = 0
        return drained

    def _storage_failed(self, exc: StorageError) -> None:
        """Back off (see the module's docstring); a warning for the first failure only."""
        self._storage_failures += 1
        exponent = min(self._storage_failures, 30)
        delay = min(self._backoff_max, self._interval * 2**exponent)
        self._retry_at = time.monotonic() + delay
        log.log(
            logging.WARNING if self._storage_failures == 1 else logging.DEBUG,
            "buffer storage failed, backing off",
            extra={
                "detail": str(exc)[:200],
                "retry_in": round(delay, 3),
                "failures": self._storage_failures,
            },
        )

    async def _flush(self) -> bool:
        self._keys = self._book.choose(await self._outbox.environments())
        skipped: set[int] = set()
        may_claim, probing = True, False
        accepted = False  # the upstream accepted the batch sent last
        refused = 0  # batches refused in a row
        unclaimed: StorageError | None = None  # a claim the disk could not hold
        while True:
            active = self._active_environments()
            waiting = await self._outbox.pending(active, PENDING_PAGE + len(skipped))
            page = [batch for batch in waiting if batch.id not in skipped]
            if may_claim and active and (not page or page[0].attempts > 0):
                probing = not self._healthy  # then claim more once the probe is accepted
                try:
                    may_claim = await self._claim(active) and not probing
                except StorageError as exc:
                    if not page:
                        raise
                    may_claim, unclaimed = False, exc  # send what waits, then back off
                continue
            if not page:
                if unclaimed is not None:
                    raise unclaimed
                return not self._blocked
            for batch in page:
                # an environment refused mid-page waits; the others go on
                if batch.environment not in self._active_environments():
                    continue
                async with self._outbox.sending(batch) as there:  # else it was evicted
                    sent = await self._send(batch, accepted) if there else _Sent.SETTLED
                match sent:
                    case _Sent.ACCEPTED:
                        accepted, refused = True, 0
                        may_claim, probing = may_claim or probing, False
                    case _Sent.FAILED_ALONE:
                        skipped.add(batch.id)
                        accepted = False
                    case _Sent.REFUSED:
                        refused += 1
                        if refused >= REFUSALS:
                            return self._refuses_everything()
                    case _Sent.SETTLED:
                        pass
                    case _Sent.STOP:
                        return False

    async def _claim(self, environments: Collection[str]) -> bool:
        """Cut batches, as large as the disk allows (see the module's docstring); True when
        a backlog is left in the buffer."""
        size = self._claim_size if self._healthy else min(PROBE_ENTRIES, self._claim_size)
        while True:
            try:
                backlog = await self._outbox.claim(environments, size)
            except StorageError as exc:
                if isinstance(exc, DiskFull) and await self._on_disk_full():
                    continue  # room was handed back: the same size again
                if size == 1:
                    raise
                size = self._claim_size = max(1, size // 2)
                continue
            if self._healthy:
                self._claim_size = min(self._most_claimed, size * 2)
            return backlog

    def _active_environments(self) -> set[str]:
        now = time.monotonic()
        for env, until in list(self._blocked.items()):
            if until <= now:
                del self._blocked[env]
        return set(self._keys) - set(self._blocked)

    async def _send(self, batch: OutboxBatch, after_accepted: bool) -> _Sent:
        """Send one batch and act on the outcome; ``after_accepted``: the batch sent just
        before was accepted (the upstream works)."""
        key = self._keys[batch.environment]
        result = await self._upstream.send_bulk(key, batch.body, batch.idempotency_key)
        FLUSHES.labels(result.outcome.value).inc()
        self.last_result = (time.time(), result)
        match result.outcome:
            case Outcome.OK:
                await self._outbox.ack(batch)
                self._strikes.pop(batch.id, None)
                if self._failures:
                    log.info("upstream recovered", extra={"failures": self._failures})
                self._failures = 0
                self._healthy = True
                return _Sent.ACCEPTED
            case Outcome.TOO_LARGE | Outcome.REJECTED:
                await self._refused(batch, result, result.outcome.value)
                return _Sent.REFUSED
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
                return _Sent.SETTLED
            case Outcome.RETRY:
                await self._outbox.record_failure(batch, result.detail)
                if after_accepted and result.status != 429:
                    return await self._failed_alone(batch, result)
                self._healthy = False
                self._back_off(
                    "upstream unavailable, backing off",
                    result.status,
                    result.retry_after,
                    result.detail,
                )
                return _Sent.STOP

    def _refuses_everything(self) -> bool:
        self._retry_at = time.monotonic() + self._backoff_max
        log.error(
            "upstream refused every batch it was sent: pausing, batches are kept; check what"
            " it answers (relay_flush_batches_total, the upstream's log)",
            extra={"batches": REFUSALS, "retry_in": self._backoff_max},
        )
        return False

    async def _failed_alone(self, batch: OutboxBatch, result: SendResult) -> _Sent:
        """The upstream works but failed this batch: skip it for this flush; set it aside once
        it has failed so ``STRIKES`` times (see the module's docstring)."""
        strikes = self._strikes[batch.id] = self._strikes.get(batch.id, 0) + 1
        log.warning(
            "upstream failed one batch while accepting others",
            extra={
                "environment": batch.environment,
                "status": result.status,
                "entries": batch.entries,
                "strikes": strikes,
            },
        )
        if strikes < STRIKES:
            return _Sent.FAILED_ALONE
        detail = f"failed {strikes} times while the upstream accepted other batches"
        await self._dead_letter(batch, result.status, f"{detail}: {result.detail}", "failing")
        return _Sent.SETTLED

    async def _refused(self, batch: OutboxBatch, result: SendResult, reason: str) -> None:
        """Split a batch the upstream refused (and so applied none of), or dead-letter it
        when it is a single entry."""
        if not await self._outbox.split(batch):
            await self._dead_letter(batch, result.status, result.detail, reason)

    async def _dead_letter(
        self, batch: OutboxBatch, status: int | None, detail: str, reason: str
    ) -> None:
        self._strikes.pop(batch.id, None)
        await self._outbox.dead_letter(batch, status, detail)
        DEAD_LETTERED.labels(reason).inc(batch.entries)
        log.error(
            "upstream refused entries for good; kept in dead_letters",
            extra={
                "environment": batch.environment,
                "status": status,
                "entries": batch.entries,
                "reason": reason,
                "detail": detail[:200],
            },
        )

    def _back_off(
        self, message: str, status: int | None, retry_after: float | None, detail: str = ""
    ) -> None:
        self._failures += 1
        delay = min(self._backoff_max, self._interval * 2 ** min(self._failures, 30))
        delay = delay * random.uniform(0.5, 1.0)
        if retry_after is not None:
            delay = min(self._backoff_max, max(delay, retry_after))
        self._retry_at = time.monotonic() + delay
        log.warning(
            message,
            extra={
                "status": status,
                "detail": detail[:200],
                "retry_in": round(delay, 3),
                "failures": self._failures,
            },
        )
