"""Ingested counts and registrations, written by group commit: the central service's records
in standalone mode, the hour-window buffer in relay mode (same tables, same code).

Each ``write`` is one request's aggregated batch. Requests that arrive together share one
transaction: their batches are summed in memory first, so a hot key costs one upsert per
commit rather than one per request. An ``Idempotency-Key`` seen within the TTL makes a
request a replay: answered as accepted, applied zero times.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import NamedTuple

import aiosqlite

from relay import models
from relay.domain import IngestBatch, epoch, from_epoch
from relay.store.groupcommit import GroupCommitter
from relay.store.sqlite import SqliteDatabase


class IngestItem(NamedTuple):
    batch: IngestBatch
    idempotency_key: str | None


class SqliteMetricsStore:
    def __init__(
        self,
        db: SqliteDatabase,
        max_group: int,
        idempotency_ttl: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._db = db
        self._ttl = idempotency_ttl
        self._clock = clock
        self._committer: GroupCommitter[IngestItem, bool] = GroupCommitter(
            db, self._apply, max_group
        )

    def start(self) -> None:
        self._committer.start()

    async def stop(self) -> None:
        await self._committer.stop()

    async def write(self, batch: IngestBatch, idempotency_key: str | None) -> bool:
        """Durably add a batch; False when the idempotency key marks it as a replay."""
        if batch.is_empty() and idempotency_key is None:
            return True
        return await self._committer.submit(IngestItem(batch, idempotency_key))

    async def _apply(self, conn: aiosqlite.Connection, items: Sequence[IngestItem]) -> list[bool]:
        now = self._clock()
        seen = await _seen_keys(
            conn, [i.idempotency_key for i in items if i.idempotency_key], now - self._ttl
        )
        merged = IngestBatch()
        applied: list[bool] = []
        new_keys: list[tuple[str, float]] = []
        for item in items:
            key = item.idempotency_key
            if key is not None:
                if key in seen:
                    applied.append(False)
                    continue
                seen.add(key)
                new_keys.append((key, now))
            merged.merge(item.batch)
            applied.append(True)
        await _upsert(conn, merged)
        if new_keys:
            await conn.executemany(
                "INSERT INTO idempotency_keys (key, seen_at) VALUES (?, ?)"
                " ON CONFLICT (key) DO UPDATE SET seen_at = excluded.seen_at",
                new_keys,
            )
        return applied

    async def prune_idempotency(self) -> int:
        async with self._db.write() as conn:
            cursor = await conn.execute(
                "DELETE FROM idempotency_keys WHERE seen_at < ?", (self._clock() - self._ttl,)
            )
            return cursor.rowcount

    async def raw_metrics(self, feature_name: str, since_hour: int) -> list[models.RawMetric]:
        rows = await self._db.fetch_all(
            "SELECT m.app_name, m.environment, m.hour, m.yes, m.no,"
            " (SELECT json_group_object(v.variant, v.count) FROM metric_variants v"
            "  WHERE v.feature_name = m.feature_name AND v.app_name = m.app_name"
            "  AND v.environment = m.environment AND v.hour = m.hour) AS variants"
            " FROM metrics m WHERE m.feature_name = ? AND m.hour >= ?"
            " ORDER BY m.hour, m.app_name, m.environment",
            (feature_name, since_hour),
        )
        return [
            models.RawMetric(
                featureName=feature_name,
                appName=row["app_name"],
                environment=row["environment"],
                timestamp=from_epoch(row["hour"]),
                yes=row["yes"],
                no=row["no"],
                variants=json.loads(row["variants"]) if row["variants"] else {},
            )
            for row in rows
        ]

    async def applications(self, app_name: str | None = None) -> list[models.ApplicationOut]:
        where, params = ("WHERE app_name = ?", (app_name,)) if app_name else ("", ())
        rows = await self._db.fetch_all(
            "SELECT app_name, environment, instance_id, connect_via, sdk_version, strategies,"
            f" interval, started, first_seen, last_seen FROM registrations {where}"
            " ORDER BY app_name, environment, instance_id",
            params,
        )
        apps: dict[str, list[models.ApplicationInstance]] = {}
        for row in rows:
            apps.setdefault(row["app_name"], []).append(
                models.ApplicationInstance(
                    instanceId=row["instance_id"],
                    environment=row["environment"],
                    sdkVersion=row["sdk_version"],
                    connectVia=[
                        models.ConnectVia(appName=a, instanceId=i)
                        for a, i in json.loads(row["connect_via"])
                    ],
                    strategies=json.loads(row["strategies"]),
                    interval=row["interval"],
                    started=_time(row["started"]),
                    firstSeen=datetime.fromtimestamp(row["first_seen"], UTC),
                    lastSeen=datetime.fromtimestamp(row["last_seen"], UTC),
                )
            )
        return [models.ApplicationOut(appName=n, instances=i) for n, i in apps.items()]


async def _seen_keys(conn: aiosqlite.Connection, keys: list[str], cutoff: float) -> set[str]:
    if not keys:
        return set()
    marks = ",".join("?" * len(keys))
    async with conn.execute(
        f"SELECT key FROM idempotency_keys WHERE seen_at >= ? AND key IN ({marks})",
        (cutoff, *keys),
    ) as cursor:
        return {row[0] for row in await cursor.fetchall()}


async def _upsert(conn: aiosqlite.Connection, batch: IngestBatch) -> None:
    if batch.counts:
        await conn.executemany(
            "INSERT INTO metrics (feature_name, app_name, environment, hour, yes, no)"
            " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO UPDATE"
            " SET yes = yes + excluded.yes, no = no + excluded.no",
            [
                (k.feature_name, k.app_name, k.environment, k.hour, c.yes, c.no)
                for k, c in batch.counts.items()
            ],
        )
        variants = [
            (k.feature_name, k.app_name, k.environment, k.hour, name, count)
            for k, c in batch.counts.items()
            for name, count in c.variants.items()
        ]
        if variants:
            await conn.executemany(
                "INSERT INTO metric_variants"
                " (feature_name, app_name, environment, hour, variant, count)"
                " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO UPDATE"
                " SET count = count + excluded.count",
                variants,
            )
    if batch.registrations:
        await conn.executemany(
            "INSERT INTO registrations (app_name, environment, instance_id, connect_via,"
            " sdk_version, strategies, interval, started, first_seen, last_seen)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO UPDATE SET"
            " connect_via = excluded.connect_via, sdk_version = excluded.sdk_version,"
            " strategies = excluded.strategies, interval = excluded.interval,"
            " started = coalesce(excluded.started, started), last_seen = excluded.last_seen",
            [
                (
                    r.key.app_name,
                    r.key.environment,
                    r.key.instance_id,
                    json.dumps([list(hop) for hop in r.connect_via]),
                    r.sdk_version,
                    json.dumps(list(r.strategies)),
                    r.interval,
                    epoch(r.started) if r.started else None,
                    epoch(r.seen_at),
                    epoch(r.seen_at),
                )
                for r in batch.registrations.values()
            ],
        )


def _time(value: float | None) -> datetime | None:
    return None if value is None else datetime.fromtimestamp(value, UTC)
