"""What an operator reads (issue 17): the access log, the upstream's recovery, the final
flush's leftovers and why, a relay started without upstream keys, ``relay --version``."""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path
from typing import Any

import pytest
from clikit import relay
from conftest import ADMIN_KEY, DEV_KEY, auth, bulk, metric
from fake_upstream import Answer, FakeUpstream
from service import eventually

FEATURE = "secret-named-feature"


def lines(caplog: pytest.LogCaptureFixture, message: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.getMessage() == message]


async def test_one_access_line_per_request_with_the_route_template_and_no_key(
    make_client: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    client = await make_client()
    posted = await client.post(
        "/api/client/metrics/bulk", json=bulk([metric()]), headers=auth(DEV_KEY)
    )
    assert posted.status == 202
    read = await client.get(
        f"/api/admin/client-metrics/features/{FEATURE}/raw?hoursBack=2", headers=auth(ADMIN_KEY)
    )
    body = await read.read()
    assert (await client.get("/health")).status == 200
    access = [r for r in caplog.records if r.name == "relay.access"]
    by_route = {r.route: r for r in access}  # type: ignore[attr-defined]
    ingest = by_route["/api/client/metrics/bulk"]
    assert (ingest.levelno, ingest.method, ingest.status) == (logging.INFO, "POST", 202)  # type: ignore[attr-defined]
    assert 0 < ingest.bytes < 400  # type: ignore[attr-defined]  # headers, no body
    raw = by_route["/api/admin/client-metrics/features/{featureName}/raw"]
    assert raw.status == 200 and raw.bytes > len(body) > 0  # type: ignore[attr-defined]
    assert raw.duration_ms >= 0  # type: ignore[attr-defined]
    assert by_route["/health"].levelno == logging.DEBUG  # probes: every few seconds
    everything = " ".join(str(vars(r)) for r in access)
    for secret in (DEV_KEY, ADMIN_KEY, FEATURE, "hoursBack"):
        assert secret not in everything


async def test_the_access_log_counts_the_time_a_request_waited_to_be_read(
    make_client: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A poll that arrives while the event loop is held waits in its socket: on main it
    was logged as the fraction of a millisecond its handler took (a 32 s wait as 0.2 ms)."""
    caplog.set_level(logging.INFO)
    client = await make_client()
    reader, writer = await asyncio.open_connection(client.server.host, client.server.port)
    writer.write(
        f"GET /api/client/features HTTP/1.1\r\nHost: x\r\nAuthorization: {DEV_KEY}\r\n"
        "Connection: close\r\n\r\n".encode()
    )  # sent now, into the server's socket
    time.sleep(1.0)  # noqa: ASYNC251 -- the event loop held, as a long computation holds it
    answer = await reader.read()
    writer.close()
    assert answer.startswith(b"HTTP/1.1 200")
    [poll] = [r for r in caplog.records if getattr(r, "route", "") == "/api/client/features"]
    assert poll.duration_ms >= 1000  # type: ignore[attr-defined]


async def test_the_access_log_can_be_switched_off(
    make_client: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    client = await make_client(access_log=False)
    assert (await client.get("/api/admin/api-tokens", headers=auth(ADMIN_KEY))).status == 200
    assert not [r for r in caplog.records if r.name == "relay.access"]


async def test_the_upstream_recovering_after_failures_is_logged(
    make_relay: Any, upstream: FakeUpstream, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    upstream.script = [Answer(503), Answer(503)]
    client = await make_relay(backoff_max=0.1)
    response = await client.post(
        "/api/client/metrics/bulk", json=bulk([metric(yes=1)]), headers=auth(DEV_KEY)
    )
    assert response.status == 202
    await eventually(lambda: lines(caplog, "upstream recovered"), "the recovery logged")
    [recovered] = lines(caplog, "upstream recovered")
    assert recovered.failures == 2  # type: ignore[attr-defined]
    assert upstream.totals() == {("f1", "app"): (1, 0)}


async def test_the_final_flush_says_how_many_entries_stayed_and_why(
    make_relay: Any, upstream: FakeUpstream, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    upstream.default = Answer(401)  # the relay's key is refused: nothing can leave
    client = await make_relay(flush_interval=3600)
    metrics = [metric(feature=f"f{i}", yes=1) for i in range(3)]
    response = await client.post(
        "/api/client/metrics/bulk", json=bulk(metrics), headers=auth(DEV_KEY)
    )
    assert response.status == 202
    await client.close()
    [final] = lines(caplog, "final flush")
    assert final.drained is False and final.left_buffered == 3  # type: ignore[attr-defined]
    assert final.why == "upstream refused the key of development"  # type: ignore[attr-defined]


async def test_a_relay_without_upstream_keys_warns_at_start(
    make_relay: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    await make_relay(upstream_tokens=[])
    [warning] = [r for r in caplog.records if r.getMessage().startswith("no upstream keys")]
    assert warning.levelno == logging.WARNING


@pytest.mark.process
def test_version(tmp_path: Path) -> None:
    from importlib.metadata import version

    done = relay("--version", cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.strip() == f"relay {version('relay')}"
