"""A relay following its upstream's stream, or polling it: the flags served, the events
read, the polls counted, and the copy a worker holds."""

from __future__ import annotations

import json
from typing import Any

from conftest import DEV_KEY
from fake_upstream import DELTA, FakeUpstream, Received

from relay.api.shared import Layout, Shared
from relay.edge.flags.cache import FlagCache
from relay.edge.flags.store import FlagStore
from relay.edge.key_words import KeyWords
from relay.edge.upstream import UpstreamClient
from relay.store.key_words import KeyWordStore

FLAGS = {
    "version": 2,
    "features": [
        {"name": "a.checkout", "enabled": True, "project": "default", "strategies": []},
        {"name": "b.search", "enabled": True, "project": "default", "strategies": []},
    ],
}


def with_checkout(enabled: bool) -> dict[str, Any]:
    checkout = {**FLAGS["features"][0], "enabled": enabled}  # type: ignore[dict-item]
    return {**FLAGS, "features": [checkout, FLAGS["features"][1]]}


async def delta(relay: Any, since: str | None = None, query: str = "") -> tuple[int, Any, str]:
    headers = {"Authorization": DEV_KEY} | ({"If-None-Match": since} if since else {})
    response = await relay.get(f"/api/client/delta{query}", headers=headers)
    raw = await response.read()
    return response.status, json.loads(raw) if raw else None, response.headers["ETag"]


def sse(*events: tuple[str, list[dict[str, Any]]]) -> bytes:
    return b"".join(
        b"event: %s\nid: %d\ndata: %s\n\n" % (kind.encode(), i, json.dumps({"events": e}).encode())
        for i, (kind, e) in enumerate(events, 1)
    )


def delta_polls(upstream: FakeUpstream) -> list[Received]:
    return [r for r in upstream.received if r.path == DELTA]


def worker_cache(
    store: FlagStore, client: UpstreamClient, interval: float, shared: Shared | None = None
) -> FlagCache:
    """One worker's flag cache over ``store`` (its ``cache.db``), alone or as one of the
    workers sharing ``shared``."""
    shared = shared or Shared.private(Layout.of(1, 10))
    words = KeyWords(KeyWordStore(store._db), shared)
    return FlagCache(store, client, interval, [DEV_KEY], {}, lambda: None, words, shared)
