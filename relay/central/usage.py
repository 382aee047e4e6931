"""What the central service reads of its usage records: a feature's hourly counts and the
registered applications (the admin API's ``client-metrics`` and ``metrics`` reads)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from relay.core.domain import from_epoch
from relay.store.sql import Database
from relay.wire.admin import ApplicationInstance, ApplicationOut, RawMetric
from relay.wire.client import ConnectVia


class UsageReader:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def raw_metrics(self, feature_name: str, since_hour: int) -> list[RawMetric]:
        # One statement (a consistent snapshot); variants folded in here rather than by a
        # JSON aggregate, whose name differs between SQLite and PostgreSQL.
        rows = await self._db.fetch_all(
            "SELECT m.app_name, m.environment, m.hour, m.yes, m.no, v.variant, v.count"
            " FROM metrics m LEFT JOIN metric_variants v ON v.feature_name = m.feature_name"
            " AND v.app_name = m.app_name AND v.environment = m.environment"
            " AND v.hour = m.hour"
            " WHERE m.feature_name = ? AND m.hour >= ?"
            " ORDER BY m.hour, m.app_name, m.environment, v.variant",
            (feature_name, since_hour),
        )
        found: dict[tuple[str, str, int], RawMetric] = {}
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

    async def applications(self, app_name: str | None = None) -> list[ApplicationOut]:
        where, params = ("WHERE app_name = ?", (app_name,)) if app_name else ("", ())
        rows = await self._db.fetch_all(
            "SELECT app_name, environment, instance_id, connect_via, sdk_version, strategies,"
            f' "interval", started, first_seen, last_seen FROM registrations {where}'
            " ORDER BY app_name, environment, instance_id",
            params,
        )
        apps: dict[str, list[ApplicationInstance]] = {}
        for row in rows:
            apps.setdefault(row["app_name"], []).append(
                ApplicationInstance(
                    instanceId=row["instance_id"],
                    environment=row["environment"],
                    sdkVersion=row["sdk_version"],
                    connectVia=[
                        ConnectVia(appName=a, instanceId=i)
                        for a, i in json.loads(row["connect_via"])
                    ],
                    strategies=json.loads(row["strategies"]),
                    interval=row["interval"],
                    started=_time(row["started"]),
                    firstSeen=datetime.fromtimestamp(row["first_seen"], UTC),
                    lastSeen=datetime.fromtimestamp(row["last_seen"], UTC),
                )
            )
        return [ApplicationOut(appName=n, instances=i) for n, i in apps.items()]


def _time(value: float | None) -> datetime | None:
    return None if value is None else datetime.fromtimestamp(value, UTC)
