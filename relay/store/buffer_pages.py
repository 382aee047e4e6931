"""Pages of what the relay buffer holds, for Unleash Edge's ``metricsbatch`` view
(``relay.edge.backstage``): each read bounded by the page asked, never by the buffer."""

from __future__ import annotations

from sqlite3 import Row

from relay.store.sqlite import SqliteDatabase


class BufferPages:
    def __init__(self, db: SqliteDatabase) -> None:
        self._db = db

    async def registrations(self, most: int) -> list[Row]:
        """The oldest seen registrations waiting: app name, environment, instance id, SDK
        version, interval, start."""
        return await self._db.fetch_all(
            "SELECT app_name, environment, instance_id, sdk_version, interval, started"
            " FROM registrations ORDER BY last_seen LIMIT ?",
            (max(0, most),),
        )

    async def batch_bodies(self, most_entries: int) -> list[bytes]:
        """The outbox's batches' bodies, oldest first, while their entries add up to
        ``most_entries`` at most."""
        rows = await self._db.fetch_all(
            "SELECT body FROM (SELECT id, body, sum(entries) OVER (ORDER BY id) AS held"
            " FROM outbox) WHERE held <= ? ORDER BY id",
            (most_entries,),
        )
        return [row[0] for row in rows]

    async def counts(self, most: int) -> list[Row]:
        """The counts not yet cut into batches, oldest hour first, at most ``most``, each row
        once per variant (feature, app, environment, hour, yes, no, variant, count; the
        variant None for a count without any)."""
        # one read: the oldest counts, each with its own variants found by their key (the
        # primary key of metric_variants), so the work is bounded by the page, not the buffer
        return await self._db.fetch_all(
            "SELECT m.feature_name, m.app_name, m.environment, m.hour, m.yes, m.no, v.variant,"
            " v.count FROM (SELECT * FROM metrics ORDER BY hour LIMIT ?) m"
            " LEFT JOIN metric_variants v USING (feature_name, app_name, environment, hour)",
            (max(0, most),),
        )
