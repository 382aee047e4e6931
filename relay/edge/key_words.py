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

import contextlib
import json
import logging
import time
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass

from relay.api.shared import CatchUp, Kind, Shared
from relay.core.errors import StorageError
from relay.core.keys import Principal
from relay.edge.cache_file import change_number, next_change
from relay.store.sql import Row, Transaction
from relay.store.sqlite import SqliteDatabase
from relay.wire.common import KeyType

log = logging.getLogger(__name__)

VOUCHED = 200
MAX_VOUCHED = 10_000
MAX_REFUSED = 10_000


@dataclass(frozen=True, slots=True)
class Word:
    """What the upstream said of the key whose SHA-256 is ``key_hash``, at ``said_at`` (wall
    clock): ``status`` 200 with the key's ``principal``, or the status it refused it with.
    ``changed``: where it stands in the order the workers stored words (``key_words.changed``),
    which decides which of two words on a key is the latest: the wall clock cannot (a clock
    set back made a refusal look older than the word vouching for the key it refused, and
    the revoked key was served until the clock caught up)."""

    key_hash: str
    status: int
    said_at: float
    principal: Principal | None = None
    changed: int = 0

    @property
    def vouched(self) -> bool:
        return self.status == VOUCHED and self.principal is not None

    def within(self, seconds: float, now: float) -> bool:
        """Said less than ``seconds`` ago. A word said "in the future" (the clock was set
        back since) has run out: the upstream is asked again, rather than trusting a key for
        as long again as the clock went back."""
        return 0 <= now - self.said_at < seconds

    def at(self, changed: int) -> Word:
        return Word(self.key_hash, self.status, self.said_at, self.principal, changed)


class KeyWords:
    def __init__(self, db: SqliteDatabase, shared: Shared) -> None:
        self._db = db
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
            changed, overruled = await self._db.run(lambda tx: _store(tx, words, asked))
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
        rows = await self._db.fetch_all(
            "SELECT key_hash, status, type, environment, projects, display, token_name,"
            " said_at, changed FROM key_words WHERE changed > ? ORDER BY changed",
            (self._changed,),
        )
        for row in rows:
            with contextlib.suppress(ValueError, TypeError, KeyError):  # damaged: asked again
                changed = change_number(row[8])
                self._changed = max(self._changed, changed)
                self._seen = max(self._seen, changed)
                self._hold(_word(row).at(changed))

    async def prune(self, refused_for: float) -> None:
        """The leader's: refusals older than ``refused_for`` seconds go, then all but the
        newest ``MAX_VOUCHED`` words of keys vouched for and ``MAX_REFUSED`` refused."""
        before = time.time() - refused_for

        async def work(tx: Transaction) -> None:
            await tx.execute(
                "DELETE FROM key_words WHERE status != ? AND said_at < ?", (VOUCHED, before)
            )
            for kept, most in (("status = ?", MAX_VOUCHED), ("status != ?", MAX_REFUSED)):
                await tx.execute(
                    f"DELETE FROM key_words WHERE {kept} AND key_hash NOT IN (SELECT key_hash"
                    f" FROM key_words WHERE {kept} ORDER BY said_at DESC LIMIT ?)",
                    (VOUCHED, VOUCHED, most),
                )

        await self._db.run(work)
        gone = time.time() - refused_for
        for key_hash in [h for h, w in self._refused.items() if w.said_at < gone]:
            del self._refused[key_hash]


async def _store(tx: Transaction, words: list[Word], asked: int | None) -> tuple[int, set[str]]:
    """``words`` stored at the next ``changed``, returned with the keys whose word vouching
    for them was not stored: a refusal stored after ``asked`` stands."""
    changed = await next_change(tx, "key_words")
    overruled = set()
    for word in words:
        p = word.principal
        stored = await tx.execute(
            "INSERT INTO key_words (key_hash, status, type, environment, projects, display,"
            " token_name, said_at, changed) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (key_hash) DO UPDATE SET status = excluded.status,"
            " type = excluded.type, environment = excluded.environment,"
            " projects = excluded.projects, display = excluded.display,"
            " token_name = excluded.token_name, said_at = excluded.said_at,"
            " changed = excluded.changed"
            " WHERE ? IS NULL OR excluded.status != ? OR key_words.status = ?"
            " OR key_words.changed <= ?",
            (
                word.key_hash,
                word.status,
                None if p is None else p.type.value,
                None if p is None else p.environment,
                None if p is None else json.dumps(list(p.projects)),
                None if p is None else p.display,
                None if p is None else p.token_name,
                word.said_at,
                changed,
                asked,
                VOUCHED,
                VOUCHED,
                asked,
            ),
        )
        if not stored:
            overruled.add(word.key_hash)
    return changed, overruled


def _word(row: Row) -> Word:
    """A stored row as a word; ``ValueError`` (or ``TypeError``, ``KeyError``) for a row
    this module cannot have written (damaged by hand)."""
    key_hash, status, type, environment, projects, display, token_name, said_at = (
        row[i] for i in range(8)
    )
    if not isinstance(key_hash, str) or not isinstance(status, int):
        raise ValueError("not a word")
    if not isinstance(said_at, int | float):
        raise ValueError("not a time")
    principal = None
    if status == VOUCHED:
        listed = json.loads(projects)
        if not (isinstance(listed, list) and all(isinstance(p, str) for p in listed)):
            raise ValueError("not projects")
        if not isinstance(environment, str) or not isinstance(display, str):
            raise ValueError("not a principal")
        name = token_name if isinstance(token_name, str) else None
        principal = Principal(KeyType(type), environment, tuple(listed), display, name)
    return Word(key_hash, status, float(said_at), principal)
