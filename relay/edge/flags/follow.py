"""Following the upstream's stream of a scope's flags (``GET {upstream}/api/client/streaming``
with a key of the scope, as our standalone, another relay and Unleash Enterprise offer it),
instead of polling: each ``unleash-connected`` and ``unleash-updated`` applied to the flags
held gives a new copy of the answer, which the flag cache takes as it takes a fetched one
(``relay.edge.flags.revisions`` turns it into the relay's own events).

One worker follows a scope: the one that fetched it first or claimed its refresh; while it
does, it confirms the copy every tick, which moves the scope's ``due_at`` on, so no other
worker claims it (they load the copies from ``cache.db``). A stream refused, not offered,
that fails or that tells the relay to poll (``fetch-mode``) ends; the scope is polled, and
its stream tried again after ``RETRY`` seconds (``NOT_OFFERED`` when the upstream has none).
"""

from __future__ import annotations

import asyncio
import enum
import time
from collections.abc import AsyncIterator, Callable, Mapping

import aiohttp

from relay.edge.flags.entries import Entry
from relay.edge.flags.fetch import NOT_OFFERED, UPSTREAM_SPEC, Fetcher, Flags
from relay.edge.flags.store import Copy
from relay.edge.upstream import MAX_ANSWER_BYTES, UpstreamClient, UpstreamUnavailable

SILENCE = 65.0  # no byte for this long: the stream is dead (keep-alives come every <= 30 s)
RETRY = 30.0
PATH = "/api/client/streaming"


class Ended(enum.Enum):
    FAILED = "failed"  # refused, unreachable, or a stream we cannot read
    NOT_OFFERED = "not offered"  # 404, 405, 501, not server-sent events, fetch-mode: polling


async def follow(
    upstream: UpstreamClient,
    key: str,
    identity: Mapping[str, str],
    copy: Callable[[bytes], None],
) -> Ended:
    """Follows the stream until it ends, handing each new copy to ``copy``."""
    headers = {
        **identity,
        "Authorization": key,
        "Accept": "text/event-stream",
        "Unleash-Client-Spec": UPSTREAM_SPEC,
    }
    try:
        async with upstream.stream(PATH, headers, SILENCE) as response:
            if response.status in (404, 405, 501):
                return Ended.NOT_OFFERED
            if response.status != 200 or response.content_type != "text/event-stream":
                return Ended.FAILED if response.status != 200 else Ended.NOT_OFFERED
            flags = Flags()
            async for event, data in _events(response.content):
                if event == "fetch-mode":
                    return Ended.NOT_OFFERED
                if event in ("unleash-connected", "unleash-updated"):
                    flags.apply(data)
                    copy(flags.answer())
    except (aiohttp.ClientError, TimeoutError, UpstreamUnavailable):
        pass  # gone: polled instead
    except ValueError:
        pass  # events we cannot read: polled instead
    return Ended.FAILED


class Follower:
    """Starts following a scope's stream; when it ends, the scope is polled (``poll``) and
    its stream tried again after a while (``RETRY``, ``NOT_OFFERED``)."""

    def __init__(
        self,
        fetcher: Fetcher,
        take: Callable[[Entry, Copy, bool], bool],
        poll: Callable[[Entry], None],
    ) -> None:
        """``take``: the flag cache's, a copy taken (and stored) as a fetched one."""
        self._fetcher, self._take, self._poll = fetcher, take, poll

    def _copy(self, entry: Entry, body: bytes) -> None:
        """A copy from the stream: taken, and stored before it is served, as a fetched one
        (its ETag the relay's, named after its revision: the stream gives none)."""
        if self._take(entry, Copy(body, "", time.time()), True):
            entry.upstream_etag = f'W/"relay-stream-{entry.changes.revision}"'
            entry.streamed, entry.failing = True, False

    def start(self, entry: Entry, key: str) -> None:
        """Follows ``entry``'s stream with ``key``, unless it does or may not yet."""
        if entry.follow is None and time.monotonic() >= entry.stream_after:
            entry.follow = asyncio.create_task(self._follow(entry, key), name="flag-follow")

    async def _follow(self, entry: Entry, key: str) -> None:
        fetcher = self._fetcher
        try:
            ended = await follow(
                fetcher.upstream, key, fetcher.identity, lambda body: self._copy(entry, body)
            )
        finally:
            followed, entry.follow, entry.streamed = entry.streamed, None, False
        wait = NOT_OFFERED if ended is Ended.NOT_OFFERED else RETRY
        entry.stream_after = time.monotonic() + wait
        if followed:  # changes may have been missed since: polled at once (else when due)
            self._poll(entry)


async def _events(content: aiohttp.StreamReader) -> AsyncIterator[tuple[str, str]]:
    """(event, data) of each server-sent event; comments and ids skipped. An event's data
    is bounded as one line is (``MAX_ANSWER_BYTES``): ``data:`` lines that never end in
    the blank line ending an event must not be held without bound."""
    event, data, size = "message", list[str](), 0
    async for line in _lines(content):
        if not line:
            if data:
                yield event, "\n".join(data)
            event, data, size = "message", list[str](), 0
        elif line.startswith("event:"):
            event = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))
            size += len(line) + 1  # an empty data line costs its place in the list too
            if size > MAX_ANSWER_BYTES:
                raise ValueError("an event too large")


async def _lines(content: aiohttp.StreamReader) -> AsyncIterator[str]:
    """Lines of any length up to ``MAX_ANSWER_BYTES`` (aiohttp's ``readline`` stops at 128
    KiB, and a hydration is one line)."""
    held: list[bytes] = []
    size = 0
    async for chunk in content.iter_any():
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            line = b"".join([*held, chunk[start:end]])
            held, size, start = [], 0, end + 1
            yield line.rstrip(b"\r").decode()
        held.append(chunk[start:])
        size += len(chunk) - start
        if size > MAX_ANSWER_BYTES:
            raise ValueError("an event too large")
