"""What the central service reads of its usage records: a feature's hourly counts, the
registered applications (the admin API's ``client-metrics`` and ``metrics`` reads) and the
names counted that no flag has. The records are ``UsageRecords``'
(``relay.central.usage_records`` on either backend).

Each read first waits for a fold of the ingest log begun after it was asked
(``relay.store.fold``): it includes every count answered 202 before it, on any instance."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Protocol

from relay.core.ingest_batch import hour_start
from relay.wire.admin import ApplicationInstance, RawMetric
from relay.wire.flags import UnknownFlag


@dataclass(frozen=True, slots=True)
class FlagUsage:
    """A feature's counts in one environment, as the web page's flag list shows them."""

    last_seen: datetime | None
    """When its counts last arrived (within ``SUMMARY_DAYS``); for counts stored before
    arrival times were kept, the start of their hour."""
    last_hour: int
    last_day: int


SUMMARY_DAYS = 7

Position = tuple[str, str, int]
"""Where a row of a feature's counts sits in the read order: (app, environment, hour)."""
Place = tuple[str, str, str]
"""Where an instance sits in the read order: (app, environment, instance)."""


@dataclass(frozen=True, slots=True)
class Instance:
    app_name: str
    instance: ApplicationInstance

    @property
    def place(self) -> Place:
        return (self.app_name, self.instance.environment, self.instance.instanceId)


class UsageRecords(Protocol):
    """The usage tables as they stand (what a fold has put there), each read bounded."""

    async def raw_metrics(
        self, feature_name: str, since_hour: int, after: Position | None, limit: int
    ) -> list[RawMetric]:
        """Up to ``limit`` of a feature's rows from ``since_hour`` on, in the order of
        (app, environment, hour), after the row at ``after``, each with its variants."""
        ...

    async def summary(
        self, names: Sequence[str], hour: int, day: int, week: int
    ) -> dict[tuple[str, str], FlagUsage]:
        """(feature, environment) of ``names`` counted since ``week``: the counts of the
        hours from ``hour`` and from ``day`` on, and when counts last arrived."""
        ...

    async def instances(
        self, app_name: str | None, after: Place | None, limit: int
    ) -> list[Instance]:
        """Up to ``limit`` registered instances after ``after`` in the order of (app,
        environment, instance), of ``app_name`` only when given."""
        ...

    async def counts_arrived(self, apps: Sequence[str]) -> dict[str, list[tuple[str, float]]]:
        """When each of ``apps``' counts last arrived, per environment (environment order)."""
        ...

    async def relayed(self, scanned: int, limit: int) -> list[tuple[str, list[tuple[str, str]]]]:
        """(application, its ``connectVia`` hops) of up to ``limit`` instances that came
        through relays, among the ``scanned`` most recently seen."""
        ...

    async def unknown_flags(self) -> list[UnknownFlag]: ...


class UsageReader:
    def __init__(self, records: UsageRecords, caught_up: Callable[[], Awaitable[None]]) -> None:
        """``caught_up``: returns once every count acknowledged before the call is in the
        tables (``Folder.caught_up``)."""
        self._records = records
        self._caught_up = caught_up

    async def raw_metrics(
        self, feature_name: str, since_hour: int, after: Position | None = None, limit: int = 500
    ) -> list[RawMetric]:
        """Up to ``limit`` of a feature's rows from ``since_hour`` on, in the primary key's
        order (app, environment, hour), after the row at ``after``: a page read along the
        index, however many rows the feature has."""
        await self._caught_up()
        return await self._records.raw_metrics(feature_name, since_hour, after, limit)

    async def summary(
        self, names: Sequence[str], now: datetime | None = None
    ) -> dict[tuple[str, str], FlagUsage]:
        """(feature, environment) -> its usage, for the features ``names`` (a page of
        them: the cost is theirs, however many names have counts): the counts (yes + no) of
        the hour windows begun in the last hour (so up to two windows) and in the last 24
        hours, and when counts last arrived in ``SUMMARY_DAYS`` days (older counts are not read)."""
        if not names:
            return {}
        await self._caught_up()
        now = now or datetime.now(UTC)
        hour, day, week = (hour_start(now - timedelta(hours=h)) for h in (1, 24, 24 * SUMMARY_DAYS))
        return await self._records.summary(names, hour, day, week)

    async def instances(
        self, app_name: str | None, after: Place | None, limit: int
    ) -> list[Instance]:
        """Up to ``limit`` registered instances after ``after`` in the primary key's order
        (app, environment, instance), of ``app_name`` only when given: a page read along
        the index, however many instances there are."""
        await self._caught_up()
        return await self._records.instances(app_name, after, limit)

    async def counts_arrived(self, apps: Sequence[str]) -> dict[str, list[tuple[str, float]]]:
        """When each of ``apps``' counts last arrived, per environment (environment order):
        an application fed through a relay is seen by its counts, which name no instance.
        Read by primary key for the applications of one page."""
        if not apps:
            return {}
        await self._caught_up()
        return await self._records.counts_arrived(apps)

    async def relayed(self, scanned: int, limit: int) -> list[tuple[str, list[tuple[str, str]]]]:
        """(application, its ``connectVia`` hops) of up to ``limit`` instances that came
        through relays, among the ``scanned`` most recently seen (read along the last-seen
        index): what the relays page tells of relays known only from registrations, at a
        bounded cost however many instances there are."""
        await self._caught_up()
        return await self._records.relayed(scanned, limit)

    async def unknown_flags(self) -> list[UnknownFlag]:
        """Names counted in the last 24 hours that no flag has (``flags.unknown``)."""
        await self._caught_up()
        return await self._records.unknown_flags()
