"""Unleash Edge's debugging endpoints under ``/internal-backstage/``, in Edge's shapes, for
relay and offline mode: ``features`` (the flags held, per scope), ``tokens`` (the keys
known, never a secret), ``metricsbatch`` (counts not sent yet) and ``instancedata`` (this
relay's report). Like Edge's, they take no key: each is switched off by its
``disable_*_endpoint`` setting (Edge's names; SECURITY.md says what they show).

What differs from Edge, by construction: a scope is named ``projects:environment`` (Edge
names its copies by environment); a key is ``project:environment.****``, never a part of its
secret (Edge shows its first and last six characters); ``metricsbatch`` reads the buffer every
worker writes into, whichever answers: the batches cut for the upstream and not yet taken
by it (the outbox, oldest first), then the counts not yet cut, oldest hour first, at most
``MAX_ROWS`` entries in all, and as many registrations.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from aiohttp import web

from relay.api.routing import Route
from relay.core.ingest_batch import from_epoch
from relay.core.keys import Principal, redact
from relay.edge.flags.entries import Entry
from relay.settings import Settings
from relay.store.buffer_pages import BufferPages
from relay.wire.edges import EdgeInstanceData

MAX_ROWS = 1000
HOUR = 3600
Json = dict[str, Any]


class KeyListing(Protocol):
    def listing(self) -> tuple[list[tuple[Principal, str]], int]:
        """The keys known with Edge's status of each (``Trusted``: configured,
        ``Validated``: the upstream vouched for it), and how many are known invalid."""
        ...


@dataclass(frozen=True)
class Sources:
    """Where each endpoint reads: the flag copies, the keys, the buffer, the report;
    ``current`` returns once this worker holds what any worker had shown when it was called
    (``relay.api.shared.CatchUp``)."""

    copies: Callable[[], Iterable[Entry]]
    keys: KeyListing
    buffer: BufferPages | None = None
    report: Callable[[], Awaitable[EdgeInstanceData]] | None = None
    current: Callable[[], Awaitable[None]] | None = None

    async def caught_up(self) -> None:
        if self.current is not None:
            await self.current()


SOURCES = web.AppKey("backstage_sources", Sources)


def _json(body: bytes) -> web.Response:
    return web.Response(body=body, content_type="application/json")


async def features(request: web.Request) -> web.Response:
    """``{"projects:environment": client features answer}``: the answers' bytes as held."""
    await request.app[SOURCES].caught_up()
    parts = [
        json.dumps(_scope_name(e)).encode() + b":" + e.rendered.body
        for e in request.app[SOURCES].copies()
        if e.rendered is not None
    ]
    return _json(b"{" + b",".join(parts) + b"}")


def _scope_name(entry: Entry) -> str:
    return f"{','.join(entry.scope.projects)}:{entry.scope.environment}"


def _scope_key(entry: Entry) -> str:
    """A key of the scope as logs show one: the same whichever worker fetched it."""
    projects = entry.scope.projects
    project = projects[0] if len(projects) == 1 and entry.scope.own is None else "[]"
    return f"{project}:{entry.scope.environment}.****"


def _token(principal: Principal, status: str | None = None) -> dict[str, Any]:
    token: dict[str, Any] = {
        "token": principal.display,
        "type": principal.type.value,
        "environment": principal.environment,
        "projects": list(principal.projects),
    }
    if status is not None:
        token["status"] = status
    return token


def _iso(seconds: float | None) -> str | None:
    return None if seconds is None else from_epoch(seconds).isoformat()


async def tokens(request: web.Request) -> web.Response:
    """Edge's ``TokenInfo``: the scopes refreshed (with the key they were fetched with,
    redacted), the keys known, and the count of keys known invalid."""
    sources = request.app[SOURCES]
    await sources.caught_up()
    known, invalid = sources.keys.listing()
    refreshes = [
        {
            "token": {
                "token": redact(entry.fetch_key) if entry.fetch_key else _scope_key(entry),
                "environment": entry.scope.environment,
                "projects": list(entry.scope.projects),
            },
            "etag": entry.upstream_etag or None,
            "last_refreshed": _iso(entry.fetched_at),
            "next_refresh": _iso(entry.due_at or None),
            "last_feature_count": entry.rendered.features if entry.rendered else None,
        }
        for entry in sources.copies()
    ]
    body = {
        "tokenRefreshes": refreshes,
        "tokenValidationStatus": [_token(p, status) for p, status in known],
        "invalidTokenCount": invalid,
    }
    return web.json_response(body)


async def metrics_batch(request: web.Request) -> web.Response:
    """Edge's ``MetricsInfo``: the registrations and counts waiting to be sent."""
    buffer = request.app[SOURCES].buffer
    if buffer is None:  # offline mode dropping its counts
        return web.json_response({"applications": [], "metrics": []})
    sent, applications = await _outbox(buffer)
    metrics = [*sent, *await _buffered(buffer, MAX_ROWS - len(sent))]
    applications += [
        {
            "appName": app,
            "environment": env,
            "instanceId": instance,
            "sdkVersion": sdk,
            "interval": interval,
            "started": _iso(started),
        }
        for app, env, instance, sdk, interval, started in await buffer.registrations(
            MAX_ROWS - len(applications)
        )
    ]
    return web.json_response({"applications": applications, "metrics": metrics})


async def _outbox(buffer: BufferPages) -> tuple[list[Json], list[Json]]:
    """The outbox's batches, oldest first, while their entries stay within ``MAX_ROWS``: the
    counts (in Edge's shape) and the registrations their bodies carry."""
    metrics: list[Json] = []
    applications: list[Json] = []
    for body in await buffer.batch_bodies(MAX_ROWS):
        try:
            batch = json.loads(body)
        except ValueError:
            continue  # damaged: the flusher dead-letters it
        for m in batch.get("metrics", []):
            hour = datetime.fromisoformat(m["timestamp"]).timestamp()
            toggle = {"yes": m["yes"], "no": m["no"], "variants": m.get("variants") or {}}
            key = {"app_name": m["appName"], "feature_name": m["featureName"]}
            key |= {"environment": m["environment"], "timestamp": _iso(hour)}
            bucket = {"start": _iso(hour), "stop": _iso(hour + HOUR)}
            metrics.append(
                {"key": key, "bucket": {**bucket, "toggles": {key["feature_name"]: toggle}}}
            )
        applications += [
            {
                k: a.get(k)
                for k in (
                    "appName",
                    "environment",
                    "instanceId",
                    "sdkVersion",
                    "interval",
                    "started",
                )
            }
            for a in batch.get("applications", [])
        ]
    return metrics, applications


async def _buffered(buffer: BufferPages, most: int) -> list[Json]:
    """The counts not yet cut into batches, oldest hour first, at most ``most``."""
    counts: dict[tuple[str, str, str, int], tuple[int, int, dict[str, int]]] = {}
    for feature, app, env, hour, yes, no, variant, count in await buffer.counts(most):
        _, _, variants = counts.setdefault((feature, app, env, hour), (yes, no, {}))
        if variant is not None:
            variants[variant] = count
    return [
        {
            "key": {
                "app_name": app,
                "feature_name": feature,
                "environment": env,
                "timestamp": _iso(hour),
            },
            "bucket": {
                "start": _iso(hour),
                "stop": _iso(hour + HOUR),
                "toggles": {
                    feature: {
                        "yes": yes,
                        "no": no,
                        "variants": variants,
                    }
                },
            },
        }
        for (feature, app, env, hour), (yes, no, variants) in sorted(
            counts.items(), key=lambda item: item[0][3]
        )
    ]


async def instance_data(request: web.Request) -> web.Response:
    """Edge's ``DebugEdgeInstanceData``: this relay's report and those of the relays below
    it, as the next report upstream carries them."""
    report = request.app[SOURCES].report
    if report is None:  # offline mode reports to nobody
        return web.json_response({"this_instance": None, "connected_instances": []})
    mine = await report()
    below = [r.model_dump(mode="json", exclude_none=True) for r in mine.connectedEdges]
    this = mine.model_dump(mode="json", exclude_none=True, exclude={"connectedEdges"})
    return web.json_response({"this_instance": this, "connected_instances": below})


_ENDPOINTS: list[tuple[str, Callable[[web.Request], Awaitable[web.StreamResponse]], str]] = [
    ("features", features, "The flags held, per scope (Edge's)"),
    ("tokens", tokens, "The keys known and the scopes refreshed, without secrets (Edge's)"),
    ("metricsbatch", metrics_batch, "Counts and registrations not sent yet (Edge's)"),
    ("instancedata", instance_data, "This relay's report and its downstream relays' (Edge's)"),
]


def routes(settings: Settings) -> list[Route]:
    """The endpoints not switched off."""
    off = {
        "features": settings.disable_features_endpoint,
        "tokens": settings.disable_tokens_endpoint,
        "metricsbatch": settings.disable_metrics_batch_endpoint,
        "instancedata": settings.disable_instance_data_endpoint,
    }
    return [
        Route(
            "GET",
            f"/internal-backstage/{name}",
            handler,
            summary,
            "backstage",
            responses={200: None},
            operation=f"backstage_{name}",
        )
        for name, handler, summary in _ENDPOINTS
        if not off[name]
    ]
