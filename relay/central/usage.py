"""What the central service reads of its usage records: a feature's hourly counts, the
registered applications (the admin API's ``client-metrics`` and ``metrics`` reads) and the
names counted that no flag has.

Each read first waits for a fold of the ingest log begun after it was asked
(``relay.store.fold``): it includes every count answered 202 before it, on any instance."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from relay.central.flags.unknown import unknown_flags
from relay.core.domain import from_epoch, hour_start
from relay.store.sql import Database, Row
from relay.wire.admin import ApplicationInstance, RawMetric
from relay.wire.client import ConnectVia
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


class UsageReader:
    def __init__(self, db: Database, caught_up: Callable[[], Awaitable[None]]) -> None:
        """``caught_up``: returns once every count acknowledged before the call is in the
        tables (``Folder.caught_up``)."""
        self._db = db
        self._caught_up = caught_up

    async def raw_metrics(
        self, feature_name: str, since_hour: int, after: Position | None = None, limit: int = 500
    ) -> list[RawMetric]:
        """Up to ``limit`` of a feature's rows from ``since_hour`` on, in the primary key's
        order (app, environment, hour), after the row at ``after``: a page read along the
        index, however many rows the feature has. One statement: a consistent snapshot, with
        variants folded in here rather than by a JSON aggregate, whose name differs between
        SQLite and PostgreSQL."""
        await self._caught_up()
        where, params = "", [feature_name, since_hour]
        if after is not None:
            where = " AND (app_name, environment, hour) > (?, ?, ?)"
            params += after
        rows = await self._db.fetch_all(
            "WITH page AS (SELECT app_name, environment, hour, yes, no FROM metrics"
            f" WHERE feature_name = ? AND hour >= ?{where}"
            " ORDER BY app_name, environment, hour LIMIT ?)"
            " SELECT p.app_name, p.environment, p.hour, p.yes, p.no, v.variant, v.count"
            " FROM page p LEFT JOIN metric_variants v ON v.feature_name = ?"
            " AND v.app_name = p.app_name AND v.environment = p.environment AND v.hour = p.hour"
            " ORDER BY p.app_name, p.environment, p.hour, v.variant",
            [*params, limit, feature_name],
        )
        found: dict[Position, RawMetric] = {}
        for row in rows:
            key = (row["app_name"], row["environment"], row["hour"])
            metric = found.get(key)
            if metric is None:
                metric = found[key] = RawMetric(
                    featureName=feature_name,
                    appName=row["app_name"],
                    environment=row["environment"],
                    timestamp=from_epoch(row["hour"]),
                    yes=row["yes"],
                    no=row["no"],
                    variants={},
                )
            if row["variant"] is not None:
                metric.variants[row["variant"]] = row["count"]
        return list(found.values())

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
        rows = await self._db.fetch_all(
            "SELECT feature_name, environment, max(coalesce(arrived, hour)),"
            " sum(CASE WHEN hour >= ? THEN yes + no ELSE 0 END),"
            " sum(CASE WHEN hour >= ? THEN yes + no ELSE 0 END)"
            f" FROM metrics WHERE feature_name IN ({', '.join('?' * len(names))})"
            " AND hour >= ? GROUP BY feature_name, environment",
            (hour, day, *names, week),
        )
        return {
            (row[0], row[1]): FlagUsage(from_epoch(int(row[2])), int(row[3]), int(row[4]))
            for row in rows
        }

    async def instances(
        self, app_name: str | None, after: Place | None, limit: int
    ) -> list[Instance]:
        """Up to ``limit`` registered instances after ``after`` in the primary key's order
        (app, environment, instance), of ``app_name`` only when given: a page read along
        the index, however many instances there are."""
        await self._caught_up()
        where, params = ["1 = 1"], list[object]()
        if app_name is not None:  # then the cursor's app is this one: the range is in it
            where.append("app_name = ?")
            params.append(app_name)
            if after is not None:
                where.append("(environment, instance_id) > (?, ?)")
                params += after[1:]
        elif after is not None:
            where.append("(app_name, environment, instance_id) > (?, ?, ?)")
            params += after
        rows = await self._db.fetch_all(
            "SELECT app_name, environment, instance_id, connect_via, sdk_version, strategies,"
            ' "interval", started, first_seen, last_seen FROM registrations'
            f" WHERE {' AND '.join(where)} ORDER BY app_name, environment, instance_id LIMIT ?",
            [*params, limit],
        )
        return [Instance(row["app_name"], _instance(row)) for row in rows]

    async def counts_arrived(self, apps: Sequence[str]) -> dict[str, list[tuple[str, float]]]:
        """When each of ``apps``' counts last arrived, per environment (environment order):
        an application fed through a relay is seen by its counts, which name no instance.
        Read by primary key for the applications of one page."""
        if not apps:
            return {}
        await self._caught_up()
        marks = ", ".join("?" * len(apps))
        rows = await self._db.fetch_all(
            "SELECT app_name, environment, arrived FROM application_counts"
            f" WHERE app_name IN ({marks}) ORDER BY app_name, environment",
            list(apps),
        )
        found: dict[str, list[tuple[str, float]]] = {}
        for row in rows:
            found.setdefault(row[0], []).append((row[1], float(row[2])))
        return found

    async def relayed(self, scanned: int, limit: int) -> list[tuple[str, list[tuple[str, str]]]]:
        """(application, its ``connectVia`` hops) of up to ``limit`` instances that came
        through relays, among the ``scanned`` most recently seen (read along the last-seen
        index): what the relays page tells of relays known only from registrations, at a
        bounded cost however many instances there are."""
        await self._caught_up()
        rows = await self._db.fetch_all(
            "SELECT app_name, connect_via FROM (SELECT app_name, connect_via FROM registrations"
            " ORDER BY last_seen DESC LIMIT ?) recent WHERE connect_via <> '[]' LIMIT ?",
            (scanned, limit),
        )
        return [(row[0], [(a, i) for a, i in json.loads(row[1])]) for row in rows]

    async def unknown_flags(self) -> list[UnknownFlag]:
        """Names counted in the last 24 hours that no flag has (``flags.unknown``)."""
        await self._caught_up()
        return await unknown_flags(self._db)


def _instance(row: Row) -> ApplicationInstance:
    return ApplicationInstance(
        instanceId=row["instance_id"],
        environment=row["environment"],
        sdkVersion=row["sdk_version"],
        connectVia=[ConnectVia(appName=a, instanceId=i) for a, i in json.loads(row["connect_via"])],
        strategies=json.loads(row["strategies"]),
        interval=row["interval"],
        started=_time(row["started"]),
        firstSeen=datetime.fromtimestamp(row["first_seen"], UTC),
        lastSeen=datetime.fromtimestamp(row["last_seen"], UTC),
    )


def _time(value: float | None) -> datetime | None:
    return None if value is None else datetime.fromtimestamp(value, UTC)
