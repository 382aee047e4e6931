"""Counts of names no flag has (``UnknownStorage`` of ``unknown``), read from the metrics
in the SQL both backends speak."""

from __future__ import annotations

from relay.central.flags.records import Reads

_UNKNOWN = "m.hour >= ? AND NOT EXISTS (SELECT 1 FROM features f WHERE f.name = m.feature_name)"


class UnknownRecords:
    async def reports(
        self, db: Reads, since: int, names: int, most: int
    ) -> list[tuple[str, str, str, int]]:
        rows = await db.fetch_all(
            "SELECT m.feature_name, m.app_name, m.environment, max(coalesce(m.arrived, m.hour))"
            " FROM metrics m"
            f" WHERE {_UNKNOWN} AND m.feature_name IN (SELECT DISTINCT m.feature_name"
            f" FROM metrics m WHERE {_UNKNOWN} ORDER BY m.feature_name LIMIT {int(names)})"
            " GROUP BY m.feature_name, m.app_name, m.environment"
            f" ORDER BY m.feature_name, m.app_name, m.environment LIMIT {int(most)}",
            (since, since),
        )
        return [(row[0], row[1], row[2], int(row[3])) for row in rows]
