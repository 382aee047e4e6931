"""Input limits and slow clients: each documented limit is enforced, with a 4xx, never a 5xx."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import DEV_KEY, assert_error, auth, bulk, metric
from rawhttp import exchange
from service import running

from relay.wire.common import MAX_METRICS


@pytest.mark.process
def test_slow_headers_and_slow_bodies_are_cut_off(tmp_path: Path) -> None:
    env = {
        "RELAY_IDLE_TIMEOUT": "1",
        "RELAY_BODY_TIMEOUT": "1",
        "RELAY_INIT_CLIENT_API_TOKENS": DEV_KEY,
    }
    with running(tmp_path, env=env) as service:
        answer, took = exchange(
            service.port, b"POST /api/client/metrics/bulk HTTP/1.1\r\nHost: x\r\n"
        )
        assert answer == b"" and took < 8  # closed, not held open for a slowloris
        head = (
            f"POST /api/client/metrics/bulk HTTP/1.1\r\nHost: x\r\nAuthorization: {DEV_KEY}\r\n"
            "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"
        ).encode()
        answer, took = exchange(service.port, head)
        status_line, _, rest = answer.partition(b"\r\n")
        assert b" 408 " in status_line, answer[:200]
        body = json.loads(rest.split(b"\r\n\r\n", 1)[1])
        assert_error(body, "RequestTimeoutError")
        assert took < 8


@pytest.mark.process
def test_too_many_or_too_long_headers_are_400(tmp_path: Path) -> None:
    """aiohttp's HTTP parser refuses these before the application (plain-text body)."""
    with running(tmp_path) as service:
        many = "".join(f"X-H{i}: v\r\n" for i in range(200))
        answer, _ = exchange(
            service.port, f"GET /health HTTP/1.1\r\nHost: x\r\n{many}\r\n".encode()
        )
        assert answer.split(b" ")[1] == b"400", answer[:100]
        long = "X-Long: " + "a" * 9000
        answer, _ = exchange(
            service.port, f"GET /health HTTP/1.1\r\nHost: x\r\n{long}\r\n\r\n".encode()
        )
        assert answer.split(b" ")[1] in (b"400", b"431"), answer[:100]


async def test_deeply_nested_json_is_400(client: Any) -> None:
    nested = "[" * 5000 + "]" * 5000
    raw = f'{{"applications": [], "metrics": [], "extra": {nested}}}'.encode()
    response = await client.post(
        "/api/client/metrics/bulk",
        data=raw,
        headers={**auth(DEV_KEY), "Content-Type": "application/json"},
    )
    assert response.status == 400
    assert_error(await response.json(), "BadDataError")


async def test_entries_per_request_are_capped(client: Any) -> None:
    ok = bulk([metric(feature=f"f{i}", yes=1) for i in range(MAX_METRICS)])
    response = await client.post("/api/client/metrics/bulk", json=ok, headers=auth(DEV_KEY))
    assert response.status == 202
    over = bulk([metric(feature="f", yes=1)] * (MAX_METRICS + 1))
    response = await client.post("/api/client/metrics/bulk", json=over, headers=auth(DEV_KEY))
    assert response.status == 400
    error = await response.json()
    assert_error(error, "BadDataError")
    assert error["details"][0]["path"] == "/body/metrics"


async def test_a_client_that_hangs_up_mid_commit_does_not_break_the_server(client: Any) -> None:
    tasks = [
        asyncio.create_task(
            client.post(
                "/api/client/metrics/bulk", json=bulk([metric(yes=1)]), headers=auth(DEV_KEY)
            )
        )
        for _ in range(20)
    ]
    await asyncio.sleep(0)
    for task in tasks[::2]:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    response = await client.post(
        "/api/client/metrics/bulk", json=bulk([metric(yes=1)]), headers=auth(DEV_KEY)
    )
    assert response.status == 202
