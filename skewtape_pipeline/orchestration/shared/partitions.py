"""The month partitions of the history snapshot, and month arithmetic on their keys."""

from __future__ import annotations

from datetime import date, datetime

import dagster as dg

FIRST_MONTH = "2026-09"
"""The first month partition: the bootstrap full snapshot (the sample publisher's first month)."""

MONTH_FORMAT = "%Y-%m"

month_partitions = dg.MonthlyPartitionsDefinition(
    start_date=FIRST_MONTH, fmt=MONTH_FORMAT, end_offset=1
)
"""One partition per month, keyed ``YYYY-MM``, up to and including the current month.

The current month is a partition (``end_offset=1``) so that a delta published before its month
is over can still be applied when it arrives.
"""


def previous_month(month: str) -> str:
    """``YYYY-MM`` of the month before ``month`` (``2027-01`` -> ``2026-12``)."""
    first = datetime.strptime(month, MONTH_FORMAT).date()
    year, month_number = (first.year, first.month - 1) if first.month > 1 else (first.year - 1, 12)
    return date(year, month_number, 1).strftime(MONTH_FORMAT)


def month_of(moment: datetime | date) -> str:
    """``YYYY-MM`` of the month that contains ``moment``."""
    return moment.strftime(MONTH_FORMAT)


def is_month_partition(month: str) -> bool:
    """True when ``month`` is a partition key today (not before the first, not in the future)."""
    return month_partitions.has_partition_key(month)
