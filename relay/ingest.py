"""The one ingest path: parsed body -> aggregated domain batch -> a sink.

Standalone mode's sink is the central store; relay mode's is the local buffer. Handlers of
both modes call this and nothing else, so validation, environment filtering and counting
of accepted/dropped entries cannot differ between them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Protocol

from prometheus_client import Counter

from relay import aggregate, models
from relay.aggregate import Conversion
from relay.domain import Hop, IngestBatch
from relay.errors import BadDataError
from relay.models import ErrorDetail

ENTRIES = Counter("relay_metric_entries_total", "Metric entries received, by outcome", ["outcome"])
REGISTRATIONS = Counter("relay_registrations_total", "Application registrations accepted")
REPLAYS = Counter(
    "relay_idempotent_replays_total", "Requests answered from an already-seen Idempotency-Key"
)


class MetricsSink(Protocol):
    async def write(self, batch: IngestBatch, idempotency_key: str | None) -> bool:
        """Durably store the batch before returning; False if it was an idempotent replay."""
        ...


@contextmanager
def _invalid_as_400() -> Iterator[None]:
    try:
        yield
    except aggregate.InvalidEntry as exc:
        detail = ErrorDetail(path=exc.path, message=f"The `{exc.path}` property {exc.message}")
        raise BadDataError(f"Request validation failed: {detail.message}", [detail]) from None


def _utcnow() -> datetime:
    return datetime.now(UTC)


class Ingest:
    """``hop`` is set in relay mode: this relay's entry for each registration's connectVia."""

    def __init__(
        self, sink: MetricsSink, hop: Hop | None = None, clock: Callable[[], datetime] = _utcnow
    ) -> None:
        self._sink = sink
        self._hop = hop
        self._clock = clock

    async def bulk(
        self, body: models.BulkMetrics, environment: str, idempotency_key: str | None
    ) -> None:
        with _invalid_as_400():
            conversion = aggregate.from_bulk(body, environment, self._clock(), self._hop)
        await self._write(conversion, idempotency_key)

    async def client_metrics(
        self, body: models.ClientMetrics, environment: str, idempotency_key: str | None
    ) -> None:
        with _invalid_as_400():
            conversion = aggregate.from_client_metrics(body, environment, self._clock())
        await self._write(conversion, idempotency_key)

    async def register(
        self, body: models.ClientRegistration, environment: str, idempotency_key: str | None
    ) -> None:
        with _invalid_as_400():
            conversion = aggregate.from_client_registration(
                body, environment, self._clock(), self._hop
            )
        await self._write(conversion, idempotency_key)

    async def _write(self, conversion: Conversion, idempotency_key: str | None) -> None:
        applied = await self._sink.write(conversion.batch, idempotency_key)
        if not applied:
            REPLAYS.inc()
            return
        ENTRIES.labels("accepted").inc(conversion.accepted)
        for reason, count in conversion.dropped.items():
            ENTRIES.labels(f"dropped_{reason}").inc(count)
        REGISTRATIONS.inc(len(conversion.batch.registrations))
