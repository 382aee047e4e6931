"""The one ingest path: parsed body -> aggregated domain batch -> a sink.

The central service's sink is its store; the relay's is its local buffer. Handlers of both
modes call this and nothing else, so validation, environment filtering and counting of
accepted/dropped entries cannot differ between them.
"""

from __future__ import annotations

import hashlib
import logging
import time
from datetime import UTC, datetime
from typing import Protocol

from prometheus_client import Counter

from relay.core import convert
from relay.core.convert import Conversion
from relay.core.ingest_batch import (
    Counts,
    Hop,
    IdempotencyKey,
    IngestBatch,
    MetricKey,
    Origin,
    owner_of,
)
from relay.wire.client import BulkMetrics, ClientMetrics, ClientRegistration

log = logging.getLogger(__name__)

ENTRIES = Counter("relay_metric_entries_total", "Metric entries received, by outcome", ["outcome"])
REGISTRATIONS = Counter("relay_registrations_total", "Application registrations accepted")
REPLAYS = Counter(
    "relay_idempotent_replays_total", "Requests answered from an already-seen Idempotency-Key"
)
IMPACT_SAMPLES = Counter(
    "relay_impact_samples_total", "Impact metric samples (impactMetrics) accepted and kept"
)
IMPACT_INVALID = Counter(
    "relay_impact_metrics_invalid_total",
    "Bodies whose impactMetrics list was invalid and dropped (the rest of the body is kept),"
    " by the first fault's pydantic error type",
    ["reason"],
)
OFREP = Origin(owner_of(hashlib.sha256(b"ofrep").hexdigest()), browser=True)
"""The owner of OFREP's evaluation counts: all keys' together, as the tally sums them."""
LOG_EVERY = 1.0  # seconds: invalid impact metrics are logged at most this often


class MetricsSink(Protocol):
    async def write(self, batch: IngestBatch, idempotency_key: IdempotencyKey | None) -> bool:
        """Durably store the batch before returning; False if it was an idempotent replay.
        Raises ``KeyReused`` for a key the caller used for a different request."""
        ...


class Ingest:
    """``hop`` is set in relay mode: this relay's entry for each registration's connectVia.
    Entries the domain cannot take raise ``InvalidInput`` before anything is written."""

    def __init__(self, sink: MetricsSink, hop: Hop | None = None) -> None:
        self._sink = sink
        self._hop = hop

    async def bulk(
        self,
        body: BulkMetrics,
        environment: str,
        idempotency_key: IdempotencyKey | None,
        origin: Origin,
    ) -> None:
        """``origin``: the key that sent it (``Origin``)."""
        conversion = convert.from_bulk(body, environment, datetime.now(UTC), self._hop)
        await self._write(conversion, idempotency_key, origin)

    async def client_metrics(
        self,
        body: ClientMetrics,
        environment: str,
        idempotency_key: IdempotencyKey | None,
        origin: Origin,
    ) -> None:
        conversion = convert.from_client_metrics(body, environment, datetime.now(UTC))
        await self._write(conversion, idempotency_key, origin)

    async def register(
        self, body: ClientRegistration, environment: str, idempotency_key: IdempotencyKey | None
    ) -> None:
        conversion = convert.from_client_registration(
            body, environment, datetime.now(UTC), self._hop
        )
        await self._write(conversion, idempotency_key)

    async def evaluated(self, counts: dict[MetricKey, Counts]) -> None:
        """Counts of evaluations the service made itself (OFREP's, ``relay.core.ofrep.Tally``),
        aggregated and named as an SDK's are: written to the same sink, as one public key's
        (no caller was answered 202 for them, and anyone with a frontend key makes them)."""
        batch = IngestBatch(counts=counts)
        await self._write(Conversion(batch, accepted=len(counts)), None, OFREP)

    async def _write(
        self,
        conversion: Conversion,
        idempotency_key: IdempotencyKey | None,
        origin: Origin | None = None,
    ) -> None:
        if origin is not None:
            conversion.batch.origin = origin
        applied = await self._sink.write(conversion.batch, idempotency_key)
        if not applied:
            REPLAYS.inc()
            return
        ENTRIES.labels("accepted").inc(conversion.accepted)
        for reason, count in conversion.dropped.items():
            ENTRIES.labels(f"dropped_{reason}").inc(count)
        REGISTRATIONS.inc(len(conversion.batch.registrations))
        IMPACT_SAMPLES.inc(conversion.impact_samples)
        if conversion.impact_invalid is not None:
            _invalid_impact(*conversion.impact_invalid)


_last_logged = 0.0


def _invalid_impact(reason: str, where: str) -> None:
    """Counted always, logged at most every ``LOG_EVERY`` seconds: a fleet of SDKs sending
    the same bad list must not flood the log."""
    global _last_logged
    IMPACT_INVALID.labels(reason).inc()
    now = time.monotonic()
    if now - _last_logged >= LOG_EVERY:
        _last_logged = now
        log.warning(
            "invalid impactMetrics dropped; the rest of the body was kept",
            extra={"reason": reason, "path": where},
        )
