"""unknown_flags over in-memory reports: the window asked for, names grouped by application
with each environment's time, the latest time per name. tests/test_flags_api.py proves the
SQL of ``unknown_records`` on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from relay.central.flags import unknown
from relay.central.flags.unknown import unknown_flags


class FakeReports:
    def __init__(self, rows: list[tuple[str, str, str, int]]) -> None:
        self.rows = rows
        self.asked: list[tuple[int, int, int]] = []

    async def reports(
        self, db: Any, since: int, names: int, most: int
    ) -> list[tuple[str, str, str, int]]:
        self.asked.append((since, names, most))
        return self.rows


async def test_reports_are_grouped_per_name_and_application_from_24_hours_ago() -> None:
    now = datetime(2026, 3, 2, 10, 30, tzinfo=UTC)
    nine = int(datetime(2026, 3, 2, 9, tzinfo=UTC).timestamp())
    fake = FakeReports(
        [
            ("chekout", "shop", "development", nine),
            ("chekout", "shop", "production", nine + 120),
            ("chekout", "web", "production", nine + 60),
            ("serch", "web", "production", nine + 5),
        ]
    )
    found = await unknown_flags(None, now, fake)
    [(since, names, most)] = fake.asked
    assert since == int(datetime(2026, 3, 1, 10, tzinfo=UTC).timestamp())
    assert (names, most) == (unknown.MAX_NAMES, unknown.MAX_REPORTS)
    first, second = found
    assert first.name == "chekout"
    assert first.lastSeenAt == datetime.fromtimestamp(nine + 120, UTC)
    assert [(r.appName, [e.environment for e in r.environments]) for r in first.reports] == [
        ("shop", ["development", "production"]),
        ("web", ["production"]),
    ]
    assert (second.name, second.lastSeenAt.timestamp()) == ("serch", nine + 5)
    assert await unknown_flags(None, now, FakeReports([])) == []
