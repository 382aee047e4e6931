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

from relay.central.flags.records import Reads
from relay.core.domain import from_epoch, hour_start
from relay.wire.flags import UnknownFlag, UnknownFlagEnvironment, UnknownFlagReport

MAX_NAMES = 1000
MAX_REPORTS = 10_000
WINDOW = timedelta(hours=24)

_UNKNOWN = "m.hour >= ? AND NOT EXISTS (SELECT 1 FROM features f WHERE f.name = m.feature_name)"


async def unknown_flags(db: Reads, now: datetime | None = None) -> list[UnknownFlag]:
    since = hour_start((now or datetime.now(UTC)) - WINDOW)
    rows = await db.fetch_all(
        "SELECT m.feature_name, m.app_name, m.environment, max(coalesce(m.arrived, m.hour))"
        " FROM metrics m"
        f" WHERE {_UNKNOWN} AND m.feature_name IN (SELECT DISTINCT m.feature_name"
        f" FROM metrics m WHERE {_UNKNOWN} ORDER BY m.feature_name LIMIT {MAX_NAMES})"
        " GROUP BY m.feature_name, m.app_name, m.environment"
        f" ORDER BY m.feature_name, m.app_name, m.environment LIMIT {MAX_REPORTS}",
        (since, since),
    )
    flags: dict[str, dict[str, list[UnknownFlagEnvironment]]] = {}
    for row in rows:
        seen = UnknownFlagEnvironment(environment=row[2], seenAt=from_epoch(int(row[3])))
        flags.setdefault(row[0], {}).setdefault(row[1], []).append(seen)
    return [
        UnknownFlag(
            name=name,
            lastSeenAt=max(e.seenAt for envs in apps.values() for e in envs),
            reports=[UnknownFlagReport(appName=a, environments=e) for a, e in apps.items()],
        )
        for name, apps in flags.items()
    ]
