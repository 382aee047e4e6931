"""The upstream's latest word on each SDK key, one for the whole relay however many workers it
runs: vouched for (with what the key may do) or refused (401, 403), and when it was said.

A worker that hears a word from the upstream (``/edge/validate``, or a flag fetch it
refused) stores it in ``cache.db`` and counts it in the shared region before it answers the
request that asked; every worker catches up with the words stored before it answers a
request (``relay.api.shared.CatchUp``). So a key refused anywhere is refused everywhere from
that answer on, and a key vouched for anywhere is known everywhere. Stored, the words also
outlive a restart: a key vouched for before it is trusted while the upstream cannot be asked.

Refusals are stored too, those of made-up keys included: one write per upstream call,
whatever keys it carried, and then no worker asks again for ``NEGATIVE_TTL``. Held in
memory: the ``MAX_VOUCHED`` newest words vouching for a key, and the ``MAX_REFUSED`` most
recent refusals (one dropped from memory is asked about again, never served); the leader
prunes the file alike, and refusals past their time (``prune``).
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Iterable
from typing import Protocol

from relay.api.shared import CatchUp, Kind, Shared
from relay.core.errors import StorageError
from relay.store.key_words import Word

log = logging.getLogger(__name__)

MAX_VOUCHED = 10_000
MAX_REFUSED = 10_000


class WordStore(Protocol):
    """Where the words are kept for every worker and across restarts
    (``relay.store.key_words.KeyWordStore``)."""

    async def since(self, changed: int) -> tuple[int, list[Word]]: ...

    async def store(self, words: list[Word], asked: int | None) -> tuple[int, set[str]]: ...

    async def prune(self, before: float, most_vouched: int, most_refused: int) -> None: ...


class KeyWords:
    def __init__(self, store: WordStore, shared: Shared) -> None:
        self._store = store
        self._vouched: OrderedDict[str, Word] = OrderedDict()  # oldest said first
        self._refused: OrderedDict[str, Word] = OrderedDict()
        self._changed = 0  # the latest row loaded
        self._seen = 0  # the latest row loaded or stored here
        self._catch_up = CatchUp(shared, Kind.KEYS, self.load)
        self._failing = False

    def get(self, key_hash: str) -> Word | None:
        return self._vouched.get(key_hash) or self._refused.get(key_hash)

    def words(self) -> Iterable[Word]:
        return [*self._vouched.values(), *self._refused.values()]

    def _hold(self, word: Word) -> None:
        """The latest word on its key, held (one stored before the one held, loaded late,
        is not)."""
        held = self.get(word.key_hash)
        if held is not None and held.changed > word.changed:
            return
        self._vouched.pop(word.key_hash, None)
        self._refused.pop(word.key_hash, None)
        kept, most = (self._vouched, MAX_VOUCHED) if word.vouched else (self._refused, MAX_REFUSED)
        kept[word.key_hash] = word
        while len(kept) > most:
            kept.popitem(last=False)

    async def current(self) -> None:
        """Returns once every word another worker stored before the call is held here."""
        await self._catch_up.current()

    def mark(self) -> int:
        """Where this worker is in the order words were stored: given to ``say`` with the
        answer of an upstream call asked now."""
        return self._seen

    async def say(self, words: Iterable[Word], asked: int | None = None) -> set[str]:
        """The upstream's ``words``: stored, counted for the other workers, held here. On a
        file that cannot take them (a full disk) they are held here only (logged once).
        ``asked``: the ``mark`` when the call that brought them was sent; a word vouching for
        a key is not taken over a refusal stored since (a later call's answer, which came
        first): the hashes of those keys are returned, and their refusal held."""
        words = list(words)
        if not words:
            return set()
        overruled: set[str] = set()
        try:
            changed, overruled = await self._store.store(words, asked)
        except StorageError as exc:
            if not self._failing:
                log.error(
                    "cannot store the upstream's word on SDK keys: other workers ask it again",
                    extra={"error": str(exc)},
                )
            self._failing = True
            # the latest this worker heard: past what it holds, behind what is stored next
            changed = max(self._changed, *(self._changed_of(w.key_hash) for w in words))
        else:
            self._failing = False
            self._seen = max(self._seen, changed)
            self._catch_up.published()
        for word in words:
            if word.key_hash not in overruled:
                self._hold(word.at(changed))
        if overruled:
            await self.load()  # the refusals that stand
        return overruled

    def _changed_of(self, key_hash: str) -> int:
        held = self.get(key_hash)
        return 0 if held is None else held.changed

    async def load(self) -> None:
        """The words stored since the last load (all of them, the first time)."""
        changed, words = await self._store.since(self._changed)
        self._changed = max(self._changed, changed)
        self._seen = max(self._seen, changed)
        for word in words:
            self._hold(word)

    async def prune(self, refused_for: float) -> None:
        """The leader's: refusals older than ``refused_for`` seconds go, then all but the
        newest ``MAX_VOUCHED`` words of keys vouched for and ``MAX_REFUSED`` refused."""
        before = time.time() - refused_for
        await self._store.prune(before, MAX_VOUCHED, MAX_REFUSED)
        gone = time.time() - refused_for
        for key_hash in [h for h, w in self._refused.items() if w.said_at < gone]:
            del self._refused[key_hash]
