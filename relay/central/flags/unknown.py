"""Names SDKs report metrics for that no flag has (typos, flags deleted elsewhere, code
ahead of its flag): Unleash's ``GET /api/admin/metrics/unknown-flags``.

Their counts are stored like any other; this is read from them: names seen in the last 24
hours, at most ``MAX_NAMES`` (by name), each with the applications and environments that
reported it, at most ``MAX_REPORTS`` (name, application, environment) in all: one key can
report a name from any number of applications, and the answer stays bounded. The times
given are when the counts last arrived, to the second (the start of their hour for counts
stored before arrival times were kept).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Protocol

from relay.central.flags.records import Reads
from relay.central.flags.unknown_records import UnknownRecords
from relay.core.ingest_batch import from_epoch, hour_start
from relay.wire.flags import UnknownFlag, UnknownFlagEnvironment, UnknownFlagReport

MAX_NAMES = 1000
MAX_REPORTS = 10_000
WINDOW = timedelta(hours=24)


class UnknownStorage(Protocol):
    async def reports(
        self, db: Reads, since: int, names: int, most: int
    ) -> list[tuple[str, str, str, int]]:
        """(name, application, environment, when counts last arrived) of the names no flag
        has, with counts of hours from ``since`` on: the first ``names`` names, at most
        ``most`` reports, in that order."""
        ...


async def unknown_flags(
    db: Reads, now: datetime | None = None, records: UnknownStorage | None = None
) -> list[UnknownFlag]:
    """``records``: where the counts are read (``UnknownRecords`` unless given)."""
    since = hour_start((now or datetime.now(UTC)) - WINDOW)
    stored = UnknownRecords() if records is None else records
    rows = await stored.reports(db, since, MAX_NAMES, MAX_REPORTS)
    flags: dict[str, dict[str, list[UnknownFlagEnvironment]]] = {}
    for name, app, environment, arrived in rows:
        seen = UnknownFlagEnvironment(environment=environment, seenAt=from_epoch(arrived))
        flags.setdefault(name, {}).setdefault(app, []).append(seen)
    return [
        UnknownFlag(
            name=name,
            lastSeenAt=max(e.seenAt for envs in apps.values() for e in envs),
            reports=[UnknownFlagReport(appName=a, environments=e) for a, e in apps.items()],
        )
        for name, apps in flags.items()
    ]
