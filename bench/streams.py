"""Benchmark of ``GET /api/client/streaming``: many streams held open by one standalone
worker, then by a relay (one worker) in front of it, what they cost, how fast a change
reaches all of them, and whether polling SDKs notice.

    python bench/streams.py                   # 10,000 streams at each
    python bench/streams.py --streams 2000
    python bench/streams.py --smoke           # 50 streams, for CI (no figure asserted)

A standalone (one worker, SQLite) gets 20 flags; this process opens the streams (plain
sockets, one event loop) and reads each one's ``unleash-connected``. Then the same again
at a relay (``client_tokens``: the streams' key) that follows the standalone's stream: one
upstream connection, the streams held at the relay. Printed, one JSON line per target:
the server's RSS and PSS before and with the streams, and their difference per stream;
for 5 changes made through the standalone's admin API (each flips a flag from the state
the benchmark holds, so each one is a change the relay's copy sees), the time from the
admin request to its answer, and to the first and the last stream having the change
(``unleash-updated`` read); and ``GET /api/client/features`` latency at the target (p50,
p99 of sequential polls with an ETag, from a process of their own) with no streams, with
the streams idle, and while the changes go out. The client and the server share the
machine: the times include this process reading 10,000 sockets.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import resource
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from servers import ADMIN, CLIENT, Server, relay, scrape, start, wait_until
from wrk import latency

FLAGS = 20
CHANGES = 5


def call(url: str, method: str, body: Any = None) -> Any:
    request = urllib.request.Request(
        url,
        data=None if body is None else json.dumps(body).encode(),
        method=method,
        headers={"Authorization": ADMIN, "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        raw = response.read()
        return json.loads(raw) if raw else None


def polls(url: str, count: int) -> dict[str, float]:
    """Sequential polls with the ETag (304s), as SDKs poll: their latency."""
    headers = {"Authorization": CLIENT, "Unleash-Client-Spec": "5.2.0"}
    with urllib.request.urlopen(
        urllib.request.Request(f"{url}/api/client/features", headers=headers), timeout=60
    ) as first:
        etag = first.headers["ETag"]
    samples = []
    for _ in range(count):
        started = time.perf_counter()
        request = urllib.request.Request(
            f"{url}/api/client/features", headers={**headers, "If-None-Match": etag}
        )
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                response.read()
        except urllib.error.HTTPError as exc:  # 304 is raised by urllib
            exc.close()
        samples.append(time.perf_counter() - started)
    return latency(samples)


class Stream:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    async def event(self, name: bytes) -> None:
        """Reads until an event of this name has been read whole."""
        seen = False
        while True:
            line = await self.reader.readline()
            if not line:
                raise ConnectionError("the stream ended")
            if line == b"event: " + name + b"\n":
                seen = True
            elif line == b"\n" and seen:
                return


async def open_streams(host: str, port: int, count: int) -> list[Stream]:
    request = (
        f"GET /api/client/streaming HTTP/1.1\r\nHost: {host}\r\nAuthorization: {CLIENT}\r\n"
        "Unleash-Client-Spec: 5.2.0\r\n\r\n"
    ).encode()

    async def one() -> Stream:
        reader, writer = await asyncio.open_connection(host, port, limit=1 << 20)
        writer.write(request)
        stream = Stream(reader, writer)
        await stream.event(b"unleash-connected")
        return stream

    streams: list[Stream] = []
    for start_at in range(0, count, 500):  # in waves: the listen queue is finite
        streams += await asyncio.gather(*(one() for _ in range(min(500, count - start_at))))
    return streams


async def changes(
    admin: Server, streams: list[Stream], enabled: dict[str, bool]
) -> list[dict[str, float]]:
    """Each change: seconds from the admin request to its answer (the write committed), and
    to the first and the last stream having the change. Each flips a flag of ``enabled``
    (the flags' state, kept here): turning a flag on that is on is a write the standalone
    announces but no change of a relay's copy, which no relay stream would ever get."""
    loop, figures = asyncio.get_running_loop(), []
    for i in range(CHANGES):
        name = f"flag-{i % FLAGS:02d}"
        enabled[name] = on = not enabled[name]
        path = f"/api/admin/projects/default/features/{name}/environments"
        url = f"{admin.url}{path}/development/{'on' if on else 'off'}"
        arrived: list[float] = []

        readers = [asyncio.ensure_future(_arrival(s, arrived)) for s in streams]
        sent = time.perf_counter()
        await loop.run_in_executor(None, call, url, "POST")
        answered = time.perf_counter() - sent
        await asyncio.gather(*readers)
        first, last = min(arrived) - sent, max(arrived) - sent
        figures.append(
            {"write_s": round(answered, 3), "first_s": round(first, 3), "last_s": round(last, 3)}
        )
    return figures


async def _arrival(stream: Stream, arrived: list[float]) -> None:
    await stream.event(b"unleash-updated")
    arrived.append(time.perf_counter())


async def measure(
    server: Server,
    admin: Server,
    enabled: dict[str, bool],
    count: int,
    poll_count: int,
    poller: ProcessPoolExecutor,
) -> dict[str, Any]:
    """The figures of ``count`` streams held by ``server``, the changes made at ``admin``."""
    host, port = "127.0.0.1", server.service.port
    loop = asyncio.get_running_loop()
    idle_polls = await loop.run_in_executor(poller, polls, server.url, poll_count)
    rss, pss = server.rss_mb(), server.pss_mb()
    started = time.perf_counter()
    streams = await open_streams(host, port, count)
    opened = time.perf_counter() - started
    await asyncio.sleep(1)
    rss_with, pss_with = server.rss_mb(), server.pss_mb()
    with_streams = await loop.run_in_executor(poller, polls, server.url, poll_count)
    during = loop.run_in_executor(poller, polls, server.url, poll_count)
    spread = await changes(admin, streams, enabled)
    for stream in streams:
        stream.writer.close()
    return {
        "target": server.name,
        "streams": count,
        "opened_s": round(opened, 2),
        "rss_mb": [round(rss, 1), round(rss_with, 1)],
        "pss_mb": [round(pss, 1), round(pss_with, 1)],
        "kib_per_stream": round((rss_with - rss) * 1024 / count, 1),
        "changes": spread,
        "polls_no_streams": idle_polls,
        "polls_streams_idle": with_streams,
        "polls_during_changes": await during,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=int, default=10_000)
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    count, poll_count = (50, 20) if args.smoke else (args.streams, 300)
    # inherited by the servers: each holds ``count`` sockets, as this process does
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    if hard < count + 100:
        sys.exit(f"open files limit {hard} is below {count} streams")
    bounds = {"RELAY_STREAM_MAX": str(count), "RELAY_STREAM_MAX_PER_KEY": str(count)}
    with tempfile.TemporaryDirectory() as directory, contextlib.ExitStack() as stack:
        # the standalone holds the benchmark's streams and the relay's
        env = {"RELAY_INIT_ADMIN_API_TOKENS": ADMIN, "RELAY_INIT_CLIENT_API_TOKENS": CLIENT}
        env |= {"RELAY_STREAM_MAX": str(count + 1), "RELAY_STREAM_MAX_PER_KEY": str(count + 1)}
        server = start("standalone", Path(directory) / "standalone", env)
        stack.callback(server.stop)
        features = f"{server.url}/api/admin/projects/default/features"
        enabled: dict[str, bool] = {}
        for i in range(FLAGS):
            call(features, "POST", {"name": f"flag-{i:02d}"})
            call(f"{features}/flag-{i:02d}/environments/development/on", "POST")
            enabled[f"flag-{i:02d}"] = True
        front = relay(Path(directory), server, 1, extra=bounds)
        stack.callback(front.stop)
        # else the changes would reach the relay by its polls (every 15 s)
        wait_until(lambda: _streams(server) == 1, "the relay following the standalone's stream")
        poller = stack.enter_context(ProcessPoolExecutor(1))  # apart: this loop reads streams
        for target in (server, front):
            # the streams closed before are noticed at their next keep-alive (15 s)
            wait_until(lambda: _streams(server) == 1, "the standalone's streams closed")
            figures = measure(target, server, enabled, count, poll_count, poller)
            print(json.dumps(asyncio.run(figures)), flush=True)


def _streams(server: Server) -> float:
    return scrape(server.url, "relay_streams")


if __name__ == "__main__":
    main()
