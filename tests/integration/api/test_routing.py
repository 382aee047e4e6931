"""What every route answers whatever it serves: HEAD wherever GET is, and headers on every
answer, errors included."""

from __future__ import annotations

import asyncio
from typing import Any

from conftest import ADMIN_KEY, DEV_KEY, auth

HEADED = [
    ("/api/client/features", DEV_KEY),
    ("/api/admin/projects/default", ADMIN_KEY),
    ("/api/admin/metrics/applications", ADMIN_KEY),
    ("/health", None),
    ("/docs/openapi.json", None),
]
STREAMED = [
    "/api/admin/metrics/applications",
    "/api/admin/client-metrics/features/checkout/raw",
]


async def test_every_get_route_answers_head_with_the_headers_of_its_get(client: Any) -> None:
    for path, key in HEADED:
        headers = auth(key) if key else {}
        got = await client.get(path, headers=headers)
        head = await client.head(path, headers=headers)
        assert head.status == got.status == 200, path
        assert await head.read() == b"", path
        for name in ("Content-Type", "Content-Length", "ETag"):
            assert head.headers.get(name) == got.headers.get(name), (path, name)
    refused = await client.head("/api/client/features")
    assert refused.status == 401


async def test_every_answer_says_nosniff(client: Any) -> None:
    answers = [
        await client.get("/api/client/features", headers=auth(DEV_KEY)),  # 200 JSON
        await client.get("/api/client/features"),  # 401
        await client.get("/api/nothing-here"),  # 404, no route
        await client.post("/health"),  # 405
        await client.post("/api/client/metrics/bulk", data=b"{", headers=auth(DEV_KEY)),  # 400
        await client.get("/docs/openapi.json"),
    ]
    for response in answers:
        assert response.headers["X-Content-Type-Options"] == "nosniff", response.url


async def test_a_head_answer_carries_no_body_bytes_on_the_connection(client: Any) -> None:
    """A streamed answer (a paged admin read) to HEAD wrote its body unframed after the
    headers: on a kept-alive connection (a proxy's, shared by many clients) those bytes
    are read as the answer to the next request. Each HEAD must end at its headers."""
    reader, writer = await asyncio.open_connection(client.server.host, client.server.port)
    for path in STREAMED:
        head = f"HEAD {path} HTTP/1.1\r\nHost: relay\r\nAuthorization: {ADMIN_KEY}\r\n\r\n"
        writer.write(head.encode())
    writer.write(b"GET /health HTTP/1.1\r\nHost: relay\r\nConnection: close\r\n\r\n")
    raw = await asyncio.wait_for(reader.read(), 30)
    writer.close()
    answers = raw.split(b"\r\n\r\n")
    statuses = [part.split(b"\r\n", 1)[0] for part in answers[:-1]]
    assert statuses == [b"HTTP/1.1 200 OK"] * (len(STREAMED) + 1), raw[:2000]
