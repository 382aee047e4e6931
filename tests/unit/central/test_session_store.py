"""The web page's sessions as ``SessionStore`` decides them, over an in-memory record of
sessions (the SQL records are proven by the web tests on both backends)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from relay.central.web.sessions import Session, SessionStore
from relay.core.keys import hash_key

ADMIN_HASH = "admin-key-hash"


@dataclass
class MemorySessions:
    """Sessions by hash; a key counts as an admin key while it is in ``admin_keys``."""

    rows: dict[str, tuple[str, str, float]] = field(default_factory=dict)
    admin_keys: set[str] = field(default_factory=lambda: {ADMIN_HASH})
    finds: int = 0

    async def add(
        self, session_hash: str, key_hash: str, csrf: str, created_at: float, expires_at: float
    ) -> None:
        self.rows[session_hash] = (key_hash, csrf, expires_at)

    async def find(self, session_hash: str, now: float) -> Session | None:
        self.finds += 1
        row = self.rows.get(session_hash)
        if row is None or row[2] <= now or row[0] not in self.admin_keys:
            return None
        return Session(row[1], "key-id", "*:*.****", row[2])

    async def remove(self, session_hash: str) -> None:
        self.rows.pop(session_hash, None)

    async def remove_expired(self, now: float) -> None:
        self.rows = {h: row for h, row in self.rows.items() if row[2] > now}


async def test_a_session_is_kept_by_the_hash_of_its_id_until_its_ttl() -> None:
    records = MemorySessions()
    store = SessionStore(records, ttl=60)
    before = time.time()
    session_id = await store.open(ADMIN_HASH)
    assert session_id not in records.rows
    [(stored, (key_hash, csrf, expires_at))] = records.rows.items()
    assert stored == hash_key(session_id)
    assert key_hash == ADMIN_HASH
    assert before + 60 <= expires_at <= time.time() + 60
    found = await store.find(session_id)
    assert found is not None and found.csrf == csrf


async def test_each_session_has_its_own_id_and_csrf_token() -> None:
    records = MemorySessions()
    store = SessionStore(records, ttl=60)
    first, second = await store.open(ADMIN_HASH), await store.open(ADMIN_HASH)
    assert first != second
    [one, other] = records.rows.values()
    assert one[1] != other[1]


async def test_an_empty_or_overlong_id_is_refused_without_a_read() -> None:
    records = MemorySessions()
    store = SessionStore(records, ttl=60)
    assert await store.find("") is None
    assert await store.find("x" * 101) is None
    assert records.finds == 0


async def test_a_closed_session_is_gone_and_expired_ones_are_pruned() -> None:
    records = MemorySessions()
    store = SessionStore(records, ttl=60)
    closed = await store.open(ADMIN_HASH)
    await store.close(closed)
    assert await store.find(closed) is None
    expired = await SessionStore(records, ttl=-1).open(ADMIN_HASH)
    kept = await store.open(ADMIN_HASH)
    assert await store.find(expired) is None
    await store.prune()
    assert set(records.rows) == {hash_key(kept)}
