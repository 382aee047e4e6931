"""The flusher's decisions (relay.edge.metrics.flusher) over an outbox held in memory, sending
to the small scriptable upstream on a real socket: what is acknowledged, kept, skipped and
set aside, with no buffer file."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Collection
from contextlib import asynccontextmanager

import pytest
from conftest import DEV_KEY, PROD_KEY
from fake_upstream import Answer, FakeUpstream

from relay.api.shared import Layout, Shared
from relay.edge.metrics.flusher import Flusher
from relay.edge.metrics.keys import Notes, UpstreamKeys
from relay.edge.upstream import UpstreamClient
from relay.store.outbox import OutboxBatch

BODY = b'{"applications": [], "metrics": []}'


class MemoryOutbox:
    """Batches cut already, by id; nothing left to claim; a batch cannot be split."""

    def __init__(self, *environments: str) -> None:
        self.batches = {
            n: OutboxBatch(n, env, f"key-{n}", BODY, 1) for n, env in enumerate(environments, 1)
        }
        self.acked: list[int] = []
        self.dead: list[tuple[int, int | None]] = []

    @asynccontextmanager
    async def sending(self, batch: OutboxBatch) -> AsyncIterator[bool]:
        yield batch.id in self.batches

    async def claim(self, environments: Collection[str], max_entries: int) -> bool:
        return False

    async def pending(self, environments: Collection[str], limit: int) -> list[OutboxBatch]:
        waiting = [b for b in self.batches.values() if b.environment in environments]
        return sorted(waiting, key=lambda b: (b.attempts, b.id))[:limit]

    async def ack(self, batch: OutboxBatch) -> None:
        del self.batches[batch.id]
        self.acked.append(batch.id)

    async def record_failure(self, batch: OutboxBatch, error: str) -> None:
        held = self.batches[batch.id]
        self.batches[batch.id] = dataclasses.replace(held, attempts=held.attempts + 1)

    async def split(self, batch: OutboxBatch) -> bool:
        return False

    async def dead_letter(self, batch: OutboxBatch, status: int | None, reason: str) -> None:
        del self.batches[batch.id]
        self.dead.append((batch.id, status))

    async def environments(self) -> set[str]:
        return {b.environment for b in self.batches.values()}


@pytest.fixture
async def client(upstream: FakeUpstream) -> AsyncIterator[UpstreamClient]:
    client = UpstreamClient(str(upstream.server.make_url("")).rstrip("/"), 5.0)
    await client.open()
    yield client
    await client.close()


def flusher(outbox: MemoryOutbox, client: UpstreamClient) -> Flusher:
    keys = {"development": DEV_KEY, "production": PROD_KEY}
    notes = Notes(Shared.private(Layout.of(1, 10)))

    async def no_room() -> bool:
        return False

    return Flusher(
        outbox,
        client,
        UpstreamKeys(keys, lambda environment: None, notes),
        interval=1.0,
        backoff_max=60.0,
        final_timeout=1.0,
        on_disk_full=no_room,
        space=None,  # type: ignore[arg-type]  # only the final flush reads it, never run here
    )


async def test_a_batch_failing_alone_is_skipped_and_the_others_go(
    upstream: FakeUpstream, client: UpstreamClient
) -> None:
    outbox = MemoryOutbox("development", "development", "development")
    upstream.script = [Answer(202), Answer(500), Answer(202)]
    assert await flusher(outbox, client).flush()
    assert outbox.acked == [1, 3]
    assert outbox.batches[2].attempts == 1 and not outbox.dead


async def test_a_single_entry_the_upstream_refuses_is_set_aside_with_its_status(
    upstream: FakeUpstream, client: UpstreamClient
) -> None:
    outbox = MemoryOutbox("development", "development")
    upstream.script = [Answer(400), Answer(202)]
    assert await flusher(outbox, client).flush()
    assert outbox.dead == [(1, 400)] and outbox.acked == [2]


async def test_a_refused_key_holds_back_its_environment_only(
    upstream: FakeUpstream, client: UpstreamClient
) -> None:
    outbox = MemoryOutbox("development", "production")
    upstream.script = [Answer(401), Answer(202)]
    assert not await flusher(outbox, client).flush()
    assert outbox.acked == [2] and outbox.batches[1].attempts == 1


async def test_an_upstream_failing_stops_the_flush_and_keeps_every_batch(
    upstream: FakeUpstream, client: UpstreamClient
) -> None:
    outbox = MemoryOutbox("development", "development")
    upstream.script = [Answer(503)]
    sender = flusher(outbox, client)
    assert not await sender.flush()
    assert len(upstream.bulks) == 1 and sorted(outbox.batches) == [1, 2]
    assert not await sender.flush()  # backing off: nothing sent
    assert len(upstream.bulks) == 1
