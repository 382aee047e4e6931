"""Hostile callers against issue 33, row 1 (``relay.store.own_room``): no key's input evicts
counts another key posted and got 202 for. The flooders here post few counts, each with the
most variants (100) of the longest names: an estimate of a count's bytes that priced a
variant flat (48 bytes, whatever its name) let them write ten times what was counted, past
the bound, and the bound's backstop then took the SDK's counts (it chose the key holding
the most rows, not the most bytes)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from conftest import DEV_KEY, PROD_KEY, auth, bulk, metric
from fake_upstream import Answer, FakeUpstream
from service import eventually

from relay.api.shared import Room
from relay.api.state import SHARED

FRONT = "default:development.frontend-secret-for-tests-0123456789"


def fat(post: int, counts: int) -> dict[str, dict[str, int]]:
    """``counts`` made-up flag names of 250 characters, each with 100 variants of 250."""
    variants = {f"{v:03}-".ljust(250, "v"): 1 for v in range(100)}
    return {f"{post:03}-{i:03}-".ljust(250, "f"): variants for i in range(counts)}


async def sdk_counts(client: Any) -> set[str]:
    """An SDK's 2,220 plain counts with DEV_KEY, each answered 202."""
    sdk = [metric(f"sdk-{i:04}", yes=1) for i in range(2220)]
    for part in range(0, len(sdk), 740):
        posted = await client.post(
            "/api/client/metrics/bulk", json=bulk(sdk[part : part + 740]), headers=auth(DEV_KEY)
        )
        assert posted.status == 202
    return {f"sdk-{i:04}" for i in range(2220)}


async def post_fat(client: Any, browser: bool, post: int, counts: int) -> int:
    if browser:
        now = datetime.now(UTC).isoformat()
        toggles = {name: {"yes": 1, "variants": v} for name, v in fat(post, counts).items()}
        body = {"appName": "web", "bucket": {"start": now, "stop": now, "toggles": toggles}}
        posted = await client.post("/api/frontend/client/metrics", json=body, headers=auth(FRONT))
    else:
        metrics = [
            metric(name, env="production", yes=1, variants=v)
            for name, v in fat(post, counts).items()
        ]
        posted = await client.post(
            "/api/client/metrics/bulk", json=bulk(metrics), headers=auth(PROD_KEY)
        )
    return int(posted.status)


@pytest.mark.workers
@pytest.mark.parametrize(
    ("browser", "counts", "posts"),
    [(True, 20, 6), (True, 1, 40), (False, 30, 6), (False, 1, 40)],
    ids=["browser-large", "browser-small", "client-large", "client-small"],
)
async def test_fat_counts_never_evict_another_keys_counts(
    make_relay: Any, upstream: FakeUpstream, tmp_path: Path, browser: bool, counts: int, posts: int
) -> None:
    """A frontend key (public) or another client key posts fat counts into a 1 MiB buffer
    while the upstream is down: every one of the SDK's 2,220 counts reaches the upstream
    once it is back. Before: 1,000 of them lost to the frontend key's six posts of 20, all
    2,220 to the client key's first post of 30."""
    upstream.default = Answer(503)
    client = await make_relay(buffer_max_bytes=1024 * 1024, frontend_tokens=[FRONT], backoff_max=60)
    wanted = await sdk_counts(client)
    # the leader has measured every write before the flood: a large request is weighed at
    # once (whether it had was luck, and a client key's posts then all got 202, 5.2 MB)
    shared = client.app[SHARED]
    await eventually(lambda: shared.room(Room.MARK) == shared.settled(), "the leader measured")
    statuses = [await post_fat(client, browser, post, counts) for post in range(posts)]
    assert set(statuses) <= {202, 503}, statuses
    files = sum(p.stat().st_size for p in (tmp_path / "relay").glob("buffer.db*"))
    assert files < 2 * 1024 * 1024, files  # before: 4.2 MB
    upstream.default = Answer(202)
    await client.close()
    arrived = {m["featureName"] for r in upstream.accepted_bulks() for m in r.json()["metrics"]}
    assert wanted <= arrived, (len(wanted - arrived), statuses)


@pytest.mark.workers
@pytest.mark.parametrize("browser", [True, False], ids=["browser", "client"])
async def test_a_concurrent_flood_never_evicts_another_keys_counts(
    make_relay: Any, upstream: FakeUpstream, tmp_path: Path, browser: bool
) -> None:
    """Eight requests at once, ten times, each of 300 new 100-character names, with one
    worker or two: the flooder pays with its own (seen: 1.0-1.6 MB of files, the browser
    key every request 202, the client key 5-29 of 80), the SDK loses nothing."""
    upstream.default = Answer(503)
    client = await make_relay(buffer_max_bytes=1024 * 1024, frontend_tokens=[FRONT], backoff_max=60)
    wanted = await sdk_counts(client)
    now = datetime.now(UTC).isoformat()

    async def post(n: int) -> int:
        names = [f"{n:04}-{i:04}-".ljust(100, "x") for i in range(300)]
        if browser:
            toggles = {name: {"yes": 1} for name in names}
            body = {"appName": "web", "bucket": {"start": now, "stop": now, "toggles": toggles}}
            posted = await client.post(
                "/api/frontend/client/metrics", json=body, headers=auth(FRONT)
            )
        else:
            metrics = [metric(name, env="production", yes=1) for name in names]
            posted = await client.post(
                "/api/client/metrics/bulk", json=bulk(metrics), headers=auth(PROD_KEY)
            )
        return int(posted.status)

    statuses: list[int] = []
    for round_ in range(10):
        statuses += await asyncio.gather(*(post(round_ * 8 + i) for i in range(8)))
    files = sum(p.stat().st_size for p in (tmp_path / "relay").glob("buffer.db*"))
    assert files < 2 * 1024 * 1024, (files, statuses.count(202))
    assert set(statuses) <= {202, 503}, statuses
    upstream.default = Answer(202)
    await client.close()
    arrived = {m["featureName"] for r in upstream.accepted_bulks() for m in r.json()["metrics"]}
    assert wanted <= arrived, (len(wanted - arrived), files)
