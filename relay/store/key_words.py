"""The upstream's words on SDK keys as ``cache.db`` keeps them (``key_words``), one row a
key, in the order the workers stored them (``changed``, ``relay.store.cache_file``);
held in memory and shared by ``relay.edge.key_words``."""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass

from relay.core.keys import Principal
from relay.store.cache_file import change_number, next_change
from relay.store.sql import Row, Transaction
from relay.store.sqlite import SqliteDatabase
from relay.wire.common import KeyType

VOUCHED = 200


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


class KeyWordStore:
    def __init__(self, db: SqliteDatabase) -> None:
        self._db = db

    async def since(self, changed: int) -> tuple[int, list[Word]]:
        """The words stored after ``changed``, in the order they were, with the latest
        ``changed`` read (``changed`` itself if none). A row this module cannot have
        written (damaged by hand) is left out: its key is asked about again."""
        rows = await self._db.fetch_all(
            "SELECT key_hash, status, type, environment, projects, display, token_name,"
            " said_at, changed FROM key_words WHERE changed > ? ORDER BY changed",
            (changed,),
        )
        words = []
        for row in rows:
            with contextlib.suppress(ValueError, TypeError, KeyError):
                number = change_number(row[8])
                changed = max(changed, number)
                words.append(_word(row).at(number))
        return changed, words

    async def store(self, words: list[Word], asked: int | None) -> tuple[int, set[str]]:
        """``words`` stored at the next ``changed``, returned with the keys whose word
        vouching for them was not stored: a refusal stored after ``asked`` stands."""
        return await self._db.run(lambda tx: _store(tx, words, asked))

    async def prune(self, before: float, most_vouched: int, most_refused: int) -> None:
        """Refusals said before ``before`` go, then all but the newest ``most_vouched``
        words of keys vouched for and ``most_refused`` refused."""

        async def work(tx: Transaction) -> None:
            await tx.execute(
                "DELETE FROM key_words WHERE status != ? AND said_at < ?", (VOUCHED, before)
            )
            for kept, most in (("status = ?", most_vouched), ("status != ?", most_refused)):
                await tx.execute(
                    f"DELETE FROM key_words WHERE {kept} AND key_hash NOT IN (SELECT key_hash"
                    f" FROM key_words WHERE {kept} ORDER BY said_at DESC LIMIT ?)",
                    (VOUCHED, VOUCHED, most),
                )

        await self._db.run(work)


async def _store(tx: Transaction, words: list[Word], asked: int | None) -> tuple[int, set[str]]:
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
