"""Server-sent events read as SDKs read them, and the memory a stream costs."""

from __future__ import annotations

import asyncio
import gc
import json
import socket
import tracemalloc
from typing import Any

from service import eventually

from relay.api.streaming import STREAMS

STREAM = "/api/client/streaming"


class Events:
    """The events (and comments) of one open stream, read as they come."""

    def __init__(self, response: Any) -> None:
        self.response = response

    async def next(self, within: float = 10.0) -> dict[str, Any]:
        """The next event or comment: {"event", "id", "data"} or {"comment"}; {"end"} when
        the stream ended."""
        fields: dict[str, Any] = {}
        async with asyncio.timeout(within):
            while True:
                line = (await self.response.content.readline()).decode()
                if line == "":
                    return {"end": True}
                line = line.rstrip("\n")
                if line == "":
                    if fields:
                        return fields
                    continue
                if line.startswith(":"):
                    fields["comment"] = line[1:].strip()
                    continue
                name, _, value = line.partition(": ")
                fields[name] = json.loads(value) if value.startswith("{") else value


async def memory_per_stream(client: Any, key: str, count: int = 300) -> float:
    """Bytes of Python objects ``count`` streams of ``key`` hold in ``client``'s app, each."""
    loop, socks = asyncio.get_running_loop(), []
    request = f"GET {STREAM} HTTP/1.1\r\nHost: x\r\nAuthorization: {key}\r\n\r\n".encode()
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        for _ in range(count):
            sock = socket.socket()
            sock.setblocking(False)
            await loop.sock_connect(sock, (client.host, client.port))
            await loop.sock_sendall(sock, request)
            socks.append(sock)
        await eventually(lambda: client.app[STREAMS].total == count, "every stream to open")
        await asyncio.sleep(0.2)
        gc.collect()
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
        for sock in socks:
            sock.close()
    return sum(stat.size_diff for stat in after.compare_to(before, "filename")) / count
