"""The PostgreSQL tests' reused database (``pg.Reused``): each test gets it as its
migrations left it, whatever the test before changed, schema included."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg
import pg


@asynccontextmanager
async def connection(url: str) -> AsyncIterator[asyncpg.Connection]:  # type: ignore[type-arg]
    conn = await asyncpg.connect(url)
    try:
        yield conn
    finally:
        await conn.close()


async def test_what_a_test_added_does_not_reach_the_next_test(postgres_server: str) -> None:
    """A column, an index, a table and its rows added by a test not marked ``schema``: the
    next test gets a new database rather than inherit them."""
    reused = pg.Reused()
    try:
        async with connection(await reused.take()) as conn:
            await conn.execute("ALTER TABLE features ADD COLUMN leaked TEXT DEFAULT 'x'")
            await conn.execute("CREATE INDEX leaked_index ON features (name, project_id)")
            await conn.execute("CREATE TABLE leaked_rows (n INT)")
            await conn.execute("INSERT INTO leaked_rows VALUES (1)")
            await conn.execute(
                "INSERT INTO projects (id, name, created_at) VALUES ('left', 'left', 0)"
            )
        async with connection(await reused.take()) as conn:
            shape = await pg._shape(conn)
            left = await conn.fetchval("SELECT count(*) FROM projects WHERE id = 'left'")
        names = {name for _, name, _ in shape}
        assert not names & {"leaked", "leaked_index", "n"}, shape
        assert left == 0
    finally:
        await reused.drop()


async def test_the_migrations_rows_are_put_back(postgres_server: str) -> None:
    """What the migrations wrote is there again, and only that."""
    reused = pg.Reused()
    try:
        async with connection(await reused.take()) as conn:
            seeded = await conn.fetch("SELECT id FROM projects ORDER BY id")
            await conn.execute("DELETE FROM projects WHERE id = 'default'")
            await conn.execute(
                "INSERT INTO projects (id, name, created_at) VALUES ('added', 'added', 0)"
            )
        async with connection(await reused.take()) as conn:
            again = await conn.fetch("SELECT id FROM projects ORDER BY id")
        assert again == seeded and [row[0] for row in seeded] == ["default"]
    finally:
        await reused.drop()
