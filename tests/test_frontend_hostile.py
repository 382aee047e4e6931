"""The Frontend API against a hostile caller holding a frontend key (public: shipped in
browser code): what one request, or many, can make the service spend.

Over real sockets (aiohttp's test client on the standalone); each test pins a bound that
an input once broke.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from conftest import MakeClient, auth
from flagkit import add_strategy, create_flag, turn
from test_frontend_api import FRONT_KEY

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

