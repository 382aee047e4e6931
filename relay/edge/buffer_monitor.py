"""Keeps the relay's buffer observable and bounded.

When the buffer file grows past ``buffer_max_bytes`` (an upstream down for a long time), the
oldest hour windows are evicted, counted and logged: the relay keeps answering SDKs and
keeps the newest counts, rather than filling the disk or refusing traffic.
"""

from __future__ import annotations

import logging
import time
from typing import Final

from prometheus_client import Counter, Gauge

from relay.edge.outbox import BufferStats, SqliteOutbox

log = logging.getLogger(__name__)

# Set by the leader worker only (``relay.process.server``); the others report 0, hence "livemax".
_ONE: Final = "livemax"
BUFFERED_ENTRIES = Gauge(
    "relay_buffer_entries",
    "Counts waiting in the buffer (not yet batched)",
    multiprocess_mode=_ONE,
)
BUFFERED_REGISTRATIONS = Gauge(
    "relay_buffer_registrations", "Registrations waiting in the buffer", multiprocess_mode=_ONE
)
BUFFER_BYTES = Gauge(
    "relay_buffer_bytes", "Bytes of the buffer database file in use", multiprocess_mode=_ONE
)
OUTBOX_BATCHES = Gauge(
    "relay_outbox_batches", "Batches waiting to be accepted upstream", multiprocess_mode=_ONE
)
OUTBOX_ENTRIES = Gauge(
    "relay_outbox_entries", "Entries in batches waiting upstream", multiprocess_mode=_ONE
)
OLDEST_AGE = Gauge(
    "relay_buffer_oldest_entry_age_seconds",
    "Age of the oldest unflushed hour window",
    multiprocess_mode=_ONE,
)
EVICTED = Counter("relay_evicted_entries_total", "Buffered entries dropped to bound the buffer")


class BufferMonitor:
    def __init__(self, outbox: SqliteOutbox, max_bytes: int) -> None:
        self._outbox = outbox
        self._max_bytes = max_bytes

    async def check(self) -> None:
        """Runs every few seconds. The estimate of the data held scans every buffered row, so
        it is computed only once the file itself (a cheap upper bound) has passed the cap."""
        if await self._outbox.file_bytes() > self._max_bytes:
            await self._evict()
        self._publish(await self._outbox.stats())

    async def _evict(self) -> None:
        while await self._outbox.used_bytes() > self._max_bytes:
            evicted = await self._outbox.evict_oldest()
            if evicted == 0:
                break
            EVICTED.inc(evicted)
            log.warning(
                "buffer full: evicted the oldest counts",
                extra={"entries": evicted, "max_bytes": self._max_bytes},
            )

    def _publish(self, stats: BufferStats) -> None:
        BUFFERED_ENTRIES.set(stats.entries)
        BUFFERED_REGISTRATIONS.set(stats.registrations)
        BUFFER_BYTES.set(stats.bytes)
        OUTBOX_BATCHES.set(stats.outbox_batches)
        OUTBOX_ENTRIES.set(stats.outbox_entries)
        oldest = 0.0 if stats.oldest_hour is None else max(0.0, time.time() - stats.oldest_hour)
        OLDEST_AGE.set(oldest)
