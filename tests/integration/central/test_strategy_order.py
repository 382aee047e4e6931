"""``POST .../strategies/set-sort-order`` (Unleash's reorder), on SQLite and PostgreSQL:
the client features answer follows the new order; an id that is not the flag's in that
environment, or named twice, moves nothing."""

from __future__ import annotations

from typing import Any

from conftest import assert_error
from flagkit import add_strategy, call, create_flag, env_path, ok, served, turn


def _users(ids: str) -> dict[str, Any]:
    return {"name": "userWithId", "parameters": {"userIds": ids}}


async def test_set_sort_order_reorders_what_sdks_get(client: Any) -> None:
    await create_flag(client, "checkout")
    first = await add_strategy(client, "checkout", _users("a"))
    second = await add_strategy(client, "checkout", _users("b"))
    await turn(client, "checkout")
    before = (await served(client))["checkout"]["strategies"]
    assert [s["parameters"]["userIds"] for s in before] == ["a", "b"]
    order = [{"id": second["id"], "sortOrder": 0}, {"id": first["id"], "sortOrder": 1}]
    await ok(client, "POST", f"{env_path('checkout')}/strategies/set-sort-order", order)
    after = (await served(client))["checkout"]["strategies"]
    assert [s["parameters"]["userIds"] for s in after] == ["b", "a"]
    listed = await ok(client, "GET", f"{env_path('checkout')}/strategies")
    assert [(s["id"], s["sortOrder"]) for s in listed] == [(second["id"], 0), (first["id"], 1)]


async def test_an_unknown_or_repeated_id_moves_nothing(client: Any) -> None:
    await create_flag(client, "checkout")
    await create_flag(client, "other")
    mine = await add_strategy(client, "checkout", _users("a"))
    theirs = await add_strategy(client, "other", _users("b"))
    path = f"{env_path('checkout')}/strategies/set-sort-order"
    for body, status, name in (
        (
            [{"id": mine["id"], "sortOrder": 5}, {"id": theirs["id"], "sortOrder": 6}],
            400,  # not this flag's strategy: Unleash 8.2 answers 400
            "BadDataError",
        ),
        (
            [{"id": mine["id"], "sortOrder": 5}, {"id": mine["id"], "sortOrder": 6}],
            400,
            "BadDataError",
        ),
        ([{"id": mine["id"], "sortOrder": 1.5}], 400, "BadDataError"),
        ({"id": mine["id"]}, 400, "BadDataError"),
    ):
        got, answer = await call(client, "POST", path, body)
        assert got == status, (body, answer)
        assert_error(answer, name)
    [kept] = await ok(client, "GET", f"{env_path('checkout')}/strategies")
    assert kept["sortOrder"] == mine["sortOrder"]
    got, answer = await call(client, "POST", path.replace("checkout", "missing"), [])
    assert got == 404, answer
