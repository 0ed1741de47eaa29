"""What happens in which month of the sample chain.

Month indexes count from the first published month (0 = the full first snapshot, 1.. = deltas).
The plan is fixed so that every delta op, the schema break and a departing venue appear in a
four-month chain; later months (index 4 and on) only add months and change reference rows.
"""

from __future__ import annotations

from dataclasses import dataclass

from skewtape_pipeline.errors import ConfigError
from skewtape_pipeline.sample.months import add_months, check_month

VENUE_NAMES: tuple[str, ...] = ("kalshi", "polymarket", "predictit", "augur")
"""Venues of the first snapshot, in the order the manifests list them."""

MIN_MONTHS = 4
"""The first snapshot plus three deltas: the fewest that show every planned event."""

KNOWN_ISSUES_FILE = "KNOWN_ISSUES.md"
"""A text file of the first snapshot that the first delta deletes."""


@dataclass(frozen=True)
class ChainPlan:
    """The months of the chain and the index of the month where each planned event happens.

    Parameters
    ----------
    months
        Published months, oldest first (``months[0]`` is the first full snapshot).
    text_delete_at
        The delta that deletes :data:`KNOWN_ISSUES_FILE`.
    correction_at
        The delta that republishes a closed month of ``corrected_venue`` with corrected trades.
    corrected_month_at
        Index of the closed month that ``correction_at`` republishes.
    schema_break_at
        The snapshot where ``markets.parquet`` gains the ``settlement_source`` column.
    leave_at
        The snapshot that omits ``leaving_venue`` (and every later one).
    """

    months: tuple[str, ...]
    text_delete_at: int = 1
    correction_at: int = 2
    corrected_month_at: int = 0
    corrected_venue: str = "kalshi"
    schema_break_at: int = 2
    leave_at: int = 3
    leaving_venue: str = "augur"

    @classmethod
    def build(cls, *, first_month: str, months: int) -> ChainPlan:
        """Validate the options and lay out the months; raises :class:`ConfigError`."""
        check_month(first_month, option="first_month")
        if not isinstance(months, int) or isinstance(months, bool) or months < MIN_MONTHS:
            raise ConfigError(
                f"option months is {months!r}; expected an integer >= {MIN_MONTHS} "
                "(the first snapshot and at least three deltas)"
            )
        return cls(months=tuple(add_months(first_month, i) for i in range(months)))

    def venues_at(self, index: int) -> tuple[str, ...]:
        """Venues whose files snapshot ``index`` holds."""
        return tuple(v for v in VENUE_NAMES if self.has_venue(v, index))

    def omitted_at(self, index: int) -> tuple[str, ...]:
        """Venues that snapshot ``index`` omits (the departed venue, from ``leave_at`` on)."""
        return (self.leaving_venue,) if index >= self.leave_at else ()

    def has_venue(self, venue: str, index: int) -> bool:
        """True when snapshot ``index`` holds ``venue``; ``index`` may be negative (backlog)."""
        return not (venue == self.leaving_venue and index >= self.leave_at)

    def schema_version_at(self, index: int) -> int:
        """1 before the schema break, 2 from it on."""
        return 2 if index >= self.schema_break_at else 1

    def bundle_id(self, index: int) -> str:
        return f"skewtape-history-{self.months[index]}"
