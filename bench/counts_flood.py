"""Issue 33, row 1, as a load: an SDK's counts in a relay's buffer, then one connection with
the public frontend key posting ``--flood-names`` made-up flag names a post into a full
buffer (``--buffer-mib``) while nothing is flushed; then the relay stops (its final flush) and
the upstream is asked how many of the SDK's counts arrived. Before counts were their key's,
the flood evicted the SDK's (0 of 2,220 arrived); now the flood takes the room of its own.
"""

from __future__ import annotations

import argparse
import json
import time
import urllib.request
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from servers import ADMIN, CLIENT, Server, scrape, start

SAMPLED = 60  # SDK flags asked for at the upstream, spread over all of them


def _call(url: str, body: object | None, key: str) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    headers = {"Authorization": key, "Content-Type": "application/json"}
    request = urllib.request.Request(url, data=data, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            raw = response.read()
            return int(response.status), json.loads(raw) if raw else None
    except urllib.error.HTTPError as error:
        return int(error.code), None


def _sdk_counts(relay: Server, names: list[str]) -> None:
    for part in range(0, len(names), 740):
        metrics = [
            {"featureName": n, "appName": "sdk", "environment": "development", "yes": 1, "no": 0}
            for n in names[part : part + 740]
        ]
        body = {"applications": [], "metrics": metrics}
        status, _ = _call(f"{relay.url}/api/client/metrics/bulk", body, CLIENT)
        assert status == 202, status


def _arrived(upstream: Server, names: list[str]) -> float:
    """The share of ``SAMPLED`` SDK flags whose count reached the upstream."""
    sample = names[:: max(1, len(names) // SAMPLED)]
    found = 0
    for name in sample:
        url = f"{upstream.url}/api/admin/client-metrics/features/{name}/raw?hoursBack=48"
        status, answer = _call(url, None, ADMIN)
        found += status == 200 and sum(row.get("yes", 0) for row in answer["data"]) >= 1
    return found / len(sample)


def scenario_counts(
    args: argparse.Namespace, workdir: Path, upstream: Server, code: str | None
) -> dict[str, Any]:
    """``upstream``: a standalone holding ``ADMIN`` and ``CLIENT``."""
    body = {"type": "frontend", "environment": "development", "tokenName": "web"}
    status, made = _call(f"{upstream.url}/api/admin/api-tokens", body, ADMIN)
    assert status == 201, status
    frontend = str(made["secret"])
    env = {
        "RELAY_MODE": "relay",
        "RELAY_UPSTREAM_URL": upstream.url,
        "RELAY_UPSTREAM_TOKENS": CLIENT,
        "RELAY_FLUSH_INTERVAL": "3600",  # nothing flushed during the flood
        "RELAY_BUFFER_MAX_BYTES": str(args.buffer_mib * 1024 * 1024),
        "RELAY_SQLITE_SYNCHRONOUS": "NORMAL",
    }
    if code:
        env["PYTHONPATH"] = code
    relay = start("relay", workdir / "relay", env)
    names = [f"sdk-{i:05}" for i in range(args.sdk_counts)]
    statuses: Counter[int] = Counter()
    try:
        _sdk_counts(relay, names)
        now = datetime.now(UTC).isoformat()
        began = time.perf_counter()
        for post in range(args.flood_posts):
            made_up = (f"made-up-{post}-{i:05}" for i in range(args.flood_names))
            toggles = {name: {"yes": 1, "no": 0} for name in made_up}
            flood = {"appName": "web", "bucket": {"start": now, "stop": now, "toggles": toggles}}
            status, _ = _call(f"{relay.url}/api/frontend/client/metrics", flood, frontend)
            statuses[status] += 1
        seconds = time.perf_counter() - began
        evicted = scrape(relay.url, "relay_evicted_entries_total")
    finally:
        relay.stop()  # the final flush sends what the buffer holds
    return {
        "buffer_mib": args.buffer_mib,
        "sdk_counts": len(names),
        "flood_posts": args.flood_posts,
        "flood_names": args.flood_names,
        "flood_seconds": round(seconds, 1),
        "flood_statuses": dict(statuses),
        "evicted_entries": int(evicted),
        "sdk_counts_arrived": f"{_arrived(upstream, names):.0%}",
    }
