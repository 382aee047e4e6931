"""The relay reports itself upstream, about once a ``report_interval`` (60 s), at
``POST {upstream}/api/client/metrics/edge`` with one of its upstream keys, as Unleash Edge
does: who it is, its upstream latency, its buffer, outbox and dead letters, its last flush,
and the latest reports of the relays downstream of it (``connectedEdges``, as many as fit
``MAX_REPORT_BYTES``), which it takes at the same path and keeps in ``cache.db``, under
the scope of the key that posted each (``REPORT_BOUNDS``).

An upstream that refuses the path (404 or 405: a real open-source Unleash has no such
endpoint; 401/403) is logged once and asked again only every ``REFUSED_RETRY``; any other
failure is retried at the next interval, logged at debug. Reports never touch the flush:
they go through the pass-through's connections, not the flusher's.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from importlib.metadata import version

from aiohttp import web

from relay.api.auth import PRINCIPAL
from relay.api.body import read_kept
from relay.api.client import client_route
from relay.core.edges import STALE_AFTER, ReportedEdge, ReportScope, flatten
from relay.core.ingest_batch import Hop, from_epoch
from relay.edge.metrics.flusher import Flusher
from relay.edge.state import EDGE_REPORTS
from relay.edge.upstream import UPSTREAM_LATENCY, UpstreamClient, UpstreamUnavailable
from relay.store.buffer_space import BufferSpace
from relay.store.edge_reports import EdgeReportStore, ReportBounds
from relay.wire.common import MAX_LIST
from relay.wire.edges import (
    MAX_DEPTH,
    MAX_REPORT_BYTES,
    MAX_REPORTED,
    REPORT_PATH,
    EdgeInstanceData,
    LastFlush,
    LatencyMetrics,
    UpstreamLatency,
)

log = logging.getLogger(__name__)

REFUSED_RETRY = 3600.0
SHOWN_FOR = 5.0
"""Seconds the backstage's ``instancedata`` answers the same report (it reads the buffer)."""
REPORT_BOUNDS = ReportBounds(per_scope=50, total=200, direct_for=STALE_AFTER * 60.0)
"""Downstream relays' reports kept, of at most ``MAX_REPORT_BYTES`` each: 12.5 MiB at most;
a relay's own report outranks one carried for it for three default report intervals."""
_LATENCY = {"features": "features", "metrics": "bulk", "edge": "edge_report"}
"""``latencyUpstream`` field -> the operation ``UPSTREAM_LATENCY`` times."""

Buckets = dict[str, tuple[float, float, list[tuple[float, float]]]]
"""operation -> (count, sum, cumulative buckets (upper bound, count)) since the start."""


class Reporter:
    def __init__(
        self,
        hop: Hop,
        upstream: UpstreamClient,
        keys: Mapping[str, str],
        space: BufferSpace,
        downstream: EdgeReportStore,
        flusher: Flusher,
        vouched: Callable[[], str | None],
        interval: float,
    ) -> None:
        """``vouched``: without an upstream key, an SDK key the upstream vouched for
        (``relay.edge.metrics.keys.Lending.any``), as counts are sent with."""
        self._hop = hop
        self._upstream = upstream
        self._key = next((keys[env] for env in sorted(keys)), None)
        self._space = space
        self._downstream = downstream
        self._flusher = flusher
        self._vouched = vouched
        self._interval = interval
        self._started = datetime.now(UTC)
        self._next = 0.0
        self._refused = False
        self._latency_before: Buckets = {}
        self._latency_last: dict[str, LatencyMetrics] = {}
        self._shown: tuple[float, EdgeInstanceData] | None = None
        self._showing = asyncio.Lock()

    async def tick(self) -> None:
        """One report, unless the upstream refused the path less than an hour ago."""
        key = self._key or self._vouched()
        if key is None or time.monotonic() < self._next:
            return
        body = (await self.report()).model_dump_json(exclude_none=True).encode()
        headers = {"Authorization": key, "Content-Type": "application/json"}
        try:
            answer = await self._upstream.forward("POST", REPORT_PATH, headers, body, "edge_report")
        except UpstreamUnavailable as exc:
            log.debug("relay report not sent", extra={"error": str(exc)})
            return
        if answer.status in (401, 403, 404, 405):
            self._next = time.monotonic() + REFUSED_RETRY
            if not self._refused:
                log.warning(
                    "the upstream does not take relay reports (an open-source Unleash has no"
                    f" {REPORT_PATH}): asking again hourly; flushing is not affected",
                    extra={"status": answer.status},
                )
            self._refused = True
        elif answer.status < 300:
            self._refused = False
        else:
            log.debug("relay report refused", extra={"status": answer.status})
        await self._downstream.prune(time.time() - STALE_AFTER * self._interval)

    async def shown(self) -> EdgeInstanceData:
        """The report as the backstage shows it (``instancedata``, no key needed): made at
        most every ``SHOWN_FOR`` seconds whoever asks, since it reads the whole buffer, and
        without moving the window the next report's upstream latency covers."""
        async with self._showing:
            if self._shown is None or time.monotonic() >= self._shown[0] + SHOWN_FOR:
                self._shown = (time.monotonic(), await self.report(advance=False))
            return self._shown[1]

    async def report(self, advance: bool = True) -> EdgeInstanceData:
        """This relay's report; ``advance`` (the report sent upstream) starts the next
        window of upstream latency."""
        stats = await self._space.stats()
        written = await self._space.oldest_write()
        last = self._flusher.last_result
        now = time.time()
        mine = EdgeInstanceData(
            identifier=self._hop.instance_id,
            appName=self._hop.app_name,
            edgeVersion=version("relay"),
            started=self._started,
            latencyUpstream=self._latency(advance),
            bufferedEntries=stats.entries,
            oldestBufferedAgeSeconds=0.0 if written is None else max(0.0, now - written),
            outboxBatches=stats.outbox_batches,
            deadLetters=stats.dead_letter_entries,
            countsWaitingForKey=sorted(self._flusher.waiting) or None,
            lastFlush=(
                None
                if last is None
                else LastFlush(
                    at=from_epoch(last[0]), outcome=last[1].outcome.value, status=last[1].status
                )
            ),
        )
        room = MAX_REPORT_BYTES - len(mine.model_dump_json().encode())
        return mine.model_copy(update={"connectedEdges": await self._connected(now, room)})

    async def _connected(self, now: float, room: int) -> list[EdgeInstanceData]:
        """The latest report of each relay downstream, newest first, as many as one report
        may carry (relays, ``room`` bytes, one level less deep than ``MAX_DEPTH``): one
        that does not fit is left out, never a reason to leave out the others."""
        below: list[EdgeInstanceData] = []
        carried = 1
        for stored in await self._downstream.latest(now - STALE_AFTER * self._interval):
            if len(below) == MAX_LIST:
                break
            size = len(flatten(stored.report))
            taken = len(stored.report.model_dump_json().encode()) + 1  # and a comma
            if carried + size > MAX_REPORTED or taken > room or stored.report.depth >= MAX_DEPTH:
                continue
            below.append(stored.report)
            carried, room = carried + size, room - taken
        return below

    def _latency(self, advance: bool) -> UpstreamLatency:
        """Per kind of call, the calls made since the last report (or, if none, those of
        the last report that had some): milliseconds on average and at the 99th percentile
        (the upper bound of its histogram bucket)."""
        now = _buckets()
        fields: dict[str, LatencyMetrics] = {}
        for name, operation in _LATENCY.items():
            count, total, buckets = now.get(operation, (0.0, 0.0, []))
            count0, total0, buckets0 = self._latency_before.get(operation, (0.0, 0.0, []))
            calls = count - count0
            if calls <= 0:  # none since the last report: the last figures known stand
                if name in self._latency_last:
                    fields[name] = self._latency_last[name]
                continue
            before = dict(buckets0)
            p99 = next(
                (le for le, n in buckets if n - before.get(le, 0.0) >= 0.99 * calls),
                float("inf"),
            )
            fields[name] = LatencyMetrics(
                avg=round((total - total0) / calls * 1000, 3),
                count=calls,
                p99=round(min(p99, 3600.0) * 1000, 3),
            )
        if advance:
            self._latency_before, self._latency_last = now, fields
        return UpstreamLatency(**fields)


def _buckets() -> Buckets:
    """``UPSTREAM_LATENCY`` summed over outcomes, per operation, as of now."""
    found: dict[str, tuple[float, float, dict[float, float]]] = {}
    for family in UPSTREAM_LATENCY.collect():
        for sample in family.samples:
            operation = sample.labels["operation"]
            count, total, buckets = found.get(operation, (0.0, 0.0, {}))
            if sample.name.endswith("_count"):
                count += sample.value
            elif sample.name.endswith("_sum"):
                total += sample.value
            elif sample.name.endswith("_bucket"):
                le = float(sample.labels["le"])
                buckets[le] = buckets.get(le, 0.0) + sample.value
            found[operation] = (count, total, buckets)
    return {op: (c, t, sorted(b.items())) for op, (c, t, b) in found.items()}


async def report_edge(request: web.Request) -> web.Response:
    """A downstream relay's report, kept whole (the latest per relay and key scope) to be
    passed on."""
    body = await read_kept(request, EdgeInstanceData, MAX_REPORT_BYTES)
    scope = ReportScope.of(request[PRINCIPAL])
    edge = ReportedEdge(body.identifier, body.appName, None, body)
    await request.app[EDGE_REPORTS].save(scope, [edge], time.time())
    return web.Response(status=202)


ROUTES = [
    client_route(
        REPORT_PATH,
        report_edge,
        "A downstream relay's report about itself, passed on in this relay's own",
        EdgeInstanceData,
    )
]
