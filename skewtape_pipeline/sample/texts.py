"""The text files of a sample snapshot: README.md, LICENSE.txt, CHANGELOG.md, KNOWN_ISSUES.md."""

from __future__ import annotations

from skewtape_pipeline.sample.plan import KNOWN_ISSUES_FILE, ChainPlan

LICENSE_TEXT = """\
Skewtape history sample

This data is synthetic. It was generated from a fixed seed to look like prediction-market
trading (venues, markets, trades, candles, resolutions and fees) and describes no real trade,
order, person or market outcome. To the extent possible under law, it is dedicated to the
public domain (CC0 1.0). It comes with no warranty of any kind.
"""

KNOWN_ISSUES_TEXT = """\
# Known issues

- Resolution notes are plain English and may be reworded in a later snapshot.
- Candle buckets are hourly in UTC; venues that report in exchange time are converted.
"""


def readme(plan: ChainPlan, index: int) -> str:
    """README.md of snapshot ``index``: what it holds and how it is laid out."""
    month = plan.months[index]
    omitted = ", ".join(plan.omitted_at(index)) or "none"
    return f"""\
# Skewtape history: {month}

Bundle `{plan.bundle_id(index)}`, schema version {plan.schema_version_at(index)}.
Closed months {plan.months[0]} to {month} for the venues {", ".join(plan.venues_at(index))}
(omitted venues: {omitted}).

| Path | What it holds |
|---|---|
| `markets.parquet` | one row per market (key: venue, market_id) |
| `resolutions.parquet` | resolutions; a restatement has a higher seq (key: venue, market_id, seq) |
| `matched_events.parquet` | one question listed on several venues (key: event_id) |
| `fees.parquet` | fee schedule (key: venue, category, effective_from) |
| `fills/<venue>/<YYYY-MM>.parquet` | every trade of the month, sorted by market_id then ts |
| `candles/<venue>/<YYYY-MM>.parquet` | hourly OHLC candles derived from the fills |
| `CHECKSUMS.sha256` | sha256 of every file (sha256sum format) |
| `manifest.json` | bundle id, month, venues, schema version, and every file's sha256 and size |

Prices are dollars per YES contract with 4 decimals; quantities are contracts; `taker_side` is
the side (`yes`/`no`) of the order that took liquidity. Times are UTC. A monthly delta in
`deltas/<YYYY-MM>/` takes this snapshot to the next one.
"""


def changelog(plan: ChainPlan, index: int, *, correction_note: str) -> str:
    """CHANGELOG.md of snapshot ``index``: one section per month so far, newest first."""
    sections = [_changes(plan, i, correction_note) for i in range(index, -1, -1)]
    return "# Changelog\n\n" + "\n".join(sections)


def _changes(plan: ChainPlan, index: int, correction_note: str) -> str:
    month = plan.months[index]
    lines = [f"## {month}", ""]
    if index == 0:
        lines.append(f"- First snapshot: {', '.join(plan.venues_at(0))}, month {month}.")
    else:
        lines.append(f"- Added fills and candles for {month}; new and updated reference rows.")
    if index == plan.text_delete_at:
        lines.append(f"- Removed {KNOWN_ISSUES_FILE}: both issues are settled.")
    if index == plan.correction_at:
        lines.append(
            f"- Republished {plan.corrected_venue} fills and candles for "
            f"{plan.months[plan.corrected_month_at]}: {correction_note}."
        )
    if index == plan.schema_break_at:
        lines.append(
            "- markets.parquet gains the column settlement_source "
            f"(schema version {plan.schema_version_at(index)})."
        )
    if index == plan.leave_at:
        lines.append(
            f"- {plan.leaving_venue} is no longer carried: its month files and its rows in the "
            "reference tables are removed."
        )
    return "\n".join(lines) + "\n"
