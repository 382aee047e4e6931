"""Impact metric series in the ``impact_metrics`` table: written with a group's counts (in
its transaction: a relay's buffer; the central service's in the fold of its ingest log), read
a page at a time, pruned by age and per application.

A state is folded in Python (``ImpactState.then``), which SQL cannot do portably for
histograms. So that two PostgreSQL instances folding into one series cannot lose either's
samples, a write first upserts every series it touches (an empty state when new), which
locks their rows until the commit, then reads them, folds and writes back. Rows are touched
in sorted order, like every other multi-row write here: no deadlock.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, NamedTuple

from relay.core.impact import ImpactKey, ImpactState
from relay.store.sql import ROWS_PER_STATEMENT, Database, Row, Transaction, upsert

_COLUMNS = "series, environment, app_name, name, kind, labels, help, state, updated_at"


class SeriesRow(NamedTuple):
    series: str
    key: ImpactKey
    state: ImpactState


SERIES_BYTES = 96  # the state and what a row costs beyond its text


def rows(impact: dict[ImpactKey, ImpactState]) -> list[SeriesRow]:
    return sorted(SeriesRow(key.series, key, state) for key, state in impact.items())


async def write(tx: Transaction, series: Sequence[SeriesRow], now: float) -> None:
    if not series:
        return
    await upsert(
        tx,
        f"INSERT INTO impact_metrics ({_COLUMNS})",
        "ON CONFLICT (series) DO UPDATE SET updated_at = excluded.updated_at",
        [_row(s.series, s.key, ImpactState(s.state.help), now) for s in series],
    )
    stored: dict[str, str] = {}
    for start in range(0, len(series), ROWS_PER_STATEMENT):
        chunk = [s.series for s in series[start : start + ROWS_PER_STATEMENT]]
        found = await tx.fetch_all(
            "SELECT series, state FROM impact_metrics"
            f" WHERE series IN ({', '.join('?' * len(chunk))})",
            chunk,
        )
        stored.update((row[0], row[1]) for row in found)
    folded = [
        _row(
            s.series,
            s.key,
            ImpactState.loads(s.state.help, stored[s.series]).then(s.key.kind, s.state),
            now,
        )
        for s in series
    ]
    await upsert(
        tx,
        f"INSERT INTO impact_metrics ({_COLUMNS})",
        "ON CONFLICT (series) DO UPDATE SET help = excluded.help, state = excluded.state,"
        " updated_at = excluded.updated_at",
        folded,
    )


def _row(series: str, key: ImpactKey, state: ImpactState, now: float) -> tuple[Any, ...]:
    return (series, *key, state.help, state.dumps(), now)


Position = tuple[str, str, str, str]
"""Where a series sits in the read order: (app, environment, name, series)."""


class ImpactStore:
    """What the central service reads and prunes of the series. ``caught_up``: as
    ``UsageReader``'s, awaited before each read (the series are folded from the ingest log)."""

    def __init__(self, db: Database, caught_up: Callable[[], Awaitable[None]]) -> None:
        self._db = db
        self._caught_up = caught_up

    async def page(
        self, app_name: str | None, environment: str | None, after: Position | None, limit: int
    ) -> Sequence[Row]:
        """Up to ``limit`` series in read order after ``after``, along the read index."""
        await self._caught_up()
        where, params = ["1 = 1"], []
        for column, value in (("app_name", app_name), ("environment", environment)):
            if value is not None:
                where.append(f"{column} = ?")
                params.append(value)
        if after is not None:
            where.append("(app_name, environment, name, series) > (?, ?, ?, ?)")
            params += after
        return await self._db.fetch_all(
            f"SELECT {_COLUMNS} FROM impact_metrics WHERE {' AND '.join(where)}"
            " ORDER BY app_name, environment, name, series LIMIT ?",
            [*params, limit],
        )

    async def prune(self, before: float, max_per_app: int) -> int:
        """Delete series not updated since ``before``, and each (application, environment)'s
        least recently updated beyond ``max_per_app``; the series deleted."""
        async with self._db.transaction() as tx:
            deleted = await tx.execute("DELETE FROM impact_metrics WHERE updated_at < ?", (before,))
            return deleted + await tx.execute(
                "DELETE FROM impact_metrics WHERE series IN (SELECT series FROM (SELECT series,"
                " row_number() OVER (PARTITION BY app_name, environment"
                " ORDER BY updated_at DESC, series) AS n FROM impact_metrics) ranked WHERE n > ?)",
                (max_per_app,),
            )
