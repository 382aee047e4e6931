"""Environments' rows in the central database (table ``environments``), on either backend:
the ``EnvironmentRecords`` of ``relay.central.environments``. A change is one transaction
with its events; one that flags see is a flag write (``relay.central.flags.writes``)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from relay.central.event_records import EventLog
from relay.central.flags.writes import FlagWrite, Writer
from relay.core.audit import Actor, EventType
from relay.store.sql import Database, Row, Transaction
from relay.wire import admin as wire

_COLUMNS = "name, type, enabled, sort_order"


class SqlEnvironmentRecords:
    def __init__(self, db: Database, write: Writer) -> None:
        """``write``: the flag writer; its event log is the environments' too."""
        self._db = db
        self._write = write

    async def listed(self) -> list[wire.EnvironmentOut]:
        rows = await self._db.fetch_all(
            f"SELECT {_COLUMNS} FROM environments ORDER BY sort_order, name"
        )
        return [_out(row) for row in rows]

    @asynccontextmanager
    async def change(self, actor: Actor) -> AsyncIterator[SqlEnvironmentChange]:
        async with self._db.transaction() as tx:
            yield SqlEnvironmentChange(tx, actor, self._write.events)

    @asynccontextmanager
    async def flag_change(self, actor: Actor) -> AsyncIterator[SqlEnvironmentFlagChange]:
        async with self._write(actor) as w:
            yield SqlEnvironmentFlagChange(w)


class SqlEnvironmentChange:
    def __init__(self, tx: Transaction, actor: Actor, events: EventLog) -> None:
        self._tx = tx
        self._actor = actor
        self._events = events

    async def find(self, name: str) -> wire.EnvironmentOut | None:
        rows = await self._tx.fetch_all(
            f"SELECT {_COLUMNS} FROM environments WHERE name = ?", (name,)
        )
        return _out(rows[0]) if rows else None

    async def last_sort_order(self) -> int:
        [row] = await self._tx.fetch_all("SELECT coalesce(max(sort_order), 0) FROM environments")
        return int(row[0])

    async def insert(self, environment: wire.EnvironmentOut) -> bool:
        e = environment
        created = await self._tx.execute(
            "INSERT INTO environments (name, type, enabled, sort_order, created_at)"
            " VALUES (?, ?, ?, ?, ?) ON CONFLICT (name) DO NOTHING",
            (e.name, e.type, int(e.enabled), e.sortOrder, time.time()),
        )
        return created == 1

    async def update(self, environment: wire.EnvironmentOut) -> None:
        e = environment
        await self._tx.execute(
            "UPDATE environments SET type = ?, sort_order = ? WHERE name = ?",
            (e.type, e.sortOrder, e.name),
        )

    async def hold(self, name: str) -> None:
        # an update that changes nothing locks the row on PostgreSQL
        await self._tx.execute("UPDATE environments SET type = type WHERE name = ?", (name,))

    async def keys_bound(self, name: str) -> int:
        [row] = await self._tx.fetch_all(
            "SELECT count(*) FROM api_tokens WHERE environment = ?", (name,)
        )
        return int(row[0])

    async def others(self, name: str) -> int:
        [row] = await self._tx.fetch_all(
            "SELECT count(*) FROM environments WHERE name <> ?", (name,)
        )
        return int(row[0])

    async def event(
        self, type: EventType, environment: str, *, before: Any = None, after: Any = None
    ) -> None:
        await self._events.record(
            self._tx, self._actor, type, environment=environment, before=before, after=after
        )


class SqlEnvironmentFlagChange(SqlEnvironmentChange):
    """A change that flags see: a flag write, with its revision and change log."""

    def __init__(self, write: FlagWrite) -> None:
        super().__init__(write.tx, write.actor, write.log)
        self._revision = write.revision

    async def delete(self, name: str) -> None:
        await self._tx.execute(
            "UPDATE features SET revision = ? WHERE name IN"
            " (SELECT feature_name FROM feature_environments WHERE environment = ?)",
            (self._revision, name),
        )
        await self._tx.execute("DELETE FROM environments WHERE name = ?", (name,))


def _out(row: Row) -> wire.EnvironmentOut:
    return wire.EnvironmentOut(
        name=row["name"],
        type=row["type"],
        enabled=bool(row["enabled"]),
        sortOrder=row["sort_order"],
    )
