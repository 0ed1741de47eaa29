"""Calendar months as ``YYYY-MM`` labels and their bounds in microseconds since the epoch (UTC)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from skewtape_pipeline.errors import ConfigError
from skewtape_pipeline.mirror.format import MONTH_RE

US_PER_SECOND = 1_000_000
US_PER_HOUR = 3_600 * US_PER_SECOND
US_PER_DAY = 24 * US_PER_HOUR
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def check_month(label: object, *, option: str) -> str:
    """Return ``label`` if it is a ``YYYY-MM`` month, else raise :class:`ConfigError`."""
    if not isinstance(label, str) or not MONTH_RE.match(label):
        raise ConfigError(f"option {option} is {label!r}; expected a month as YYYY-MM")
    return label


def add_months(label: str, count: int) -> str:
    """The month ``count`` months after ``label`` (before it when ``count`` is negative)."""
    year, month = (int(part) for part in label.split("-"))
    index = year * 12 + (month - 1) + count
    return f"{index // 12:04d}-{index % 12 + 1:02d}"


def month_start_us(label: str) -> int:
    """First microsecond of ``label``, UTC, as microseconds since the epoch."""
    year, month = (int(part) for part in label.split("-"))
    return int(datetime(year, month, 1, tzinfo=UTC).timestamp()) * US_PER_SECOND


def month_end_us(label: str) -> int:
    """First microsecond after ``label`` (the start of the next month)."""
    return month_start_us(add_months(label, 1))


def us_to_datetime(us: int) -> datetime:
    """A UTC datetime for microseconds since the epoch."""
    return EPOCH + timedelta(microseconds=us)
