"""``relay.core.ingest_batch.epoch``: the float fast path inside the range and the exact comparison
at its ends give the same answers (the ends of years 1 and 9999, and around the cut)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from relay.core.ingest_batch import OutOfRange, epoch, from_epoch, hour_start

FIRST = datetime.min.replace(tzinfo=UTC)
LAST = datetime.max.replace(tzinfo=UTC)
ORIGIN = datetime(1970, 1, 1, tzinfo=UTC)
DAY, SECOND, MICRO = timedelta(days=1), timedelta(seconds=1), timedelta(microseconds=1)


@pytest.mark.parametrize(
    "moment",
    [
        FIRST,
        FIRST + DAY - SECOND,
        FIRST + DAY,
        FIRST + DAY + SECOND,
        LAST - DAY - SECOND,
        LAST - DAY,
        LAST - DAY + SECOND,
        datetime(2026, 11, 24, 8, 30, 15, 123000, tzinfo=UTC),
        datetime(2026, 11, 24, 8, 30, 15),  # no offset: UTC
        datetime(2026, 11, 24, 8, tzinfo=timezone(timedelta(hours=-5))),
    ],
)
def test_a_time_in_years_1_to_9999_is_its_seconds_since_1970(moment: datetime) -> None:
    aware = moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
    assert epoch(moment) == (aware - ORIGIN) / SECOND


def test_the_last_microseconds_of_9999_are_read_back_in_9999() -> None:
    """Their float rounds up to 10000-01-01: the last float before it is kept."""
    assert from_epoch(epoch(LAST)).year == 9999
    assert epoch(LAST) >= epoch(LAST - 40 * MICRO)


@pytest.mark.parametrize(
    "moment",
    [
        datetime(1, 1, 1, tzinfo=timezone(timedelta(minutes=1))),  # year 0 in UTC
        datetime(1, 1, 1, 23, 58, tzinfo=timezone(timedelta(hours=23, minutes=59))),
        datetime(9999, 12, 31, 23, 59, 59, tzinfo=timezone(-timedelta(minutes=1))),
        datetime(9999, 12, 31, 0, 1, tzinfo=timezone(-timedelta(hours=23, minutes=59))),
    ],
)
def test_a_time_outside_years_1_to_9999_in_utc_is_refused(moment: datetime) -> None:
    with pytest.raises(OutOfRange):
        epoch(moment)


@pytest.mark.parametrize(
    ("moment", "hour"),
    [
        (datetime(1969, 12, 31, 22, 59, 59, 500000, tzinfo=UTC), datetime(1969, 12, 31, 22)),
        (FIRST + timedelta(minutes=59, seconds=59, microseconds=999000), FIRST),
        (datetime(1969, 12, 31, 23, tzinfo=UTC) - MICRO, datetime(1969, 12, 31, 22)),
        (datetime(2026, 11, 24, 8, 59, 59, 999999, tzinfo=UTC), datetime(2026, 11, 24, 8)),
    ],
)
def test_a_time_counts_in_the_utc_hour_holding_it_before_1970_too(
    moment: datetime, hour: datetime
) -> None:
    """Seconds before 1970 are negative: truncated towards zero, a fraction of a second
    before an hour's end was counted in the next hour."""
    assert from_epoch(hour_start(moment)) == hour.replace(tzinfo=UTC)
