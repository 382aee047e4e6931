"""A fold of the ingest log held open, for the tests of what happens meanwhile."""

from __future__ import annotations

from typing import Any

import asyncpg
from service import eventually


async def blocked_fold(conn: asyncpg.Connection[Any]) -> int:
    """The pid of a fold pass waiting on a row lock, its log rows already deleted. ``conn``
    outside any transaction: inside one, PostgreSQL shows the activity of its first look."""
    found: list[int] = []

    async def blocked() -> bool:
        rows = await conn.fetch(
            "SELECT pid FROM pg_stat_activity WHERE wait_event = 'transactionid'"
            " AND query LIKE 'INSERT INTO metrics%'"
        )
        found[:] = [row["pid"] for row in rows]
        return bool(found)

    await eventually(blocked, "a fold pass waiting on the row the test holds")
    return found[0]
