"""API keys' rows in the central database (table ``api_tokens``, the revision in
``key_revision``), on either backend: the ``KeyRecords`` of ``relay.central.key_store``.
Issuing and revoking a key are logged in their own transaction (``relay.central.event_records``)."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence

from relay.central.event_records import EventLog
from relay.central.key_store import KeyRecord, shown
from relay.core.audit import Actor, EventType
from relay.core.errors import Conflict, InvalidInput, NotFound
from relay.core.keys import Principal
from relay.store.sql import Database, Row, Transaction
from relay.wire.common import KeyType

_COLUMNS = "secret_hash, display, type, environment, projects, token_name"
_LISTED = f"id, {_COLUMNS}, created_at, last_used_at"


class SqlKeyRecords:
    def __init__(self, db: Database, events: EventLog | None = None) -> None:
        """``events``: where issuing and revoking keys is logged."""
        self._db = db
        self._events = EventLog(db) if events is None else events

    async def revision(self) -> int:
        row = await self._db.fetch_one("SELECT revision FROM key_revision WHERE id = 1")
        return int(row[0]) if row is not None else 0

    async def principals(self, digests: Sequence[str] | None = None) -> dict[str, Principal]:
        if digests is None:
            rows = await self._db.fetch_all(f"SELECT {_COLUMNS} FROM api_tokens")
        else:
            marks = ", ".join("?" * len(digests))
            rows = await self._db.fetch_all(
                f"SELECT {_COLUMNS} FROM api_tokens WHERE secret_hash IN ({marks})", digests
            )
        return {row["secret_hash"]: principal_of(row) for row in rows}

    async def add(
        self, digest: str, key_id: str, principal: Principal, actor: Actor | None
    ) -> bool:
        p = principal
        async with self._db.transaction() as tx:
            if actor is not None and p.type is not KeyType.ADMIN:
                await _hold_scope(tx, p)
            created = await tx.execute(
                "INSERT INTO api_tokens (id, secret_hash, display, type, environment, projects,"
                " token_name, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (secret_hash) DO NOTHING",
                (
                    key_id,
                    digest,
                    p.display,
                    p.type.value,
                    p.environment,
                    json.dumps(list(p.projects)),
                    p.token_name,
                    time.time(),
                ),
            )
            if created == 1 and actor is not None:
                await self._events.record(
                    tx, actor, EventType.API_TOKEN_CREATED, **_scope(p), after=shown(key_id, p)
                )
        return created == 1

    async def count(self) -> int:
        row = await self._db.fetch_one("SELECT count(*) AS n FROM api_tokens")
        return int(row["n"]) if row is not None else 0

    async def listed(self) -> list[tuple[str, KeyRecord]]:
        rows = await self._db.fetch_all(f"SELECT {_LISTED} FROM api_tokens ORDER BY created_at")
        return [(row["secret_hash"], _record(row)) for row in rows]

    async def revoke(self, actor: Actor, name_or_id: str) -> tuple[str, KeyRecord]:
        async with self._db.transaction() as tx:
            by_id = f"SELECT {_LISTED} FROM api_tokens WHERE id = ?"
            rows = await tx.fetch_all(by_id, (name_or_id,))
            if not rows:
                rows = await tx.fetch_all(
                    f"SELECT {_LISTED} FROM api_tokens WHERE token_name = ?", (name_or_id,)
                )
            if not rows:
                raise NotFound(f"No API key with the id or name {name_or_id}")
            if len(rows) > 1:
                raise Conflict(f"{len(rows)} API keys are named {name_or_id}: revoke by id")
            row = rows[0]
            await tx.execute("DELETE FROM api_tokens WHERE id = ?", (row["id"],))
            await tx.execute("DELETE FROM web_sessions WHERE key_hash = ?", (row["secret_hash"],))
            await tx.execute("UPDATE key_revision SET revision = revision + 1 WHERE id = 1")
            record = _record(row)
            before = shown(record.id, record.principal)
            await self._events.record(
                tx, actor, EventType.API_TOKEN_DELETED, **_scope(record.principal), before=before
            )
        return row["secret_hash"], record

    async def write_uses(self, used: Mapping[str, float]) -> None:
        async with self._db.transaction() as tx:
            await tx.executemany(
                "UPDATE api_tokens SET last_used_at = ? WHERE secret_hash = ?"
                " AND (last_used_at IS NULL OR last_used_at < ?)",
                [(at, digest, at) for digest, at in sorted(used.items())],
            )


def _record(row: Row) -> KeyRecord:
    return KeyRecord(row["id"], principal_of(row), row["created_at"], row["last_used_at"])


def _scope(principal: Principal) -> dict[str, str | None]:
    """The project and environment a key event is filed under (Unleash's: a key of one
    project and one environment; None for every one)."""
    projects = principal.projects
    return {
        "project": projects[0] if len(projects) == 1 and projects[0] != "*" else None,
        "environment": None if principal.environment == "*" else principal.environment,
    }


def principal_of(row: Row) -> Principal:
    return Principal(
        type=KeyType(row["type"]),
        environment=row["environment"],
        projects=tuple(json.loads(row["projects"])),
        display=row["display"],
        token_name=row["token_name"],
    )


async def _hold_scope(tx: Transaction, principal: Principal) -> None:
    """The key's environment and projects exist, their rows held (an update that changes
    nothing locks them on PostgreSQL) until the key is in: a deletion of either, which
    holds the same row before it looks for keys, then waits and sees the key, or went
    first and the key is refused. Without it a key made during its project's deletion
    outlived it, and applied to a later project of the same id."""
    environment = principal.environment
    if not await tx.execute("UPDATE environments SET type = type WHERE name = ?", (environment,)):
        raise InvalidInput(f"Environment {environment} does not exist")
    for project in sorted(set(principal.projects) - {"*"}):
        if not await tx.execute("UPDATE projects SET name = name WHERE id = ?", (project,)):
            raise InvalidInput(f"Project {project} does not exist")
