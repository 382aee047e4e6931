"""One flag write: a transaction that takes the next revision first (``records``), the
checks every operation makes inside it, and the changes operations share, made through
``WriteStorage``.

Checks raise domain errors, in Unleash's words; the API layer picks their status.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from pydantic import BaseModel
from typing_extensions import Unpack

from relay.central.event_records import EventLog
from relay.central.flags.records import Reads
from relay.central.flags.write_records import ProjectEnvironment, WriteRecords
from relay.core.audit import Actor, EventType, Subject
from relay.core.errors import InvalidInput, NotFound
from relay.core.flags import (
    MAX_ENVIRONMENT_BYTES,
    FlagRecord,
    StrategyRecord,
    new_strategy_id,
    with_defaults,
)
from relay.store.sql import Database, Transaction
from relay.wire.strategies import Strategy

MAX_SORT_ORDER = 2**31 - 1

S = TypeVar("S")

Written = Callable[[int], None]
"""Told the revision of each committed flag write (the client API's cache listens)."""


def nothing_to_tell(revision: int) -> None:
    """For writers no cache listens to (the command line)."""


CHANGES_KEPT = 10_000
"""Revisions the change log keeps: an SDK further behind gets a hydration (a few KB to a few
MB) instead of its events. 10,000 flag writes is days of a busy team's changes."""


class WriteStorage(Protocol):
    """What every flag write reads and writes (``write_records.WriteRecords``), and all
    the strategy and variant services need; ``db``: where a read looks, ``tx``: the write a
    change is made in.
    """

    async def next_revision(self, tx: Transaction) -> int:
        """The flag revision moved on by one, first thing in a write (``records``)."""
        ...

    async def log_changes(
        self, tx: Transaction, revision: int, deleted: Sequence[tuple[int, str | None]], kept: int
    ) -> None:
        """The change log's rows of a write: every flag and segment that carries its
        revision, and the segments it deleted (with their project); revisions older
        than the last ``kept`` pruned, the floor moved past them."""
        ...

    async def project_exists(self, db: Reads, project: str) -> bool: ...

    async def flag(self, db: Reads, name: str) -> FlagRecord | None: ...

    async def project_environment(
        self, db: Reads, project: str, environment: str
    ) -> ProjectEnvironment | None:
        """None when the environment is not enabled in the project."""
        ...

    async def touch(self, tx: Transaction, name: str, revision: int) -> None:
        """The flag's revision set to the write's: the change log and SDKs see it."""
        ...

    async def set_enabled(
        self, tx: Transaction, name: str, environment: str, enabled: bool
    ) -> None: ...

    async def set_variants(
        self, tx: Transaction, name: str, environment: str, variants: str
    ) -> None:
        """The flag's own variants there (their JSON)."""
        ...

    async def last_sort_order(self, db: Reads, name: str, environment: str) -> int | None:
        """The highest sort order of the flag's strategies there, None without any."""
        ...

    async def add_strategy(
        self, tx: Transaction, name: str, environment: str, strategy: StrategyRecord
    ) -> None:
        """A strategy of the flag there (which gets the environment if it had none)."""
        ...

    async def replace_strategy(self, tx: Transaction, strategy: StrategyRecord) -> None:
        """The saved strategy of ``strategy.id`` becomes ``strategy``."""
        ...

    async def set_sort_order(self, tx: Transaction, id: str, sort_order: int) -> None: ...

    async def delete_strategy(self, tx: Transaction, id: str) -> None: ...

    async def serves(self, db: Reads, name: str, environment: str) -> bool:
        """Whether the flag has a strategy there that is not disabled."""
        ...

    async def turn_off(self, tx: Transaction, name: str, environment: str) -> bool:
        """False when the flag was not on there."""
        ...

    async def segment_constraints(self, db: Reads, ids: Sequence[int]) -> dict[int, str]:
        """The JSON of the constraints of the segments of ``ids`` that exist."""
        ...

    async def segment_projects(self, db: Reads, ids: Sequence[int]) -> dict[int, str | None]:
        """The project (None: global) of the segments of ``ids`` that exist."""
        ...


class Writer:
    def __init__(
        self,
        db: Database,
        written: Written = nothing_to_tell,
        kept: int = CHANGES_KEPT,
        events: EventLog | None = None,
        records: WriteStorage | None = None,
    ) -> None:
        self.db = db
        self.events = EventLog(db) if events is None else events
        self.records: WriteStorage = WriteRecords() if records is None else records
        self._written = written
        self._kept = kept

    @asynccontextmanager
    async def __call__(self, actor: Actor) -> AsyncIterator[FlagWrite]:
        """A write made by ``actor``: the events it records say so. Its change log's
        rows are written last, in its transaction (``WriteStorage.log_changes``)."""
        async with self.db.transaction() as tx:
            revision = await self.records.next_revision(tx)
            write = FlagWrite(tx, revision, actor, self.events, self.records)
            yield write
            await self.records.log_changes(tx, revision, write.deleted_segments, self._kept)
        self._written(write.revision)


class Stored(Generic[S]):
    """A flag service: its writes made through ``writer``, its reads and changes through
    ``records``, the storage protocol declared beside it."""

    def __init__(self, writer: Writer, records: S) -> None:
        self._write = writer
        self._db = writer.db
        self._records = records


class Joined(Writer):
    """Services given this writer make their writes in ``write``, an open one: several
    operations (an import) become one transaction, each with its own checks and events,
    committed (and told to the cache) by whoever opened ``write``."""

    def __init__(self, write: FlagWrite, db: Database) -> None:
        super().__init__(db, events=write.log, records=write.records)
        self._open = write

    @asynccontextmanager
    async def __call__(self, actor: Actor) -> AsyncIterator[FlagWrite]:
        yield self._open


@dataclass(frozen=True, slots=True)
class FlagWrite:
    tx: Transaction
    revision: int
    actor: Actor
    log: EventLog
    records: WriteStorage
    deleted_segments: list[tuple[int, str | None]] = field(default_factory=list)
    """Segments this write deleted, with their project (None: global): they carry no
    revision any more, so the change log is told of them here."""

    async def event(self, type: EventType, **subject: Unpack[Subject]) -> None:
        """Record what this write changed in the event log, in its transaction, as made
        by its actor (every operation calls this once per change it makes)."""
        await self.log.record(self.tx, self.actor, type, **subject)

    async def project_exists(self, project: str) -> None:
        if not await self.records.project_exists(self.tx, project):
            raise NotFound(f"Active project with id {project} does not exist")

    async def flag(self, project: str, name: str, writable: bool = True) -> FlagRecord:
        """The flag, which must be in ``project`` (and, when ``writable``, not archived)."""
        found = await self.records.flag(self.tx, name)
        if found is None or found.project != project:
            message = f'There\'s no feature named "{name}" in project "{project}"'
            if found is not None:
                message += f', but there\'s a feature with that name in project "{found.project}"'
            raise NotFound(message)
        if writable and found.archived_at is not None:
            raise InvalidInput("Cannot perform this operation on archived features")
        return found

    async def project_environment(
        self, project: str, environment: str
    ) -> ProjectEnvironment | None:
        """None when the environment is not enabled in the project."""
        return await self.records.project_environment(self.tx, project, environment)

    async def touch(self, name: str) -> None:
        await self.records.touch(self.tx, name, self.revision)

    async def set_enabled(self, name: str, environment: str, enabled: bool) -> None:
        await self.records.set_enabled(self.tx, name, environment, enabled)

    async def add_strategy(self, flag: FlagRecord, environment: str, body: Strategy) -> str:
        """Save a strategy as Unleash does (``with_defaults``), after the previous ones
        unless a sort order is given; its id."""
        await self._check_segments(flag, body.segments)
        strategy = with_defaults(flag.name, body)
        sort_order = strategy.sortOrder
        if sort_order is None:
            # capped: past 2^31 - 1 it would overflow PostgreSQL's integer
            last = await self.records.last_sort_order(self.tx, flag.name, environment)
            sort_order = 0 if last is None else min(last + 1, MAX_SORT_ORDER)
        saved = _record(new_strategy_id(), strategy, sort_order)
        await self.check_room(flag, environment, saved)
        await self.records.add_strategy(self.tx, flag.name, environment, saved)
        return saved.id

    async def replace_strategy(
        self, flag: FlagRecord, environment: str, current: StrategyRecord, body: Strategy
    ) -> None:
        """A PUT: the strategy becomes ``body`` (keeping its sort order unless one is given)."""
        await self._check_segments(flag, body.segments)
        strategy = with_defaults(flag.name, body)
        sort_order = current.sort_order if strategy.sortOrder is None else strategy.sortOrder
        saved = _record(current.id, strategy, sort_order)
        await self.check_room(flag, environment, saved)
        await self.records.replace_strategy(self.tx, saved)

    async def off_unless_served(self, flag: FlagRecord, environment: str) -> None:
        """An environment left with no strategy that is not disabled is turned off, as
        Unleash does after a strategy is deleted or disabled (an event of its own)."""
        if await self.records.serves(self.tx, flag.name, environment):
            return
        if await self.records.turn_off(self.tx, flag.name, environment):
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
        saved: StrategyRecord | None = None,
        path: str = "/body",
        variants: str | None = None,
    ) -> None:
        """Refuse a write that would take the flag's strategies and variants in
        ``environment`` past ``MAX_ENVIRONMENT_BYTES`` as an SDK older than segments gets
        them, each strategy with its segments' constraints inlined (``saved``: a strategy
        added, or replacing the one of its id; ``variants``: the JSON of the variants that
        replace the flag's there)."""
        strategies = [
            s for s in flag.environment(environment).strategies if saved is None or s.id != saved.id
        ]
        strategies += [saved] if saved is not None else []
        ids = sorted({i for s in strategies for i in s.segments})
        constraints = await self.records.segment_constraints(self.tx, ids)
        inlined = {id: len(text.encode()) for id, text in constraints.items()}
        if variants is None:
            variants = json.dumps(list(flag.environment(environment).variants))
        size = len(variants.encode()) + sum(
            _bytes(s) + sum(inlined.get(i, 0) for i in set(s.segments)) for s in strategies
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
        projects = await self.records.segment_projects(self.tx, ids)
        for index, segment in enumerate(ids):
            path = f"/body/segments/{index}"
            if segment not in projects:
                raise InvalidInput(f"names segment {segment}, which does not exist", path)
            if projects[segment] not in (None, flag.project):
                raise InvalidInput(
                    f"names segment {segment}, which belongs to project {projects[segment]}",
                    path,
                )


def shown(thing: BaseModel | None) -> Any:
    """A thing as an event keeps it before or after a change: as the admin API shows it."""
    return None if thing is None else thing.model_dump(mode="json")


def _bytes(strategy: StrategyRecord) -> int:
    """What a strategy's text takes as stored (``write_records``) and served."""
    texts = (
        strategy.name,
        strategy.title or "",
        json.dumps(list(strategy.constraints)),
        json.dumps(dict(strategy.parameters)),
        json.dumps(list(strategy.variants)),
    )
    return sum(len(text.encode()) for text in texts)


def _record(id: str, strategy: Strategy, sort_order: int) -> StrategyRecord:
    """A strategy as sent (defaults applied), as it will be saved."""
    return StrategyRecord(
        id=id,
        name=strategy.name,
        title=strategy.title,
        disabled=bool(strategy.disabled),
        sort_order=sort_order,
        constraints=tuple(
            c.model_dump(mode="json", exclude_none=True) for c in strategy.constraints
        ),
        parameters=strategy.parameters,
        variants=tuple(v.model_dump(mode="json", exclude_none=True) for v in strategy.variants),
        segments=tuple(strategy.segments),
    )
