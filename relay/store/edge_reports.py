"""The latest report of each relay (``edge_reports``), on either backend: the central
service keeps every relay of the tree (in its database), a relay those of the relays it
serves (in its ``cache.db``, never among the counts of ``buffer.db``).

Reports come from whoever holds a client key, so each is kept under the scope of the key
that posted it (``ReportScope``: its environment and projects), and a key replaces only
reports of its own scope. They are bounded on their own (``ReportBounds``: reports per
scope and in all, the oldest replaced first; the bytes of one are bounded where it is
taken, ``relay.api.body.stored_json``). A stored record that no longer reads as a report
(an older version's, or damaged) is skipped, counted and logged: never a failed read.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from prometheus_client import Counter
from pydantic import ValidationError

from relay.core.edges import ReportedEdge, ReportScope
from relay.store.sql import ROWS_PER_STATEMENT, Database, Row, Transaction, upsert
from relay.wire.edges import EdgeInstanceData

log = logging.getLogger(__name__)

UNREADABLE = Counter(
    "relay_edge_reports_unreadable_total",
    "Stored relay reports skipped on reading because they no longer read as a report",
)


@dataclass(frozen=True, slots=True)
class ReportBounds:
    per_scope: int
    """Relays kept per scope; a save of more keeps the first."""
    total: int
    """Relays kept in all; past it the oldest go, whatever their scope."""
    direct_for: float = 0.0
    """Seconds a relay's own report is not replaced by one another relay carried for it:
    whoever holds a key accepted by some relay can make that relay carry a report under
    any identifier, and its upstream key's scope; the relay that really has the identifier
    and reports with a key of that scope stays listed as it reported itself."""


@dataclass(frozen=True, slots=True)
class StoredReport:
    scope: ReportScope
    identifier: str
    app_name: str
    via: str | None
    reported_at: float
    report: EdgeInstanceData

    @property
    def place(self) -> tuple[str, str, str]:
        """Where the report stands in the table's key: a page's cursor."""
        return (self.scope.environment, _projects(self.scope), self.identifier)


class EdgeReportStore:
    def __init__(self, db: Database, bounds: ReportBounds) -> None:
        self._db = db
        self._bounds = bounds

    async def save(self, scope: ReportScope, reports: Sequence[ReportedEdge], at: float) -> None:
        """Each replaces the relay's previous one of the same scope; then the bounds apply.
        Written in identifier order, so two instances saving overlapping trees cannot
        deadlock."""
        projects = _projects(scope)
        rows = sorted(
            {
                r.identifier: (
                    scope.environment,
                    projects,
                    r.identifier,
                    r.app_name,
                    r.via,
                    at,
                    r.report.model_dump_json(),
                )
                for r in reports[: self._bounds.per_scope]
            }.values()
        )
        if not rows:
            return
        async with self._db.transaction() as tx:
            await upsert(
                tx,
                "INSERT INTO edge_reports"
                " (environment, projects, identifier, app_name, via, reported_at, report)",
                "ON CONFLICT (environment, projects, identifier) DO UPDATE SET"
                " app_name = excluded.app_name, via = excluded.via,"
                " reported_at = excluded.reported_at, report = excluded.report"
                " WHERE excluded.via IS NULL OR edge_reports.via IS NOT NULL"
                f" OR edge_reports.reported_at < {float(at - self._bounds.direct_for)!r}",
                rows,
            )
            await self._bound(tx, scope.environment, projects)

    async def _bound(self, tx: Transaction, environment: str, projects: str) -> None:
        await tx.execute(
            "DELETE FROM edge_reports WHERE environment = ? AND projects = ? AND identifier"
            " NOT IN (SELECT identifier FROM edge_reports WHERE environment = ?"
            " AND projects = ? ORDER BY reported_at DESC, identifier LIMIT ?)",
            (environment, projects, environment, projects, self._bounds.per_scope),
        )
        [row] = await tx.fetch_all("SELECT count(*) FROM edge_reports")
        held = int(row[0])
        if held > self._bounds.total:  # the oldest, through the index on reported_at
            await tx.execute(
                "DELETE FROM edge_reports WHERE (environment, projects, identifier) IN"
                " (SELECT environment, projects, identifier FROM edge_reports"
                " ORDER BY reported_at LIMIT ?)",
                (held - self._bounds.total,),
            )

    async def latest(self, since: float = 0.0, limit: int = 1000) -> list[StoredReport]:
        """Reports received since ``since``, the newest first; records that do not read
        are left out."""
        return _readable(
            await self._db.fetch_all(
                f"SELECT {_COLUMNS} FROM edge_reports WHERE reported_at >= ?"
                " ORDER BY reported_at DESC, identifier LIMIT ?",
                (since, limit),
            )
        )

    async def page(
        self, since: float, after: tuple[str, str, str] | None, limit: int
    ) -> list[StoredReport]:
        """Up to ``limit`` reports received since ``since``, past ``after`` (a report's
        ``place``): a page read along the primary key; records that do not read are left
        out."""
        where, parameters = "", list[object]([since])
        if after is not None:
            where = " AND (environment, projects, identifier) > (?, ?, ?)"
            parameters = [since, *after]
        return _readable(
            await self._db.fetch_all(
                f"SELECT {_COLUMNS} FROM edge_reports WHERE reported_at >= ?{where}"
                " ORDER BY environment, projects, identifier LIMIT ?",
                [*parameters, limit],
            )
        )

    async def known(self, identifiers: Sequence[str]) -> set[str]:
        """Those of ``identifiers`` that have a report, in any scope."""
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


_COLUMNS = "environment, projects, identifier, app_name, via, reported_at, report"


def _projects(scope: ReportScope) -> str:
    return json.dumps(list(scope.projects))


def _readable(rows: Sequence[Row]) -> list[StoredReport]:
    found = []
    for row in rows:
        try:
            found.append(_read([row[i] for i in range(7)]))
        except (ValueError, TypeError) as exc:  # ValidationError is a ValueError
            UNREADABLE.inc()
            log.warning(
                "a stored relay report does not read: skipped",
                extra={"identifier": str(row[2])[:255], "error": _short(exc)},
            )
    return found


def _read(row: Sequence[object]) -> StoredReport:
    environment, projects, identifier, app_name, via, reported_at, report = row
    listed = json.loads(projects)  # type: ignore[arg-type]
    if not (
        isinstance(environment, str)
        and isinstance(listed, list)
        and all(isinstance(p, str) for p in listed)
        and isinstance(identifier, str)
        and isinstance(app_name, str)
        and (via is None or isinstance(via, str))
        and isinstance(reported_at, int | float)
        and isinstance(report, str | bytes)
    ):
        raise ValueError("not a stored report")
    return StoredReport(
        ReportScope(environment, tuple(listed)),
        identifier,
        app_name,
        via,
        float(reported_at),
        EdgeInstanceData.model_validate_json(report),
    )


def _short(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        return "; ".join(f"{'/'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:3])
    return str(exc)[:200]
