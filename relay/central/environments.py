"""Environments: created, listed, changed (type and order) and deleted, each change with its
event in its transaction.

An environment's name is its identity: client and frontend keys carry it
(``project:environment.secret``), so it is never renamed. One is not deleted while a key is
bound to it (revoke those first: an SDK would otherwise be left with a key that reads
nothing), nor when it is the last; deleting it takes every flag's state and strategies
there with it, a flag write (SDKs of other environments see no change but a new revision).
"""

from __future__ import annotations

import time

from relay.central.flags.writes import Writer
from relay.core.audit import Actor, EventType
from relay.core.errors import Conflict, InvalidOperation, NotFound
from relay.store.sql import Database, Row, Transaction
from relay.wire import admin as wire

_COLUMNS = "name, type, enabled, sort_order"


class EnvironmentStore:
    def __init__(self, db: Database, write: Writer) -> None:
        self._db = db
        self._write = write
        self._events = write.events

    async def listed(self) -> list[wire.EnvironmentOut]:
        rows = await self._db.fetch_all(
            f"SELECT {_COLUMNS} FROM environments ORDER BY sort_order, name"
        )
        return [_out(row) for row in rows]

    async def create(self, actor: Actor, body: wire.CreateEnvironment) -> wire.EnvironmentOut:
        async with self._db.transaction() as tx:
            if body.sortOrder is None:
                [row] = await tx.fetch_all(
                    "SELECT coalesce(max(sort_order), 0) + 100 FROM environments"
                )
                sort_order = int(row[0])
            else:
                sort_order = body.sortOrder
            created = await tx.execute(
                "INSERT INTO environments (name, type, enabled, sort_order, created_at)"
                " VALUES (?, ?, ?, ?, ?) ON CONFLICT (name) DO NOTHING",
                (body.name, body.type, int(body.enabled), sort_order, time.time()),
            )
            if created != 1:
                raise Conflict(f"Environment {body.name} already exists")
            after = await _environment(tx, body.name)
            await self._events.record(
                tx,
                actor,
                EventType.ENVIRONMENT_CREATED,
                environment=body.name,
                after=after.model_dump(mode="json"),
            )
        return after

    async def update(
        self, actor: Actor, name: str, body: wire.UpdateEnvironment
    ) -> wire.EnvironmentOut:
        """The fields the body gives change; the others keep their values."""
        async with self._db.transaction() as tx:
            before = await _environment(tx, name)
            await tx.execute(
                "UPDATE environments SET type = ?, sort_order = ? WHERE name = ?",
                (
                    before.type if body.type is None else body.type,
                    before.sortOrder if body.sortOrder is None else body.sortOrder,
                    name,
                ),
            )
            after = await _environment(tx, name)
            await self._events.record(
                tx,
                actor,
                EventType.ENVIRONMENT_UPDATED,
                environment=name,
                before=before.model_dump(mode="json"),
                after=after.model_dump(mode="json"),
            )
        return after

    async def delete(self, actor: Actor, name: str) -> None:
        async with self._write(actor) as w:
            before = await _environment(w.tx, name)
            # held before its keys are counted: a key being made for it waits, or is seen
            await w.tx.execute("UPDATE environments SET type = type WHERE name = ?", (name,))
            [keys] = await w.tx.fetch_all(
                "SELECT count(*) FROM api_tokens WHERE environment = ?", (name,)
            )
            if int(keys[0]):
                raise Conflict(
                    f"Environment {name} is the environment of {keys[0]} API key(s):"
                    " revoke them first"
                )
            [others] = await w.tx.fetch_all(
                "SELECT count(*) FROM environments WHERE name <> ?", (name,)
            )
            if not int(others[0]):
                raise InvalidOperation("You can not delete the last environment")
            await w.tx.execute(
                "UPDATE features SET revision = ? WHERE name IN"
                " (SELECT feature_name FROM feature_environments WHERE environment = ?)",
                (w.revision, name),
            )
            await w.tx.execute("DELETE FROM environments WHERE name = ?", (name,))
            await w.event(
                EventType.ENVIRONMENT_DELETED,
                environment=name,
                before=before.model_dump(mode="json"),
            )


async def _environment(tx: Transaction, name: str) -> wire.EnvironmentOut:
    rows = await tx.fetch_all(f"SELECT {_COLUMNS} FROM environments WHERE name = ?", (name,))
    if not rows:
        raise NotFound(f"Could not find environment {name}")
    return _out(rows[0])


def _out(row: Row) -> wire.EnvironmentOut:
    return wire.EnvironmentOut(
        name=row["name"],
        type=row["type"],
        enabled=bool(row["enabled"]),
        sortOrder=row["sort_order"],
    )
