"""The Frontend API against a hostile caller holding a frontend key (public: shipped in
browser code): what one request, or many, can make the service spend.

Over real sockets (aiohttp's test client on the standalone); each test pins a bound that
an input once broke.
"""

from __future__ import annotations

import asyncio
import gc
import time
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from conftest import ADMIN_KEY, MakeClient, auth
from flagkit import FEATURES, add_strategy, create_flag, env_path, http, rollout, turn
from frontkit import FRONT_KEY
from service import free_port, running, sample, wait_until

NUMBERS = 20  # flags with a number constraint on the same property


@pytest.fixture
async def numbered(make_client: MakeClient) -> Any:
    client = await make_client(init_frontend_api_tokens=[FRONT_KEY])
    for i in range(NUMBERS):
        await create_flag(client, f"num-{i}")
        constraint = {"contextName": "n", "operator": "NUM_GT", "value": str(i)}
        await add_strategy(client, f"num-{i}", {"name": "default", "constraints": [constraint]})
        await turn(client, f"num-{i}")
    return client


async def test_a_long_number_looking_value_costs_linear_time(numbered: Any) -> None:
    """A context value of digits ending in a letter, read by a number constraint: the reading
    backtracked over every split of the digits (quadratic: 0.7 s for 8,000 digits, per
    constraint, so 14 s of the one event loop for this query). Now linear: the query is
    answered like any other (the deadline is 5x a loaded machine's worst, not a benchmark)."""
    hostile = "1" * 8000 + "x"
    started = time.monotonic()
    response = await numbered.get(f"/api/frontend?n={hostile}", headers=auth(FRONT_KEY))
    elapsed = time.monotonic() - started
    assert response.status == 200
    assert (await response.json())["toggles"] == []  # not a number: no constraint holds
    assert elapsed < 3, f"{elapsed:.1f} s for one request"
    big = await numbered.get("/api/frontend?n=" + "9" * 8000, headers=auth(FRONT_KEY))
    assert len((await big.json())["toggles"]) == NUMBERS  # a long number is still a number


async def test_kept_answers_cost_their_bound_whatever_the_contexts_size(
    numbered: Any,
) -> None:
    """Answers are kept per context; the bound in bytes counted each answer's body, not the
    context it was kept under, so 100 properties of 4 kB each (a 400 kB body, allowed)
    kept 400 kB per answer outside the count. Now a kept answer costs its body and a
    fixed-size key, whatever the context: 30 such contexts keep well under 1 MB."""
    context = {f"p{k}": "v" * 4000 for k in range(99)}
    posts = 30

    async def post(i: int) -> None:
        body = {"context": {**context, "userId": f"user-{i}"}}
        response = await numbered.post("/api/frontend", json=body, headers=auth(FRONT_KEY))
        assert response.status == 200, await response.text()
        await response.read()

    async def traced(first: int, count: int) -> int:
        for i in range(first, first + count):
            await post(i)
        await asyncio.sleep(0)
        gc.collect()
        return tracemalloc.get_traced_memory()[0]

    tracemalloc.start()
    try:
        # what one request leaves until the next (its body, pools) is there at both counts
        before = await traced(-3, 3)
        grown = await traced(0, posts) - before
    finally:
        tracemalloc.stop()
    assert grown < 1024 * 1024, f"{grown / posts / 1024:.0f} kB kept per answer"


async def test_an_answer_hashed_on_the_clock_is_never_kept(make_client: MakeClient) -> None:
    """A rollout or variant sticky on ``currentTime`` hashes the server's clock: its
    answers vary from one request to the next, so they are never kept (counted
    ``varying``), as a date constraint's are; only ``contextName`` was looked at."""
    client = await make_client(init_frontend_api_tokens=[FRONT_KEY])
    await create_flag(client, "ticking")
    await add_strategy(client, "ticking", rollout(50, stickiness="currentTime"))
    await turn(client, "ticking")

    async def count(source: str) -> float:
        text = await (await client.get("/internal-backstage/metrics")).text()
        return sample(text, "relay_frontend_answers_total", source=source)

    before = await count("varying")
    for _ in range(3):
        response = await client.get("/api/frontend?userId=u1", headers=auth(FRONT_KEY))
        assert response.status == 200
    assert await count("varying") - before == 3


async def test_an_answer_is_kept_when_its_evaluation_did_not_read_the_clock(
    make_client: MakeClient,
) -> None:
    """A date on the clock behind a user gate is read only for the gate's users: everyone
    else's answer cannot change and is kept (the scope as a whole once counted varying)."""
    client = await make_client(init_frontend_api_tokens=[FRONT_KEY])
    await create_flag(client, "launch")
    gate = {"contextName": "userId", "operator": "IN", "values": ["vip"]}
    clock = {
        "contextName": "currentTime",
        "operator": "DATE_AFTER",
        "value": "2020-01-01T00:00:00Z",
    }
    await add_strategy(client, "launch", {"name": "default", "constraints": [gate, clock]})
    await turn(client, "launch")

    async def counts() -> dict[str, float]:
        text = await (await client.get("/internal-backstage/metrics")).text()
        found = ("evaluated", "kept", "varying")
        return {s: sample(text, "relay_frontend_answers_total", source=s) for s in found}

    before = await counts()
    for user in ("vip", "vip", "ann", "ann", "ann"):
        response = await client.get(
            f"/api/frontend?userId={user}&sessionId=s", headers=auth(FRONT_KEY)
        )
        assert response.status == 200
    after = await counts()
    assert {s: after[s] - before[s] for s in after} == {"evaluated": 1, "kept": 2, "varying": 2}


@pytest.mark.process
def test_an_ipv4_caller_of_a_dual_stack_socket_is_its_ipv4_address(tmp_path: Path) -> None:
    """Workers listening on ``::`` share dual-stack sockets, where an IPv4 caller's peer is
    ``::ffff:a.b.c.d``: taken as is, no ``remoteAddress`` strategy or ``IN_CIDR`` written
    for IPv4 held for it (the failure budget and trusted proxies already read it as IPv4)."""
    env = {
        "RELAY_HOST": "::",
        "RELAY_WORKERS": "2",
        "RELAY_INIT_ADMIN_API_TOKENS": ADMIN_KEY,
        "RELAY_INIT_FRONTEND_API_TOKENS": FRONT_KEY,
    }
    port = free_port()
    with running(tmp_path, env=env, port=port):
        url = f"http://127.0.0.1:{port}"
        strategy = {"name": "remoteAddress", "parameters": {"IPs": "127.0.0.1"}}
        features = FEATURES.format(project="default")
        assert http("POST", f"{url}{features}", {"name": "here"})[0] == 201
        assert http("POST", f"{url}{env_path('here')}/strategies", strategy)[0] == 200
        assert http("POST", f"{url}{env_path('here')}/on")[0] == 200

        def enabled() -> bool:  # every worker answers from the store within its poll
            status, body = http("GET", f"{url}/api/frontend/features/here", key=FRONT_KEY)
            return status == 200 and body["enabled"] is True

        wait_until(enabled, "an IPv4 caller matches the remoteAddress strategy for its address")


async def test_remote_address_is_chosen_by_no_caller(make_client: MakeClient) -> None:
    """``remoteAddress`` (absent from the context) is the peer, whatever forwarding
    headers a caller writes; behind a trusted proxy, the hop it appended, never what the
    caller wrote to its left."""
    forged = {"X-Forwarded-For": "10.1.2.3", "Forwarded": "for=10.1.2.3"}
    for trusted, headers, enabled in (
        (False, forged, False),  # an untrusted peer's headers are not read
        (True, {"X-Forwarded-For": "10.1.2.3"}, True),  # the trusted proxy's hop
        (True, {"X-Forwarded-For": "10.1.2.3, 192.0.2.7"}, False),  # forged to the left
    ):
        client = await make_client(
            init_frontend_api_tokens=[FRONT_KEY],
            trust_proxy=trusted,
            proxy_trusted_servers=["127.0.0.1"] if trusted else [],
        )
        if not trusted:
            await create_flag(client, "office")
            strategy = {"name": "remoteAddress", "parameters": {"IPs": "10.1.2.0/24"}}
            await add_strategy(client, "office", strategy)
            await turn(client, "office")
        response = await client.get(
            "/api/frontend/features/office", headers=auth(FRONT_KEY) | headers
        )
        assert (await response.json())["enabled"] is enabled, (trusted, headers)
