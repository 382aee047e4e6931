"""A relay follows its upstream's stream when it offers one, and polls when it does not or
when the stream ends (``relay.edge.flags.follow``). The fake upstream stands in for streams
that end, and for an upstream without one; real streams (our standalone, a chain of relays)
are in ``test_delta_relay.py``."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from conftest import DEV_KEY, MakeClient
from fake_upstream import DELTA, STREAM, Answer, FakeUpstream
from followkit import FLAGS, delta, delta_polls, sse, with_checkout, worker_cache
from service import eventually

from relay.edge.flags.store import Copy, FlagScope, FlagStore
from relay.edge.upstream import MAX_ANSWER_BYTES, UpstreamClient
from relay.store.cache_file import cache_file

MANY_SCOPES = 120  # more than the 100 connections of the upstream client's pool


def streams(upstream: FakeUpstream) -> int:
    return sum(r.path == STREAM for r in upstream.received)


def revision(etag: str) -> int:
    return int(etag.strip('"'))


async def names(relay: Any) -> list[str]:
    [hydration] = (await delta(relay))[1]["events"]
    return [f["name"] for f in hydration["features"]]


async def test_an_upstream_without_a_stream_is_polled(
    make_relay: MakeClient, upstream: FakeUpstream
) -> None:
    upstream.by_path[STREAM] = Answer(404)
    relay = await make_relay(features_refresh_interval=0.1, client_tokens=[DEV_KEY])
    await eventually(lambda: len(upstream.flag_fetches) >= 5, "polls")
    assert streams(upstream) == 1  # asked once, not at each refresh (NOT_OFFERED)
    assert await names(relay) == ["f1"]


async def test_the_streams_events_become_the_copy_and_an_ended_stream_is_polled(
    make_relay: MakeClient, upstream: FakeUpstream
) -> None:
    """The stream's hydration and updates are the relay's copy; when it ends, the relay
    polls at once (it may have missed changes), then follows again later."""
    off = {**FLAGS["features"][0], "enabled": False}  # type: ignore[dict-item]
    body = sse(
        ("unleash-connected", [{"eventId": 1, "type": "hydration", **FLAGS, "segments": []}]),
        ("unleash-updated", [{"eventId": 2, "type": "feature-updated", "feature": off}]),
        ("unleash-updated", [{"eventId": 3, "type": "feature-removed", "featureName": "b.search"}]),
    )
    # answered after a first delta here: a stream ends (or fails) at once only by accident
    headers = {"Content-Type": "text/event-stream"}
    upstream.by_path[STREAM] = Answer(200, headers, delay=0.5, body=body)
    relay = await make_relay(features_refresh_interval=60, client_tokens=[DEV_KEY])
    _, first, etag = await delta(relay)
    assert [f["name"] for f in first["events"][0]["features"]] == ["f1"]  # polled
    await eventually(lambda: streams(upstream) == 1, "the stream followed")
    polled = len(upstream.flag_fetches)
    await eventually(lambda: len(upstream.flag_fetches) > polled, "a poll as the stream ended")
    assert streams(upstream) == 1  # tried again only after RETRY

    async def polled_again() -> bool:
        return revision((await delta(relay))[2]) == revision(etag) + 4

    # f1, the stream's two flags, one off, one removed, f1 again: four changes
    await eventually(polled_again, "each copy a revision")
    assert await names(relay) == ["f1"]


async def test_an_upstream_with_a_delta_is_polled_by_it(
    make_relay: MakeClient, upstream: FakeUpstream
) -> None:
    """No stream, a delta: the relay polls it, with the ETag of the last one it got, and
    never asks for the client features answer."""
    hydration = {"events": [{"eventId": 5, "type": "hydration", **FLAGS, "segments": []}]}
    body = json.dumps(hydration).encode()
    upstream.by_path[DELTA] = Answer(200, {"ETag": '"5"'}, body=body)
    relay = await make_relay(features_refresh_interval=0.1, client_tokens=[DEV_KEY])
    await eventually(lambda: len(delta_polls(upstream)) > 3, "polls")
    polls = delta_polls(upstream)
    assert "If-None-Match" not in polls[0].headers  # a hydration first
    assert {r.headers["If-None-Match"] for r in polls[1:]} == {'"5"'}
    assert await names(relay) == ["a.checkout", "b.search"]
    assert upstream.flag_fetches == []


NESTED = b'{"events": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"


@pytest.mark.parametrize("data", [b'{"events": [1]}', NESTED], ids=["not-objects", "nested"])
async def test_a_stream_of_no_known_shape_ends_and_is_tried_again_later(
    make_relay: MakeClient, upstream: FakeUpstream, data: bytes
) -> None:
    """Events that are no objects, or JSON nested past the parser's depth, end the stream
    as any unreadable one: polled, tried again after RETRY (they crashed the follower,
    which then tried the stream again at every refresh)."""
    body = b"event: unleash-connected\nid: 1\ndata: %s\n\n" % data
    headers = {"Content-Type": "text/event-stream"}
    upstream.by_path[STREAM] = Answer(200, headers, body=body)
    relay = await make_relay(features_refresh_interval=0.1, client_tokens=[DEV_KEY])
    await eventually(lambda: len(upstream.flag_fetches) >= 5, "polls")
    assert streams(upstream) == 1
    assert await names(relay) == ["f1"]


async def test_a_delta_of_no_known_shape_is_as_none(
    make_relay: MakeClient, upstream: FakeUpstream
) -> None:
    """The relay then polls the client features answer (it served no flags at all)."""
    upstream.by_path[DELTA] = Answer(200, body=b'{"events": [1]}')
    relay = await make_relay(features_refresh_interval=0.1, client_tokens=[DEV_KEY])
    assert await names(relay) == ["f1"]
    assert len(delta_polls(upstream)) == 1  # asked again only after NOT_OFFERED


async def test_an_event_without_end_is_cut_at_the_answer_bound(
    make_relay: MakeClient, upstream: FakeUpstream
) -> None:
    """``data:`` lines without the blank line that ends an event were kept without bound
    (each line was bounded, not the event): cut once they pass ``MAX_ANSWER_BYTES``."""
    line = b"data: " + b"x" * (64 * 1024) + b"\n"

    async def endless() -> AsyncIterator[bytes]:
        yield b"event: unleash-connected\n"
        for _ in range(3 * MAX_ANSWER_BYTES // (16 * len(line))):
            yield line * 16

    answer = Answer(200, {"Content-Type": "text/event-stream"}, chunks=endless)
    upstream.by_path[STREAM] = answer
    relay = await make_relay(features_refresh_interval=0.1, client_tokens=[DEV_KEY])
    await asyncio.wait_for(answer.ended.wait(), 60)
    assert answer.sent < 1.5 * MAX_ANSWER_BYTES  # what sockets hold past the cut
    assert await names(relay) == ["f1"]


async def test_streams_followed_leave_the_upstream_connections_to_fetches(
    make_relay: MakeClient, upstream: FakeUpstream
) -> None:
    """More scopes followed than a connection pool holds (aiohttp's 100): each scope's
    stream is opened, and a new SDK's first fetch is still answered. The streams are kept
    open upstream (held before their headers), as a real upstream's are."""
    keys = [f"p{i}:development.follow-secret-{i:03d}" for i in range(MANY_SCOPES)]
    upstream.valid_keys.update(dict.fromkeys(keys, "development"))
    held = asyncio.Event()
    upstream.by_path[STREAM] = Answer(200, {"Content-Type": "text/event-stream"}, hold=held)
    try:
        relay = await make_relay(features_refresh_interval=60, client_tokens=keys)
        await eventually(lambda: streams(upstream) == MANY_SCOPES, "every scope followed")
        response = await relay.get("/api/client/features", headers={"Authorization": DEV_KEY})
        assert response.status == 200
    finally:
        held.set()


class SlowFile(FlagStore):
    """``cache.db`` slow to answer (a loaded machine): a copy loaded is handed over only
    once ``handed`` is set, ``loading`` set meanwhile."""

    def __init__(self, path: Path) -> None:
        super().__init__(cache_file(path, "NORMAL"))
        self.loading, self.handed = asyncio.Event(), asyncio.Event()
        self.handed.set()

    async def copy(self, scope: FlagScope) -> Copy | None:
        found = await super().copy(scope)
        self.loading.set()
        await self.handed.wait()
        return found


async def test_a_stored_copy_loaded_as_the_stream_changes_never_takes_the_flags_back(
    upstream: FakeUpstream, tmp_path: Path
) -> None:
    """A worker following the stream loads the copy another worker stored from a poll the
    upstream answered before a change (checkout on, its revision 1), at the next revision;
    while it loads, the stream turns checkout off (the upstream's revision 2) at that same
    revision. The worker's store of it loses to the other's (``FlagStore.publish``), it
    compares the two and keeps the upstream's newer flags past both; the copy loaded
    meanwhile, older, is not taken. No SDK of the worker got checkout on again, and the file
    ends at checkout off for the other workers."""
    events: asyncio.Queue[bytes] = asyncio.Queue()

    async def chunks() -> AsyncIterator[bytes]:
        while True:
            yield await events.get()

    upstream.features = FLAGS
    headers = {"Content-Type": "text/event-stream"}
    upstream.by_path[STREAM] = Answer(200, headers, chunks=chunks)
    store = SlowFile(tmp_path)
    client = UpstreamClient(str(upstream.server.make_url("")).rstrip("/"), 10.0)  # type: ignore[union-attr]
    other = FlagStore(cache_file(tmp_path, "NORMAL"))  # another worker's connection
    await store._db.open()
    await other._db.open()
    await client.open()
    cache = worker_cache(store, client, 60.0)
    try:
        await cache.start()
        [entry] = cache.copies()
        hydration = {"eventId": 1, "type": "hydration", **FLAGS, "segments": []}
        events.put_nowait(sse(("unleash-connected", [hydration])))
        await eventually(lambda: entry.streamed, "the stream followed")
        await cache.stored(entry)
        held = entry.changes.revision
        polled = json.dumps({**FLAGS, "meta": {"revisionId": 1}}).encode()
        assert await other.publish(entry.scope, Copy(polled, '"other"', time.time(), held + 1), 60)

        store.handed.clear()
        store.loading.clear()
        tick = asyncio.create_task(cache.tick())
        await store.loading.wait()  # the other worker's copy, being loaded
        off = with_checkout(False)["features"][0]
        update = {"eventId": 2, "type": "feature-updated", "feature": off}
        events.put_nowait(sse(("unleash-updated", [update])))
        await eventually(lambda: entry.changes.revision > held, "checkout off, streamed")
        store.handed.set()
        await tick
        await cache.stored(entry)

        assert entry.rendered is not None
        assert json.loads(entry.rendered.body)["features"][0]["enabled"] is False
        stored = await other.copy(entry.scope)
        assert stored is not None and stored.revision == entry.changes.revision == held + 2
        assert json.loads(stored.body)["features"][0]["enabled"] is False
    finally:
        await cache.stop()
        await client.close()
        await store._db.close()
        await other._db.close()
