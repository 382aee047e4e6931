"""A small scriptable upstream on a real socket, for injecting faults into the relay.

It records every request it receives. ``script`` is a list of answers consumed one per bulk
request (then ``default``); an answer is a status, optionally with headers, a delay, or a
rule such as "413 when the body is larger than N bytes". A test configures the rest of its
behaviour through the attributes ``__init__`` names (the hooks), never by subclassing: one
fake, whose every behaviour is documented in one place.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestServer

STREAM = "/api/client/streaming"
"""What a relay follows, when its upstream offers it."""
DELTA = "/api/client/delta"
"""What a relay polls, when its upstream offers it."""


@dataclass
class Answer:
    status: int = 202
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    body: bytes = b""
    too_large_over: int | None = None  # 413 for bodies larger than this
    hold: asyncio.Event | None = None  # answered once this is set (a send kept in flight)
    chunks: Callable[[], AsyncIterator[bytes]] | None = None  # a body written as it comes
    sent: int = 0  # of ``chunks``: the bytes written before the reader went away
    ended: asyncio.Event = field(default_factory=asyncio.Event)  # ``chunks`` written or cut


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    raw_path: str = ""  # the path and query exactly as sent (not decoded)
    at: float = field(default_factory=time.monotonic)

    def json(self) -> Any:
        return json.loads(self.body)


class FakeUpstream:
    def __init__(self, valid_keys: dict[str, str] | None = None) -> None:
        """``valid_keys``: key -> environment, answered by ``/edge/validate``."""
        self.valid_keys = valid_keys or {}
        self.key_types: dict[str, str] = {}  # key -> type /edge/validate answers (client)
        self.admin_keys: set[str] = set()  # vouched for as admin keys of every project
        self.unleash_shape = False  # /edge/validate's tokens without ``environment``, as
        # Unleash's edgeTokenSchema (the environment is inside the key itself)
        self.validate_delay = 0.0  # seconds each /edge/validate waits before answering
        self.validate_hold: asyncio.Event | None = None  # each /edge/validate waits for it
        self.validate_late: asyncio.Event | None = None  # the next /edge/validate is decided
        # when it arrives and sent once this is set (a slow answer, overtaken by a later one)
        self.validate_answer: Answer | None = None  # instead of the keys (a 429, garbage...)
        self.validate_in_flight = 0
        self.most_validate_in_flight = 0
        self.script: list[Answer] = []
        self.default = Answer()
        self.received: list[Received] = []
        self.features: dict[str, Any] = {
            "version": 2,
            "features": [{"name": "f1", "enabled": True, "project": "default", "strategies": []}],
        }
        self.features_etag = '"v1"'
        self.features_answer: Answer | None = None  # instead of the flags (503, a delay...)
        self.refused: dict[str, int] = {}  # key -> 401 or 403 on the flags
        self.features_for: Callable[[str], tuple[Any, str]] | None = None  # key -> its flags
        # and their ETag, answered to any key (instead of ``features`` to ``valid_keys``)
        self.bulk_answer: Callable[[Received], Answer | None] | None = None  # the answer to
        # a bulk body, when it decides one (an upstream refusing bodies for their content)
        self.server: TestServer | None = None
        self.validate_calls = 0
        self.validate_down = False
        # fixed answers of other paths, by path; no stream or delta of flags (as Unleash's
        # open source): the relay polls /api/client/features
        self.by_path: dict[str, Answer] = {STREAM: Answer(404), DELTA: Answer(404)}

    async def start(self) -> str:
        app = web.Application(client_max_size=10 * 1024 * 1024)
        app.router.add_post("/api/client/metrics/bulk", self._bulk)
        app.router.add_post("/edge/validate", self._validate)
        app.router.add_get("/api/client/features", self._features)
        app.router.add_route("*", "/{tail:.*}", self._other)
        self.server = TestServer(app, host="127.0.0.1")
        await self.server.start_server()
        return str(self.server.make_url("")).rstrip("/")

    async def close(self) -> None:
        if self.validate_hold is not None:  # a held key check may not keep the server open
            self.validate_hold.set()
        if self.server is not None:
            await self.server.close()

    @property
    def bulks(self) -> list[Received]:
        return [r for r in self.received if r.path == "/api/client/metrics/bulk"]

    def accepted_bulks(self) -> list[Received]:
        return [r for r in self.bulks if r.headers.get("X-Fake-Status", "202").startswith("2")]

    def totals(self) -> dict[tuple[str, str], tuple[int, int]]:
        """Sum of yes/no per (feature, app) over accepted bulks, each Idempotency-Key once."""
        seen: set[str] = set()
        totals: dict[tuple[str, str], tuple[int, int]] = {}
        for request in self.accepted_bulks():
            key = request.headers.get("Idempotency-Key", "")
            if key in seen:
                continue
            seen.add(key)
            for m in request.json()["metrics"]:
                old = totals.get((m["featureName"], m["appName"]), (0, 0))
                totals[(m["featureName"], m["appName"])] = (old[0] + m["yes"], old[1] + m["no"])
        return totals

    def variants(self) -> dict[tuple[str, str], dict[str, int]]:
        """Sum of each variant's count per (feature, app) over accepted bulks."""
        totals: dict[tuple[str, str], dict[str, int]] = {}
        for request in self.accepted_bulks():
            for m in request.json()["metrics"]:
                into = totals.setdefault((m["featureName"], m["appName"]), {})
                for name, count in m["variants"].items():
                    into[name] = into.get(name, 0) + count
        return totals

    def validated(self) -> list[list[str]]:
        """The keys of each ``/edge/validate`` request received, in order."""
        return [r.json()["tokens"] for r in self.received if r.path == "/edge/validate"]

    def passed(self) -> list[Received]:
        """Requests other than the relay's own flushes, key checks and flag fetches."""
        own = ("/api/client/metrics/bulk", "/edge/validate", "/api/client/features", STREAM, DELTA)
        return [r for r in self.received if r.path not in own]

    async def _record(self, request: web.Request) -> Received:
        received = Received(
            request.method,
            request.path,
            dict(request.headers),
            await request.read(),
            raw_path=request.raw_path,
        )
        self.received.append(received)
        return received

    async def _bulk(self, request: web.Request) -> web.Response:
        received = await self._record(request)
        answer = self.bulk_answer(received) if self.bulk_answer is not None else None
        if answer is None:
            answer = self.script.pop(0) if self.script else self.default
        if answer.delay:
            await asyncio.sleep(answer.delay)
        if answer.hold is not None:
            await answer.hold.wait()
        status = answer.status
        if answer.too_large_over is not None and len(received.body) > answer.too_large_over:
            status = 413
        received.headers["X-Fake-Status"] = str(status)
        return web.Response(status=status, headers=answer.headers, body=answer.body or None)

    async def _validate(self, request: web.Request) -> web.Response:
        """The keys of ``valid_keys`` and ``admin_keys`` among those asked, after the hooks
        ``validate_delay``, ``validate_hold``, ``validate_answer`` and ``validate_late``."""
        self.validate_in_flight += 1
        self.most_validate_in_flight = max(self.most_validate_in_flight, self.validate_in_flight)
        try:
            if self.validate_delay:
                await asyncio.sleep(self.validate_delay)
            if self.validate_hold is not None:
                await self.validate_hold.wait()
            received = await self._record(request)
            self.validate_calls += 1
            if self.validate_answer is not None:
                answer = self.validate_answer
                return web.Response(status=answer.status, body=answer.body, headers=answer.headers)
            if self.validate_down:
                return web.Response(status=503)
            late, self.validate_late = self.validate_late, None
            response = web.json_response({"tokens": self._vouched(received.json()["tokens"])})
            if late is not None:
                await late.wait()
            return response
        finally:
            self.validate_in_flight -= 1

    def _vouched(self, tokens: list[str]) -> list[dict[str, Any]]:
        valid: list[dict[str, Any]] = [
            {
                "token": t,
                "type": self.key_types.get(t, "client"),
                "projects": ["default"],
                "environment": self.valid_keys[t],
            }
            for t in tokens
            if t in self.valid_keys
        ]
        valid += [
            {"token": t, "type": "admin", "projects": ["*"]} for t in tokens if t in self.admin_keys
        ]
        if self.unleash_shape:
            for token in valid:
                token.pop("environment", None)
        return valid

    @property
    def flag_fetches(self) -> list[Received]:
        return [r for r in self.received if r.path.startswith("/api/client/features")]

    async def _features(self, request: web.Request) -> web.Response:
        """The flags of ``features`` to keys of ``valid_keys`` (401 to others, or the status
        ``refused`` gives), ETag and 304, or what ``features_for`` gives any key;
        ``features_answer`` stands in for them."""
        await self._record(request)
        answer = self.features_answer
        if answer is not None:
            await asyncio.sleep(answer.delay)
            if answer.status != 200 or answer.body:
                return web.Response(
                    status=answer.status, body=answer.body or None, headers=answer.headers
                )
        key = request.headers.get("Authorization", "")
        if self.features_for is not None:
            features, etag = self.features_for(key)
            return web.json_response(features, headers={"ETag": etag})
        if key in self.refused or key not in self.valid_keys:
            return web.Response(status=self.refused.get(key, 401))
        if request.headers.get("If-None-Match") == self.features_etag:
            return web.Response(status=304, headers={"ETag": self.features_etag})
        return web.json_response(
            self.features, headers={"ETag": self.features_etag, "fetch-mode": "streaming"}
        )

    async def _other(self, request: web.Request) -> web.Response:
        await self._record(request)
        answer = self.by_path.get(request.path)
        if answer is None:
            answer = self.script.pop(0) if self.script else Answer(200)
        if answer.delay:
            await asyncio.sleep(answer.delay)
        if answer.chunks is not None:
            return await _written(request, answer, answer.chunks())
        if answer.hold is not None:
            await answer.hold.wait()
        return web.Response(
            status=answer.status,
            body=answer.body or None,
            headers={"Content-Type": "application/json", **answer.headers},
        )


async def _written(
    request: web.Request, answer: Answer, chunks: AsyncIterator[bytes]
) -> web.StreamResponse:
    """``chunks`` written one by one until they end or the reader goes away, counted in
    ``answer.sent``."""
    response = web.StreamResponse(status=answer.status, headers=answer.headers)
    await response.prepare(request)
    try:
        async for chunk in chunks:
            await response.write(chunk)
            answer.sent += len(chunk)
    except ConnectionError:
        pass
    finally:
        answer.ended.set()
    return response
