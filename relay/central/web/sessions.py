"""Sessions of the web page: an admin key, posted once through the sign-in form, is
exchanged for a random session id carried in a cookie.

The id is 256 random bits, stored only as its SHA-256 hash (as keys are), in the central
database, so a session works with every worker and every instance sharing that database.
A session is found only while the admin key it was opened with exists: revoking the key
ends its sessions (the key store also deletes them). Each has a CSRF token (a synchronizer
token: every form carries it, every write checks it) and expires ``web_session_ttl``
seconds after sign-in. The cookie is HttpOnly, SameSite=Strict, and Secure when the
request came over TLS or ``web_secure_cookies`` says a proxy in front terminates it.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Protocol

from aiohttp import web

from relay.api.jobs import every
from relay.central.counts import PRUNE_INTERVAL
from relay.core.keys import hash_key

COOKIE = "relay_session"


@dataclass(frozen=True, slots=True)
class Session:
    csrf: str
    key_id: str
    """The id of the admin key it was opened with (to warn before revoking it)."""
    key_display: str
    """The admin key as it may be shown: ``*:*.****``."""
    expires_at: float
    key_name: str | None = None
    """The admin key's name: who the event log says made the page's changes."""


class SessionRecords(Protocol):
    """Where sessions are kept (``session_records.SqlSessionRecords``), by the hash of
    their id."""

    async def add(
        self, session_hash: str, key_hash: str, csrf: str, created_at: float, expires_at: float
    ) -> None: ...

    async def find(self, session_hash: str, now: float) -> Session | None:
        """The session unless it expired by ``now`` or its key is no longer an admin key."""
        ...

    async def remove(self, session_hash: str) -> None: ...

    async def remove_expired(self, now: float) -> None: ...


class SessionStore:
    def __init__(self, records: SessionRecords, ttl: float) -> None:
        self._records = records
        self._ttl = ttl

    async def open(self, key_hash: str) -> str:
        """A new session for the admin key with this hash; its id (for the cookie)."""
        session_id = secrets.token_urlsafe(32)
        now = time.time()
        csrf = secrets.token_urlsafe(32)
        await self._records.add(hash_key(session_id), key_hash, csrf, now, now + self._ttl)
        return session_id

    async def find(self, session_id: str) -> Session | None:
        if not session_id or len(session_id) > 100:
            return None
        return await self._records.find(hash_key(session_id), time.time())

    async def close(self, session_id: str) -> None:
        await self._records.remove(hash_key(session_id))

    async def prune(self) -> None:
        await self._records.remove_expired(time.time())

    def set_cookie(self, response: web.StreamResponse, session_id: str, secure: bool) -> None:
        response.set_cookie(
            COOKIE,
            session_id,
            max_age=int(self._ttl),
            path="/",
            httponly=True,
            samesite="Strict",
            secure=secure,
        )


def expiring(store: SessionStore) -> Callable[[web.Application], AsyncIterator[None]]:
    """Expired sessions deleted every ``PRUNE_INTERVAL`` (a session past its time is never
    found, so this only keeps the table short)."""
    return every(PRUNE_INTERVAL, store.prune, "prune-sessions")


def clear_cookie(response: web.StreamResponse) -> None:
    response.del_cookie(COOKIE, path="/")
