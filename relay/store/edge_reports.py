"""The latest report of each relay (``edge_reports``), on either backend: the central
service keeps every relay of the tree, a relay those of the relays it serves."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from relay.store.sql import ROWS_PER_STATEMENT, Database, upsert


@dataclass(frozen=True, slots=True)
class StoredReport:
    identifier: str
    app_name: str
    via: str | None
    reported_at: float
    report: str
    """The report as JSON (``relay.wire.edges.EdgeInstanceData``)."""


class EdgeReportStore:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def save(self, reports: Sequence[StoredReport]) -> None:
        """Each replaces the relay's previous one. Written in identifier order, so two
        instances saving overlapping trees cannot deadlock."""
        rows = sorted(
            {
                r.identifier: (r.identifier, r.app_name, r.via, r.reported_at, r.report)
                for r in reports
            }.values()
        )
        if not rows:
            return
        async with self._db.transaction() as tx:
            await upsert(
                tx,
                "INSERT INTO edge_reports (identifier, app_name, via, reported_at, report)",
                "ON CONFLICT (identifier) DO UPDATE SET app_name = excluded.app_name,"
                " via = excluded.via, reported_at = excluded.reported_at,"
                " report = excluded.report",
                rows,
            )

    async def latest(self, since: float = 0.0, limit: int = 1000) -> list[StoredReport]:
        """Reports received since ``since``, the newest first."""
        rows = await self._db.fetch_all(
            "SELECT identifier, app_name, via, reported_at, report FROM edge_reports"
            " WHERE reported_at >= ? ORDER BY reported_at DESC, identifier LIMIT ?",
            (since, limit),
        )
        return [StoredReport(r[0], r[1], r[2], float(r[3]), r[4]) for r in rows]

    async def page(self, since: float, after: str | None, limit: int) -> list[StoredReport]:
        """Up to ``limit`` reports received since ``since``, by identifier after ``after``:
        a page read along the primary key."""
        rows = await self._db.fetch_all(
            "SELECT identifier, app_name, via, reported_at, report FROM edge_reports"
            " WHERE reported_at >= ? AND identifier > ? ORDER BY identifier LIMIT ?",
            (since, after or "", limit),
        )
        return [StoredReport(r[0], r[1], r[2], float(r[3]), r[4]) for r in rows]

    async def known(self, identifiers: Sequence[str]) -> set[str]:
        """Those of ``identifiers`` that have a report."""
        found: set[str] = set()
        unique = sorted(set(identifiers))
        for start in range(0, len(unique), ROWS_PER_STATEMENT):
            chunk = unique[start : start + ROWS_PER_STATEMENT]
            rows = await self._db.fetch_all(
                "SELECT identifier FROM edge_reports"
                f" WHERE identifier IN ({', '.join('?' * len(chunk))})",
                chunk,
            )
            found.update(row[0] for row in rows)
        return found

    async def prune(self, before: float) -> None:
        async with self._db.transaction() as tx:
            await tx.execute("DELETE FROM edge_reports WHERE reported_at < ?", (before,))
