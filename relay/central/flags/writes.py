"""One flag write: a transaction that takes the next revision first (``records``), the
checks every operation makes inside it, and the statements operations share.

Checks raise domain errors, in Unleash's words; the API layer picks their status.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from relay.central.event_records import EventLog
from relay.central.flags.records import load_flags, next_revision
from relay.core.audit import Actor, EventType
from relay.core.delta import FLAG, SEGMENT
from relay.core.errors import InvalidInput, NotFound
from relay.core.flags import (
    MAX_ENVIRONMENT_BYTES,
    FlagRecord,
    StrategyRecord,
    new_strategy_id,
    with_defaults,
)
from relay.store.sql import Database, Row, Transaction
from relay.wire.strategies import Strategy

MAX_SORT_ORDER = 2**31 - 1

Written = Callable[[int], None]
"""Told the revision of each committed flag write (the client API's cache listens)."""


def nothing_to_tell(revision: int) -> None:
    """For writers no cache listens to (the command line)."""


CHANGES_KEPT = 10_000
"""Revisions the change log keeps: an SDK further behind gets a hydration (a few KB to a few
MB) instead of its events. 10,000 flag writes is days of a busy team's changes."""


class Writer:
    def __init__(
        self,
        db: Database,
        written: Written = nothing_to_tell,
        kept: int = CHANGES_KEPT,
        events: EventLog | None = None,
    ) -> None:
        self.db = db
        self.events = EventLog(db) if events is None else events
        self._written = written
        self._kept = kept

    @asynccontextmanager
    async def __call__(self, actor: Actor) -> AsyncIterator[FlagWrite]:
        """A write made by ``actor``: the events it records say so."""
        async with self.db.transaction() as tx:
            write = FlagWrite(tx, await next_revision(tx), actor, self.events)
            yield write
            await log_changes(write, self._kept)
        self._written(write.revision)


class Joined(Writer):
    """Services given this writer make their writes in ``write``, an open one: several
    operations (an import) become one transaction, each with its own checks and events,
    committed (and told to the cache) by whoever opened ``write``."""

    def __init__(self, write: FlagWrite, db: Database) -> None:
        super().__init__(db, events=write.log)
        self._open = write

    @asynccontextmanager
    async def __call__(self, actor: Actor) -> AsyncIterator[FlagWrite]:
        yield self._open


async def log_changes(write: FlagWrite, kept: int) -> None:
    """The change log's rows of this write, in its transaction: every flag and segment that
    carries its revision (each operation sets it on what it changes), the segments it
    deleted (a segment with its project, so that a key of other projects never hears of
    it); and revisions older than the last ``kept`` pruned, the floor moved past them."""
    tx, revision = write.tx, write.revision
    await tx.execute(
        "INSERT INTO flag_changes (revision, kind, key, project)"
        f" SELECT ?, '{FLAG}', name, project_id FROM features WHERE revision = ?",
        (revision, revision),
    )
    await tx.execute(
        "INSERT INTO flag_changes (revision, kind, key, project)"
        f" SELECT ?, '{SEGMENT}', CAST(id AS TEXT), project_id FROM segments WHERE revision = ?",
        (revision, revision),
    )
    for id, project in write.deleted_segments:
        await tx.execute(
            "INSERT INTO flag_changes (revision, kind, key, project) VALUES (?, ?, ?, ?)",
            (revision, SEGMENT, str(id), project),
        )
    floor = revision - kept
    if floor > 0:
        await tx.execute("DELETE FROM flag_changes WHERE revision <= ?", (floor,))
        await tx.execute(
            "UPDATE flag_revision SET changes_floor = ? WHERE id = 1 AND changes_floor < ?",
            (floor, floor),
        )


@dataclass(frozen=True, slots=True)
class FlagWrite:
    tx: Transaction
    revision: int
    actor: Actor
    log: EventLog
    deleted_segments: list[tuple[int, str | None]] = field(default_factory=list)
    """Segments this write deleted, with their project (None: global): they carry no
    revision any more, so the change log is told of them here."""

    async def event(
        self,
        type: EventType,
        *,
        project: str | None = None,
        feature: str | None = None,
        environment: str | None = None,
        before: Any = None,
        after: Any = None,
    ) -> None:
        """Record what this write changed in the event log, in its transaction, as made
        by its actor (every operation calls this once per change it makes)."""
        await self.log.record(
            self.tx,
            self.actor,
            type,
            project=project,
            feature=feature,
            environment=environment,
            before=before,
            after=after,
        )

    async def project_exists(self, project: str) -> None:
        if not await self.tx.fetch_all("SELECT 1 FROM projects WHERE id = ?", (project,)):
            raise NotFound(f"Active project with id {project} does not exist")

    async def flag(self, project: str, name: str, writable: bool = True) -> FlagRecord:
        """The flag, which must be in ``project`` (and, when ``writable``, not archived)."""
        found = await load_flags(self.tx, "name = ?", (name,))
        if not found or found[0].project != project:
            message = f'There\'s no feature named "{name}" in project "{project}"'
            if found:
                message += (
                    f', but there\'s a feature with that name in project "{found[0].project}"'
                )
            raise NotFound(message)
        if writable and found[0].archived_at is not None:
            raise InvalidInput("Cannot perform this operation on archived features")
        return found[0]

    async def default_strategy(self, project: str, environment: str) -> Row | None:
        """The project environment's record (its default strategy), None when the
        environment is not enabled in the project."""
        rows = await self.tx.fetch_all(
            "SELECT default_strategy FROM project_environments"
            " WHERE project_id = ? AND environment = ?",
            (project, environment),
        )
        return rows[0] if rows else None

    async def touch(self, name: str) -> None:
        await self.tx.execute(
            "UPDATE features SET revision = ? WHERE name = ?", (self.revision, name)
        )

    async def set_enabled(self, name: str, environment: str, enabled: bool) -> None:
        await self.tx.execute(
            "INSERT INTO feature_environments (feature_name, environment, enabled)"
            " VALUES (?, ?, ?) ON CONFLICT (feature_name, environment)"
            " DO UPDATE SET enabled = excluded.enabled",
            (name, environment, int(enabled)),
        )

    async def add_strategy(self, flag: FlagRecord, environment: str, body: Strategy) -> str:
        """Save a strategy as Unleash does (``with_defaults``), after the previous ones
        unless a sort order is given; its id."""
        await self._check_segments(flag, body.segments)
        strategy = with_defaults(flag.name, body)
        sort_order = strategy.sortOrder
        if sort_order is None:
            [row] = await self.tx.fetch_all(
                "SELECT max(sort_order) FROM feature_strategies"
                " WHERE feature_name = ? AND environment = ?",
                (flag.name, environment),
            )  # + 1 here, not in SQL: after 2^31 - 1 it would overflow PostgreSQL's integer
            sort_order = 0 if row[0] is None else min(int(row[0]) + 1, MAX_SORT_ORDER)
        columns = _body_columns(strategy, sort_order)
        await self.check_room(flag, environment, None, (columns, strategy.segments))
        await self.tx.execute(
            "INSERT INTO feature_environments (feature_name, environment) VALUES (?, ?)"
            " ON CONFLICT (feature_name, environment) DO NOTHING",
            (flag.name, environment),
        )
        strategy_id = new_strategy_id()
        await self.tx.execute(
            "INSERT INTO feature_strategies (id, feature_name, environment, name, title,"
            " disabled, sort_order, constraints, parameters, variants, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                strategy_id,
                flag.name,
                environment,
                *columns,
                time.time(),
            ),
        )
        await self._link_segments(strategy_id, strategy.segments)
        return strategy_id

    async def replace_strategy(
        self, flag: FlagRecord, environment: str, current: StrategyRecord, body: Strategy
    ) -> None:
        """A PUT: the strategy becomes ``body`` (keeping its sort order unless one is given)."""
        await self._check_segments(flag, body.segments)
        strategy = with_defaults(flag.name, body)
        sort_order = current.sort_order if strategy.sortOrder is None else strategy.sortOrder
        columns = _body_columns(strategy, sort_order)
        await self.check_room(flag, environment, current.id, (columns, strategy.segments))
        await self.tx.execute(
            "UPDATE feature_strategies SET name = ?, title = ?, disabled = ?, sort_order = ?,"
            " constraints = ?, parameters = ?, variants = ? WHERE id = ?",
            (*columns, current.id),
        )
        await self.tx.execute(
            "DELETE FROM feature_strategy_segments WHERE strategy_id = ?", (current.id,)
        )
        await self._link_segments(current.id, strategy.segments)

    async def off_unless_served(self, flag: FlagRecord, environment: str) -> None:
        """An environment left with no strategy that is not disabled is turned off, as
        Unleash does after a strategy is deleted or disabled (an event of its own)."""
        rows = await self.tx.fetch_all(
            "SELECT 1 FROM feature_strategies"
            " WHERE feature_name = ? AND environment = ? AND disabled = 0",
            (flag.name, environment),
        )
        if rows:
            return
        turned_off = await self.tx.execute(
            "UPDATE feature_environments SET enabled = 0"
            " WHERE feature_name = ? AND environment = ? AND enabled = 1",
            (flag.name, environment),
        )
        if turned_off:
            await self.event(
                EventType.FEATURE_ENVIRONMENT_DISABLED,
                project=flag.project,
                feature=flag.name,
                environment=environment,
            )

    async def check_room(
        self,
        flag: FlagRecord,
        environment: str,
        replaced: str | None = None,
        added: tuple[tuple[object, ...], Sequence[int]] | None = None,
        path: str = "/body",
        variants: str | None = None,
    ) -> None:
        """Refuse a write that would take the flag's strategies and variants in
        ``environment`` past ``MAX_ENVIRONMENT_BYTES`` as an SDK older than segments gets
        them, each strategy with its segments' constraints inlined (``replaced``: the id
        of the strategy ``added`` replaces; ``added``: its columns and segment ids;
        ``variants``: the JSON of the variants that replace the flag's there)."""
        strategies: list[tuple[tuple[object, ...], Sequence[int]]] = [
            (_record_columns(s), s.segments)
            for s in flag.environment(environment).strategies
            if s.id != replaced
        ]
        strategies += [added] if added is not None else []
        ids = sorted({i for _, segments in strategies for i in segments})
        marks = ", ".join("?" * len(ids))
        rows = (
            await self.tx.fetch_all(
                f"SELECT id, constraints FROM segments WHERE id IN ({marks})", ids
            )
            if ids
            else []
        )
        inlined = {int(row[0]): len(str(row[1]).encode()) for row in rows}
        if variants is None:
            variants = json.dumps(list(flag.environment(environment).variants))
        size = len(variants.encode()) + sum(
            _bytes(columns) + sum(inlined.get(i, 0) for i in set(segments))
            for columns, segments in strategies
        )
        if size > MAX_ENVIRONMENT_BYTES:
            raise InvalidInput(
                f"would make the strategies and variants of {flag.name} in {environment}"
                f" {size} bytes of JSON with their segments, over the {MAX_ENVIRONMENT_BYTES}"
                " a flag may hold in one environment",
                path,
            )

    async def _check_segments(self, flag: FlagRecord, ids: Sequence[int]) -> None:
        if not ids:
            return
        marks = ", ".join("?" * len(ids))
        rows = await self.tx.fetch_all(
            f"SELECT id, project_id FROM segments WHERE id IN ({marks})", list(ids)
        )
        projects = {int(row[0]): row[1] for row in rows}
        for index, segment in enumerate(ids):
            path = f"/body/segments/{index}"
            if segment not in projects:
                raise InvalidInput(f"names segment {segment}, which does not exist", path)
            if projects[segment] not in (None, flag.project):
                raise InvalidInput(
                    f"names segment {segment}, which belongs to project {projects[segment]}",
                    path,
                )

    async def _link_segments(self, strategy_id: str, ids: Sequence[int]) -> None:
        for segment in sorted(set(ids)):
            await self.tx.execute(
                "INSERT INTO feature_strategy_segments (strategy_id, segment_id) VALUES (?, ?)",
                (strategy_id, segment),
            )


def _bytes(columns: tuple[object, ...]) -> int:
    return sum(len(column.encode()) for column in columns if isinstance(column, str))


def _record_columns(strategy: StrategyRecord) -> tuple[object, ...]:
    """A saved strategy's text columns, as ``_body_columns`` wrote them."""
    return (
        strategy.name,
        strategy.title,
        json.dumps(list(strategy.constraints)),
        json.dumps(dict(strategy.parameters)),
        json.dumps(list(strategy.variants)),
    )


def _body_columns(strategy: Strategy, sort_order: int) -> tuple[object, ...]:
    """name, title, disabled, sort_order, constraints, parameters, variants."""
    return (
        strategy.name,
        strategy.title,
        int(bool(strategy.disabled)),
        sort_order,
        json.dumps([c.model_dump(mode="json", exclude_none=True) for c in strategy.constraints]),
        json.dumps(strategy.parameters),
        json.dumps([v.model_dump(mode="json", exclude_none=True) for v in strategy.variants]),
    )
