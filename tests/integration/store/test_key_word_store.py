"""The upstream's words on SDK keys as cache.db keeps them (relay.store.key_words), on a real
SQLite file: the order they were stored in, a refusal standing over an older vouch, damaged
rows passed over, and pruning."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from relay.core.keys import Principal
from relay.store.cache_file import cache_file
from relay.store.key_words import VOUCHED, KeyWordStore, Word
from relay.store.sqlite import SqliteDatabase
from relay.wire.common import KeyType

DEV = Principal(KeyType.CLIENT, "development", ("*",), "dev key")


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[SqliteDatabase]:
    db = cache_file(tmp_path, "NORMAL")
    await db.open()
    yield db
    await db.close()


async def test_words_come_back_in_the_order_they_were_stored(db: SqliteDatabase) -> None:
    store = KeyWordStore(db)
    first, _ = await store.store([Word("a", VOUCHED, 100.0, DEV)], None)
    second, _ = await store.store([Word("b", 401, 200.0)], None)
    assert first < second
    latest, words = await store.since(0)
    assert latest == second
    assert words == [Word("a", VOUCHED, 100.0, DEV, first), Word("b", 401, 200.0, None, second)]
    assert await store.since(second) == (second, [])


async def test_a_refusal_stored_since_the_call_was_asked_stands(db: SqliteDatabase) -> None:
    store = KeyWordStore(db)
    asked, _ = await store.store([Word("other", 401, 1.0)], None)
    refused, _ = await store.store([Word("k", 401, 2.0)], None)
    _, overruled = await store.store([Word("k", VOUCHED, 3.0, DEV)], asked)
    assert overruled == {"k"}
    _, words = await store.since(asked)
    assert words == [Word("k", 401, 2.0, None, refused)]


async def test_a_damaged_row_is_passed_over_and_the_order_goes_past_it(
    db: SqliteDatabase,
) -> None:
    store = KeyWordStore(db)
    async with db.transaction() as tx:  # a row no write of ours gives: edited by hand
        await tx.execute(
            "INSERT INTO key_words (key_hash, status, said_at, changed) VALUES (?, ?, ?, ?)",
            ("damaged", "not a status", 1.0, 7),
        )
    assert await store.since(0) == (7, [])
    stored, _ = await store.store([Word("a", 401, 2.0)], None)
    assert stored > 7
    assert await store.since(7) == (stored, [Word("a", 401, 2.0, None, stored)])


async def test_prune_drops_old_refusals_then_keeps_the_newest_of_each_kind(
    db: SqliteDatabase,
) -> None:
    store = KeyWordStore(db)
    await store.store([Word("old refusal", 401, 10.0)], None)
    await store.store([Word(f"refused {n}", 403, 100.0 + n) for n in range(3)], None)
    await store.store([Word(f"vouched {n}", VOUCHED, 1.0 + n, DEV) for n in range(3)], None)
    await store.prune(50.0, most_vouched=2, most_refused=2)
    _, words = await store.since(0)
    assert sorted(w.key_hash for w in words) == [
        "refused 1",
        "refused 2",
        "vouched 1",
        "vouched 2",
    ]
