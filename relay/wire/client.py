"""Bodies SDKs and relays post under ``/api/client``, named after the spec's schemas
(``bulkMetricsSchema``...) and Unleash's (``clientMetricsSchema``...)."""

from __future__ import annotations

from typing import Annotated

from pydantic import ConfigDict, Field

from relay.wire.common import (
    MAX_APPLICATIONS,
    MAX_LIST,
    MAX_METRICS,
    MAX_VARIANTS,
    Count,
    KeyName,
    Name,
    RawTimestamp,
    Text,
    Timestamp,
    Wire,
    empty,
)
from relay.wire.impact import ImpactCarrier

Variants = Annotated[dict[KeyName, Count], Field(max_length=MAX_VARIANTS)]


class ConnectVia(Wire):
    appName: Name
    instanceId: Name


class ClientMetricsEnv(Wire):
    """Element of ``metrics``: counts for one feature in one app and environment."""

    featureName: KeyName
    appName: KeyName
    environment: KeyName
    timestamp: RawTimestamp | None = None
    yes: Count = 0
    no: Count = 0
    variants: Variants = empty(dict)


# --- what SDKs post directly: Unleash's SDKs post no environment, it comes from their key ---


class ToggleCounts(Wire):
    yes: Count = 0
    no: Count = 0
    variants: Variants = empty(dict)


class MetricsBucket(Wire):
    start: Timestamp | None = None
    stop: Timestamp | None = None
    toggles: Annotated[dict[KeyName, ToggleCounts], Field(max_length=MAX_METRICS)] = empty(dict)


class ClientMetrics(ImpactCarrier):
    """``clientMetricsSchema``: an SDK's ``/api/client/metrics`` body; environment comes from
    the key, never from the body."""

    model_config = ConfigDict(title="clientMetricsSchema")

    appName: KeyName
    instanceId: Text = "default"
    bucket: MetricsBucket | None = None


class ClientRegistration(Wire):
    """``clientApplicationSchema``: an SDK's ``/api/client/register`` body.

    ``interval`` is seconds from the Python SDK and milliseconds from the Node SDK; it is stored
    as sent, since nothing tells the two apart."""

    model_config = ConfigDict(title="clientApplicationSchema")

    appName: KeyName
    instanceId: KeyName = "default"
    connectVia: Annotated[list[ConnectVia], Field(max_length=MAX_LIST)] = empty(list)
    interval: Annotated[float, Field(ge=0, le=10**12)] | None = None
    started: Timestamp | None = None
    strategies: Annotated[list[Text], Field(max_length=MAX_LIST)] = empty(list)
    sdkVersion: Text | None = None


class ClientApplication(ClientRegistration):
    """Element of ``applications`` in a bulk body: a registration relayed for an SDK, which
    names its environment and instance explicitly."""

    model_config = ConfigDict(title="bulkRegistrationSchema")

    environment: KeyName
    instanceId: KeyName


class BulkMetrics(ImpactCarrier):
    """``bulkMetricsSchema``: what relays (and our relay) post to ``/api/client/metrics/bulk``."""

    model_config = ConfigDict(title="bulkMetricsSchema")

    applications: Annotated[list[ClientApplication], Field(max_length=MAX_APPLICATIONS)]
    metrics: Annotated[list[ClientMetricsEnv], Field(max_length=MAX_METRICS)]
