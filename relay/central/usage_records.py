"""The usage tables of the central database (``metrics``, ``metric_variants``,
``registrations``, ``application_counts``), on either backend: the ``UsageRecords`` of
``relay.central.usage``. Every read is bounded by its page and runs along an index."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime

from relay.central.flags.unknown import unknown_flags
from relay.central.usage import FlagUsage, Instance, Place, Position
from relay.core.ingest_batch import from_epoch
from relay.store.sql import Database, Row
from relay.wire.admin import ApplicationInstance, RawMetric
from relay.wire.client import ConnectVia
from relay.wire.flags import UnknownFlag


class SqlUsageRecords:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def raw_metrics(
        self, feature_name: str, since_hour: int, after: Position | None, limit: int
    ) -> list[RawMetric]:
        """One statement: a consistent snapshot, with variants folded in here rather than
        by a JSON aggregate, whose name differs between SQLite and PostgreSQL."""
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
        self, names: Sequence[str], hour: int, day: int, week: int
    ) -> dict[tuple[str, str], FlagUsage]:
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
        rows = await self._db.fetch_all(
            "SELECT app_name, connect_via FROM (SELECT app_name, connect_via FROM registrations"
            " ORDER BY last_seen DESC LIMIT ?) recent WHERE connect_via <> '[]' LIMIT ?",
            (scanned, limit),
        )
        return [(row[0], [(a, i) for a, i in json.loads(row[1])]) for row in rows]

    async def unknown_flags(self) -> list[UnknownFlag]:
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
