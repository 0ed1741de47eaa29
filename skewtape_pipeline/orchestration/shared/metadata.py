"""Metadata values both domains' definitions use: seconds, ratios, bytes for a reader, a list
cut at :data:`MAX_LISTED`, the problems a check found."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import dagster as dg

from skewtape_pipeline.progress import size_text

MAX_LISTED = 50
"""How many paths a metadata list shows before it says how many more there are."""


def listed(items: Sequence[Any]) -> list[str]:
    """The first :data:`MAX_LISTED` of ``items`` as text, then how many more there are."""
    shown = [str(item) for item in items[:MAX_LISTED]]
    if len(items) > MAX_LISTED:
        shown.append(f"... and {len(items) - MAX_LISTED} more")
    return shown


def seconds_value(seconds: float) -> dg.MetadataValue:
    """Seconds rounded to milliseconds (the ``seconds`` in the key names the unit)."""
    return dg.MetadataValue.float(round(float(seconds), 3))


def ratio_value(ratio: float) -> dg.MetadataValue:
    """A ratio (``x`` times) rounded to two decimals."""
    return dg.MetadataValue.float(round(float(ratio), 2))


def bytes_value(nbytes: int) -> dg.MetadataValue:
    """A byte count for a reader, with its unit: ``812 bytes``, ``651.9 KB (651,939 bytes)``."""
    nbytes = int(nbytes)
    if nbytes < 1000:
        return dg.MetadataValue.text(f"{nbytes} bytes")
    return dg.MetadataValue.text(f"{size_text(nbytes)} ({nbytes:,} bytes)")


def problems_metadata(problems: Sequence[str]) -> dict[str, dg.MetadataValue]:
    """Metadata listing the problems a check found (how many in all, and the first ones under
    ``details``, which is left out when there are none: the UI would show an empty page)."""
    count = {"problems": dg.MetadataValue.int(len(problems))}
    if not problems:
        return count
    return count | {
        "details": dg.MetadataValue.md("\n".join(f"- {p}" for p in listed(list(problems))))
    }
