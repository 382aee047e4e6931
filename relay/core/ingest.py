"""The one ingest path: parsed body -> aggregated domain batch -> a sink.

The central service's sink is its store; the relay's is its local buffer. Handlers of both
modes call this and nothing else, so validation, environment filtering and counting of
accepted/dropped entries cannot differ between them.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Protocol

from prometheus_client import Counter

from relay.core import convert
from relay.core.convert import Conversion
from relay.core.domain import Hop, IdempotencyKey, IngestBatch
from relay.wire.client import BulkMetrics, ClientMetrics, ClientRegistration

ENTRIES = Counter("relay_metric_entries_total", "Metric entries received, by outcome", ["outcome"])
REGISTRATIONS = Counter("relay_registrations_total", "Application registrations accepted")
REPLAYS = Counter(
    "relay_idempotent_replays_total", "Requests answered from an already-seen Idempotency-Key"
)
IMPACT_DROPPED = Counter(
    "relay_impact_metrics_dropped_total",
    "Impact metrics received (impactMetrics) and not kept: not carried yet (README)",
)


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
        self, body: BulkMetrics, environment: str, idempotency_key: IdempotencyKey | None
    ) -> None:
        conversion = convert.from_bulk(body, environment, datetime.now(UTC), self._hop)
        await self._write(conversion, idempotency_key)
        _drop_impact(body.impactMetrics)

    async def client_metrics(
        self, body: ClientMetrics, environment: str, idempotency_key: IdempotencyKey | None
    ) -> None:
        conversion = convert.from_client_metrics(body, environment, datetime.now(UTC))
        await self._write(conversion, idempotency_key)
        _drop_impact(body.impactMetrics)

    async def register(
        self, body: ClientRegistration, environment: str, idempotency_key: IdempotencyKey | None
    ) -> None:
        conversion = convert.from_client_registration(
            body, environment, datetime.now(UTC), self._hop
        )
        await self._write(conversion, idempotency_key)

    async def _write(self, conversion: Conversion, idempotency_key: IdempotencyKey | None) -> None:
        applied = await self._sink.write(conversion.batch, idempotency_key)
        if not applied:
            REPLAYS.inc()
            return
        ENTRIES.labels("accepted").inc(conversion.accepted)
        for reason, count in conversion.dropped.items():
            ENTRIES.labels(f"dropped_{reason}").inc(count)
        REGISTRATIONS.inc(len(conversion.batch.registrations))


def _drop_impact(impact: object) -> None:
    """Impact metrics are not kept yet (README, "Flags at a relay"): counted, so what is lost
    shows."""
    if impact is not None:
        IMPACT_DROPPED.inc(len(impact) if isinstance(impact, list) else 1)
