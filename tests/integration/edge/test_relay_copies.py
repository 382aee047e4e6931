"""A relay's copies of a scope's flags come from its stream, its polls and the other
workers' writes in ``cache.db``, each after an ``await``: whatever order they arrive in, a
relay's SDKs never get flags older than ones they already got, and every worker ends at the
upstream's latest (``relay.edge.flags.cache``). The orders are driven with events, not by
timing: the fake upstream holds an answer, the stream sends an event when told."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from conftest import DEV_KEY
from fake_upstream import DELTA, STREAM, Answer, FakeUpstream
from followkit import FLAGS, delta_polls, sse, with_checkout, worker_cache
from service import eventually

from relay.core.keys import parse_key
from relay.edge.flags.deltas import FlagDeltas
from relay.edge.flags.entries import Entry
from relay.edge.flags.store import Copy, FlagScope, FlagStore, Saved
from relay.edge.upstream import UpstreamClient
from relay.store.cache_file import cache_file
from relay.wire.common import KeyType

HYDRATION = {"eventId": 1, "type": "hydration", **FLAGS, "segments": []}
OFF = {"eventId": 2, "type": "feature-updated", "feature": with_checkout(False)["features"][0]}


def checkout(entry: Entry) -> bool:
    assert entry.rendered is not None
    [flag] = [f for f in json.loads(entry.rendered.body)["features"] if f["name"] == "a.checkout"]
    return bool(flag["enabled"])


class Relay:
    """One worker's flag cache over a real ``cache.db``, its upstream's stream sending what
    ``events`` is given."""

    def __init__(self, upstream: FakeUpstream, path: Path, interval: float) -> None:
        self.events: asyncio.Queue[bytes] = asyncio.Queue()
        self.store = FlagStore(cache_file(path, "NORMAL"))
        url = str(upstream.server.make_url("")).rstrip("/")  # type: ignore[union-attr]
        self.client = UpstreamClient(url, 10.0)
        self.cache = worker_cache(self.store, self.client, interval)

    async def chunks(self) -> AsyncIterator[bytes]:
        while True:
            yield await self.events.get()

    async def __aenter__(self) -> Relay:
        await self.store._db.open()
        await self.client.open()
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.cache.stop()
        await self.client.close()
        await self.store._db.close()

    async def following(self) -> Entry:
        """Started, its first fetch done and its stream hydrated (checkout on)."""
        await self.cache.start()
        [entry] = self.cache.copies()
        self.events.put_nowait(sse(("unleash-connected", [HYDRATION])))
        await eventually(lambda: entry.streamed and entry.task is None, "the stream followed")
        return entry


@pytest.fixture
def streaming(upstream: FakeUpstream) -> FakeUpstream:
    upstream.features = FLAGS
    upstream.by_path[DELTA] = Answer(200, {"ETag": '"1"'}, body=delta_body(HYDRATION))
    return upstream


def delta_body(*events: dict[str, Any]) -> bytes:
    return json.dumps({"events": [*events]}).encode()


async def test_a_poll_answered_after_a_streamed_change_never_takes_the_flags_back(
    streaming: FakeUpstream, tmp_path: Path
) -> None:
    """A refresh is polled while the stream is followed (an interval under a tick: each
    tick claims it; a refused key asked again polls too). The upstream puts its answer
    together with checkout on; before it arrives, the stream turns checkout off. The
    answer, older than the copy held, is not taken (before, it was a new copy: the SDKs
    got checkout on again, stored for every worker, until the next change)."""
    async with Relay(streaming, tmp_path, 0.0) as relay:
        relay_stream = Answer(200, {"Content-Type": "text/event-stream"}, chunks=relay.chunks)
        streaming.by_path[STREAM] = relay_stream
        entry = await relay.following()
        held = entry.changes.revision
        answered = asyncio.Event()
        old = delta_body(HYDRATION)  # checkout on, as the upstream had it when asked
        streaming.by_path[DELTA] = Answer(200, {"ETag": '"1"'}, body=old, hold=answered)
        polls = len(delta_polls(streaming))
        await relay.cache.tick()  # claims the refresh: a poll in flight
        await eventually(lambda: len(delta_polls(streaming)) > polls, "the poll asked")

        relay.events.put_nowait(sse(("unleash-updated", [OFF])))
        await eventually(lambda: entry.changes.revision == held + 1, "checkout off, streamed")
        answered.set()
        await eventually(lambda: entry.task is None, "the poll answered")

        assert not checkout(entry)
        assert entry.changes.revision == held + 1
        stored = await relay.store.copy(entry.scope)  # stored before it was served
        assert stored is not None and stored.revision == held + 1


async def test_an_older_copy_is_never_stored_over_a_newer_one(
    streaming: FakeUpstream, tmp_path: Path
) -> None:
    """A worker follows the stream: checkout off (the upstream's revision 2), stored at its
    revision before any SDK got it. Another worker then tries to store the flags of a poll
    the upstream answered before that change (checkout on) at the revision it held: the
    file keeps the newer copy (``FlagStore.publish``: each revision one answer, never one
    over a later one), so no worker loads checkout on again."""
    async with Relay(streaming, tmp_path, 60.0) as relay:
        streaming.by_path[STREAM] = Answer(
            200, {"Content-Type": "text/event-stream"}, chunks=relay.chunks
        )
        entry = await relay.following()
        held = entry.changes.revision
        relay.events.put_nowait(sse(("unleash-updated", [OFF])))
        await eventually(lambda: entry.changes.revision == held + 1, "checkout off, streamed")
        await relay.cache.stored(entry)
        other = FlagStore(cache_file(tmp_path, "NORMAL"))  # another worker's connection
        await other._db.open()
        try:
            polled = {**FLAGS, "segments": [], "meta": {"revisionId": 1}}  # checkout on
            older = Copy(json.dumps(polled).encode(), '"1"', time.time(), held)
            assert not await other.publish(entry.scope, older, 60)
            await other.write([Saved(entry.scope, older)], (), 0, 60)  # a tick's write alike

            await relay.cache.tick()
            assert not checkout(entry)
            assert entry.changes.revision == held + 1
            stored = await other.copy(entry.scope)
        finally:
            await other._db.close()
        assert stored is not None and stored.revision == held + 1
        assert not json.loads(stored.body)["features"][0]["enabled"]


async def test_of_two_workers_storing_one_revision_the_upstreams_newer_flags_win(
    streaming: FakeUpstream, tmp_path: Path
) -> None:
    """Two workers reach one revision with other flags: another worker stored a poll's
    answer (checkout on, the upstream's revision 1) at it first; then this worker's stream
    turns checkout off (the upstream's revision 2) at the same revision. Its store loses
    (``publish``), it compares the two, keeps the upstream's newer flags and stores them
    past both, before any of its SDKs got them: every worker ends at checkout off."""
    async with Relay(streaming, tmp_path, 60.0) as relay:
        streaming.by_path[STREAM] = Answer(
            200, {"Content-Type": "text/event-stream"}, chunks=relay.chunks
        )
        entry = await relay.following()
        held = entry.changes.revision
        other = FlagStore(cache_file(tmp_path, "NORMAL"))  # another worker's connection
        await other._db.open()
        try:
            polled = {**FLAGS, "segments": [], "meta": {"revisionId": 1}}  # checkout on
            older = Copy(json.dumps(polled).encode(), '"1"', time.time(), held + 1)
            assert await other.publish(entry.scope, older, 60)

            relay.events.put_nowait(sse(("unleash-updated", [OFF])))
            await eventually(lambda: entry.changes.revision > held, "checkout off, streamed")
            await relay.cache.stored(entry)
            assert not checkout(entry)
            assert entry.changes.revision == held + 2  # past both
            stored = await other.copy(entry.scope)
        finally:
            await other._db.close()
        assert stored is not None and stored.revision == held + 2
        assert not json.loads(stored.body)["features"][0]["enabled"]


async def test_a_newer_copy_stored_while_a_refresh_fails_is_taken(
    upstream: FakeUpstream, tmp_path: Path
) -> None:
    """A worker refreshing a scope skips the copies other workers store meanwhile (its
    answer is newer); the refresh fails (the upstream is down). The copy another worker
    stored while it was in flight, newer than the one held, is then taken at the next tick
    (before, it was passed over for good: the worker served the older flags through the
    whole outage, while the others served the newer)."""
    principal = parse_key(DEV_KEY, KeyType.CLIENT).principal
    scope = FlagScope(principal.environment, tuple(sorted(principal.projects)))
    on, off = (json.dumps(with_checkout(e)).encode() for e in (True, False))
    answered = asyncio.Event()
    upstream.by_path[DELTA] = Answer(503, hold=answered)  # down, once it answers
    async with Relay(upstream, tmp_path, 60.0) as relay:
        other = FlagStore(cache_file(tmp_path, "NORMAL"))  # another worker's connection
        await other._db.open()
        try:
            await other.write([Saved(scope, Copy(on, '"1"', time.time() - 120, 5))], (), 0, 60)
            await relay.cache.start()  # the copy stored, then due: refreshed
            [entry] = relay.cache.copies()
            assert checkout(entry) and entry.task is not None
            await eventually(lambda: delta_polls(upstream), "the refresh asked")
            await other.write([Saved(scope, Copy(off, '"2"', time.time(), 6))], (), 0, 60)
            await relay.cache.tick()  # skipped: the refresh is newer
            answered.set()
            await eventually(lambda: entry.task is None, "the refresh failed")
        finally:
            await other._db.close()

        await relay.cache.tick()
        assert not checkout(entry)
        assert entry.changes.revision == 6


async def test_a_client_at_another_workers_revision_is_not_hydrated_with_older_flags(
    streaming: FakeUpstream, tmp_path: Path
) -> None:
    """An SDK got checkout off at revision N+1 from another worker (which follows the
    stream), and reconnects to this one, still at N (checkout on): it loads the other
    worker's copy within two ticks. The SDK waits for it (``CATCH_UP`` at most) and is told
    nothing changed; before, it was hydrated at once with checkout on, and got checkout off
    again a tick later."""
    async with Relay(streaming, tmp_path, 60.0) as relay:
        await relay.cache.start()
        [entry] = relay.cache.copies()
        await eventually(lambda: entry.task is None, "the first fetch")
        await relay.cache.tick()  # written
        held = entry.changes.revision
        principal = parse_key(DEV_KEY, KeyType.CLIENT).principal
        asked = asyncio.create_task(
            FlagDeltas(relay.cache).for_key(DEV_KEY, principal).delta(entry.base, held + 1)
        )
        for _ in range(3):
            await asyncio.sleep(0)
        assert not asked.done()  # waits for the revision the SDK named

        other = FlagStore(cache_file(tmp_path, "NORMAL"))  # the other worker's connection
        await other._db.open()
        try:
            off = json.dumps({**with_checkout(False), "meta": {"revisionId": 2}}).encode()
            await other.write([Saved(entry.scope, Copy(off, "", time.time(), held + 1))], (), 0, 60)
        finally:
            await other._db.close()
        await relay.cache.tick()  # loads it
        found = await asyncio.wait_for(asked, 10)
        assert (found.events, found.revision) == (0, held + 1)  # nothing the SDK lacks
