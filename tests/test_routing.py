"""What every route answers whatever it serves: HEAD wherever GET is, and headers on every
answer, errors included."""

from __future__ import annotations

from typing import Any

from conftest import ADMIN_KEY, DEV_KEY, auth

HEADED = [
    ("/api/client/features", DEV_KEY),
    ("/api/admin/projects/default", ADMIN_KEY),
    ("/api/admin/metrics/applications", ADMIN_KEY),
    ("/health", None),
    ("/docs/openapi.json", None),
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
