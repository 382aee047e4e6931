"""A worker's words on SDK keys (relay.edge.key_words.KeyWords) over a fake store: what it
holds when the store answers, overrules or fails, and what pruning leaves in memory."""

from __future__ import annotations

import logging
import time

import pytest

from relay.api.shared import Layout, Shared
from relay.core.errors import StorageError
from relay.core.keys import Principal
from relay.edge.key_words import MAX_VOUCHED, KeyWords
from relay.store.key_words import VOUCHED, Word
from relay.wire.common import KeyType

DEV = Principal(KeyType.CLIENT, "development", ("*",), "dev key")


class FakeStore:
    """The words in a list, in the order stored; ``failing`` as a full disk would."""

    def __init__(self) -> None:
        self.rows: list[Word] = []
        self.failing = False
        self.pruned: list[tuple[float, int, int]] = []

    async def since(self, changed: int) -> tuple[int, list[Word]]:
        words = [w for w in self.rows if w.changed > changed]
        return max([changed, *(w.changed for w in words)]), words

    async def store(self, words: list[Word], asked: int | None) -> tuple[int, set[str]]:
        if self.failing:
            raise StorageError("disk full")
        changed = len(self.rows) + 1
        overruled = set()
        for word in words:
            standing = [w for w in self.rows if w.key_hash == word.key_hash]
            refused_since = asked is not None and any(
                w.status != VOUCHED and w.changed > asked for w in standing
            )
            if word.status == VOUCHED and refused_since:
                overruled.add(word.key_hash)
                continue
            self.rows = [w for w in self.rows if w.key_hash != word.key_hash]
            self.rows.append(word.at(changed))
        return changed, overruled

    async def prune(self, before: float, most_vouched: int, most_refused: int) -> None:
        self.pruned.append((before, most_vouched, most_refused))
        self.rows = [w for w in self.rows if w.status == VOUCHED or w.said_at >= before]


def words(store: FakeStore) -> KeyWords:
    return KeyWords(store, Shared.private(Layout.of(1, 10)))


async def test_words_stored_by_another_worker_are_held_once_loaded() -> None:
    store = FakeStore()
    ours, theirs = words(store), words(store)
    await theirs.say([Word("k", VOUCHED, time.time(), DEV)])
    assert ours.get("k") is None
    await ours.load()
    held = ours.get("k")
    assert held is not None and held.vouched and held.changed == 1
    assert ours.mark() == 1


async def test_a_vouch_the_store_overrules_leaves_the_refusal_stored_since() -> None:
    store = FakeStore()
    ours, theirs = words(store), words(store)
    asked = ours.mark()  # the call is sent; meanwhile another worker hears a refusal
    await theirs.say([Word("k", 401, time.time())])
    assert await ours.say([Word("k", VOUCHED, time.time(), DEV)], asked) == {"k"}
    held = ours.get("k")
    assert held is not None and not held.vouched and held.status == 401


async def test_words_a_failing_store_cannot_take_are_held_here_and_said_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = FakeStore()
    store.failing = True
    ours = words(store)
    with caplog.at_level(logging.ERROR):
        await ours.say([Word("a", 401, time.time())])
        await ours.say([Word("b", VOUCHED, time.time(), DEV)])
    assert [w.key_hash for w in ours.words()] == ["b", "a"]  # vouched first, then refused
    failures = [r for r in caplog.records if "cannot store" in r.getMessage()]
    assert len(failures) == 1
    store.failing = False
    await ours.say([Word("c", 401, time.time())])
    assert [w.key_hash for w in store.rows] == ["c"]


async def test_prune_asks_the_store_and_forgets_refusals_past_their_time() -> None:
    store = FakeStore()
    ours = words(store)
    now = time.time()
    await ours.say([Word("old", 401, now - 100), Word("new", 401, now)])
    await ours.say([Word("vouched", VOUCHED, now - 100, DEV)])
    await ours.prune(50.0)
    assert ours.get("old") is None
    assert ours.get("new") is not None and ours.get("vouched") is not None
    [(before, most_vouched, _)] = store.pruned
    assert now - 51 < before <= time.time() - 50 and most_vouched == MAX_VOUCHED
