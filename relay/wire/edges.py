"""What relays report about themselves (``POST /api/client/metrics/edge``) and what the
central service answers about them (``GET /api/admin/metrics/edges``).

The report carries the fields of Unleash Edge's ``EdgeInstanceData`` that apply to a relay
(identifier, appName, edgeVersion, region, started, latencyUpstream,
requestsSinceLastReport, connectedStreamingClients, connectedEdges), so a real Unleash Edge
may report to the central service too; unknown fields (``processMetrics``, ``traffic``...)
are ignored. Ours are optional: the buffer, the outbox, dead letters and the last flush.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeInt,
    PrivateAttr,
    RootModel,
    TypeAdapter,
    model_validator,
)

from relay.wire.common import MAX_LIST, Name, NonNegativeFinite, Text, Wire, empty

REPORT_PATH = "/api/client/metrics/edge"
"""Where relays post their reports (Unleash Edge's path)."""
MAX_REPORTED = 1000
"""Relays one report may carry, its own and those of every relay below it."""
MAX_DEPTH = 16
"""Relays in a chain one report may carry, itself included: each relay passes on those below
it one level deeper, and a report nested about 100 deep no longer parses at all."""
MAX_REPORT_BYTES = 64 * 1024
"""Bytes of one report as kept (its JSON without the fields ignored), with those it carries:
Unleash Edge's reports are a few kB each."""


class LatencyMetrics(Wire):
    """Milliseconds, as Unleash Edge reports them."""

    avg: NonNegativeFinite = 0.0
    count: NonNegativeFinite = 0.0
    p99: NonNegativeFinite = 0.0


class UpstreamLatency(Wire):
    features: LatencyMetrics | None = None
    metrics: LatencyMetrics | None = None
    edge: LatencyMetrics | None = None


class LastFlush(Wire):
    at: datetime
    outcome: Annotated[str, Field(max_length=50)]
    status: int | None = None


class EdgeInstanceData(Wire):
    """``edgeInstanceDataSchema``: one relay's report, with those of the relays it serves."""

    model_config = ConfigDict(title="edgeInstanceDataSchema")

    identifier: Name
    appName: Name
    edgeVersion: Text | None = None
    region: Text | None = None
    hosting: Text | None = None
    started: datetime | None = None
    latencyUpstream: UpstreamLatency | None = None
    requestsSinceLastReport: NonNegativeInt | None = None
    connectedStreamingClients: NonNegativeInt = 0
    connectedEdges: Annotated[list[EdgeInstanceData], Field(max_length=MAX_LIST)] = empty(list)
    # ours: a relay's buffer and how its flushes fare
    bufferedEntries: NonNegativeInt | None = None
    oldestBufferedAgeSeconds: NonNegativeFinite | None = None
    outboxBatches: NonNegativeInt | None = None
    deadLetters: NonNegativeInt | None = None
    lastFlush: LastFlush | None = None
    countsWaitingForKey: Annotated[list[Name], Field(max_length=MAX_LIST)] | None = None
    """Environments whose counts wait at the relay: no key of theirs is known."""
    _depth: int = PrivateAttr(1)

    @model_validator(mode="after")
    def _shallow(self) -> Self:
        """At most ``MAX_DEPTH`` relays in a chain (validated from the innermost out, so
        each level adds one to the depth of those below it)."""
        self._depth = 1 + max((below._depth for below in self.connectedEdges), default=0)
        if self._depth > MAX_DEPTH:
            raise ValueError(f"connectedEdges nest more than {MAX_DEPTH} relays deep")
        return self

    @property
    def depth(self) -> int:
        """Relays in the longest chain of this report, itself included."""
        return self._depth


class ConnectedEdge(EdgeInstanceData):
    """A relay as the central service knows it: its latest report (without the reports of
    the relays below it, which are listed on their own), when that came, through which
    relay (``connectedVia``, its identifier; none when it reports directly), and the scope
    of the client key that reported it (identifiers are unique only within one)."""

    model_config = ConfigDict(title="connectedEdgeSchema", extra="forbid")

    instanceId: str
    reportedAt: datetime
    connectedVia: str | None = None
    stale: bool = Field(description="No report for 3 report intervals (3 minutes)")
    environment: str = Field(description="The environment of the key that reported it")
    projects: list[str] = Field(description="The projects of that key (`*`: all)")


class ConnectedEdges(RootModel[list[ConnectedEdge]]):
    model_config = ConfigDict(title="connectedEdgesSchema")


class EdgeToken(BaseModel):
    """A key as Unleash Edge keeps it in its backup (``unleash_tokens.json``): the file is
    read, never trusted further than its checks (``relay.edge.flags.backup``)."""

    model_config = ConfigDict(extra="ignore")

    token: str = Field(max_length=1000)
    type: str | None = None  # client, backend or frontend
    environment: str | None = None
    projects: list[str] = Field(default_factory=list, max_length=MAX_LIST)
    status: str | None = None  # Validated, Trusted, Invalid, Unknown


EdgeTokens = TypeAdapter(list[EdgeToken])
"""``unleash_tokens.json``: a list of keys."""
EdgeFeatures = TypeAdapter(list[tuple[str, dict[str, object]]])
"""``unleash_features.json``: [environment (or key), client features answer] pairs."""
