"""``UsageReader``'s own logic (every read after a fold, empty pages read nothing, the
summary's windows) over in-memory usage records; the SQL records are proven by the
admin read tests on both backends."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from relay.central.usage import SUMMARY_DAYS, FlagUsage, Instance, Place, Position, UsageReader
from relay.core.ingest_batch import from_epoch, hour_start
from relay.wire.admin import RawMetric
from relay.wire.flags import UnknownFlag

NOW = datetime(2026, 3, 10, 12, 30, tzinfo=UTC)


@dataclass
class MemoryUsage:
    """Answers fixed rows; ``log`` says what was asked, with ``fold`` where a fold ended."""

    log: list[object] = field(default_factory=list)

    async def caught_up(self) -> None:
        self.log.append("fold")

    async def raw_metrics(
        self, feature_name: str, since_hour: int, after: Position | None, limit: int
    ) -> list[RawMetric]:
        self.log.append(("raw", feature_name, since_hour, after, limit))
        return []

    async def summary(
        self, names: Sequence[str], hour: int, day: int, week: int
    ) -> dict[tuple[str, str], FlagUsage]:
        self.log.append(("summary", list(names), hour, day, week))
        return {("f", "dev"): FlagUsage(from_epoch(week), 1, 2)}

    async def instances(
        self, app_name: str | None, after: Place | None, limit: int
    ) -> list[Instance]:
        self.log.append(("instances", app_name, after, limit))
        return []

    async def counts_arrived(self, apps: Sequence[str]) -> dict[str, list[tuple[str, float]]]:
        self.log.append(("arrived", list(apps)))
        return {}

    async def relayed(self, scanned: int, limit: int) -> list[tuple[str, list[tuple[str, str]]]]:
        self.log.append(("relayed", scanned, limit))
        return []

    async def unknown_flags(self) -> list[UnknownFlag]:
        self.log.append("unknown")
        return []


async def test_every_read_comes_after_a_fold_begun_for_it() -> None:
    records = MemoryUsage()
    reader = UsageReader(records, records.caught_up)
    await reader.raw_metrics("f", 3600)
    await reader.instances("app", ("app", "dev", "i"), 10)
    await reader.counts_arrived(["app"])
    await reader.relayed(100, 5)
    await reader.unknown_flags()
    assert records.log == [
        "fold",
        ("raw", "f", 3600, None, 500),
        "fold",
        ("instances", "app", ("app", "dev", "i"), 10),
        "fold",
        ("arrived", ["app"]),
        "fold",
        ("relayed", 100, 5),
        "fold",
        "unknown",
    ]


async def test_an_empty_page_of_names_reads_nothing_and_waits_for_no_fold() -> None:
    records = MemoryUsage()
    reader = UsageReader(records, records.caught_up)
    assert await reader.summary([], NOW) == {}
    assert await reader.counts_arrived([]) == {}
    assert records.log == []


async def test_the_summary_reads_the_last_hour_day_and_week_from_now() -> None:
    records = MemoryUsage()
    reader = UsageReader(records, records.caught_up)
    found = await reader.summary(["f"], NOW)
    hour = hour_start(datetime(2026, 3, 10, 11, 30, tzinfo=UTC))
    day = hour_start(datetime(2026, 3, 9, 12, 30, tzinfo=UTC))
    week = hour_start(datetime(2026, 3, 10 - SUMMARY_DAYS, 12, 30, tzinfo=UTC))
    assert records.log == ["fold", ("summary", ["f"], hour, day, week)]
    assert found[("f", "dev")].last_day == 2
