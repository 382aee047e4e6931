"""The web page's sessions in the central database (table ``web_sessions``), on either
backend: a session is found only while the admin key it was opened with exists."""

from __future__ import annotations

from relay.central.web.sessions import Session
from relay.store.sql import Database


class SqlSessionRecords:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def add(
        self, session_hash: str, key_hash: str, csrf: str, created_at: float, expires_at: float
    ) -> None:
        async with self._db.transaction() as tx:
            await tx.execute(
                "INSERT INTO web_sessions (session_hash, key_hash, csrf_token, created_at,"
                " expires_at) VALUES (?, ?, ?, ?, ?)",
                (session_hash, key_hash, csrf, created_at, expires_at),
            )

    async def find(self, session_hash: str, now: float) -> Session | None:
        row = await self._db.fetch_one(
            "SELECT s.csrf_token, s.expires_at, t.display, t.id, t.token_name FROM web_sessions s"
            " JOIN api_tokens t ON t.secret_hash = s.key_hash AND t.type = 'admin'"
            " WHERE s.session_hash = ? AND s.expires_at > ?",
            (session_hash, now),
        )
        return None if row is None else Session(row[0], row[3], row[2], float(row[1]), row[4])

    async def remove(self, session_hash: str) -> None:
        async with self._db.transaction() as tx:
            await tx.execute("DELETE FROM web_sessions WHERE session_hash = ?", (session_hash,))

    async def remove_expired(self, now: float) -> None:
        async with self._db.transaction() as tx:
            await tx.execute("DELETE FROM web_sessions WHERE expires_at <= ?", (now,))
