"""Explicit side vocabularies: every raw side value a source may emit, mapped to BUY/SELL/UNKNOWN.

A side is the aggressor (taker) side of a trade. Each source has its own vocabulary, written out
here in full; a value that is not in the vocabulary is an error, never a default. ``UNKNOWN`` is
for feeds that say they do not know (an auction print), not for values nobody mapped.

Standard library only, so the TKC1 reference model can import it without pyarrow.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from skewtape_pipeline.errors import ConfigError

UNKNOWN = 0
BUY = 1
SELL = 2

SIDE_NAMES: tuple[str, ...] = ("UNKNOWN", "BUY", "SELL")
"""Side names indexed by side code (``SIDE_NAMES[BUY] == "BUY"``)."""

SIDE_CODES: Mapping[str, int] = MappingProxyType(
    {name: code for code, name in enumerate(SIDE_NAMES)}
)
"""Side codes by name."""

CANONICAL_SIDES: Mapping[str, str] = MappingProxyType(
    {"BUY": "BUY", "SELL": "SELL", "UNKNOWN": "UNKNOWN"}
)
"""The canonical CSV/Parquet form: the names themselves, upper case, nothing else."""

KALSHI_TAKER_SIDES: Mapping[str, str] = MappingProxyType({"yes": "BUY", "no": "SELL"})
"""Kalshi ``taker_side`` in YES-contract terms: a NO taker sells YES."""

EXCHANGE_TAKER_SIDES: Mapping[str, str] = MappingProxyType(
    {"buy": "BUY", "sell": "SELL", "unknown": "UNKNOWN"}
)
"""Exchange trade prints as ``buy``/``sell`` (``unknown`` when the venue does not say)."""

BSN_SIDES: Mapping[str, str] = MappingProxyType({"B": "BUY", "S": "SELL", "N": "UNKNOWN"})
"""``B`` buyer-initiated, ``S`` seller-initiated, ``N`` none (e.g. an auction print)."""

BAN_SIDES: Mapping[str, str] = MappingProxyType({"B": "BUY", "A": "SELL", "N": "UNKNOWN"})
"""Bid/ask aggressor codes: ``B`` a buyer lifted the ask, ``A`` a seller hit the bid, ``N`` none."""

LOBSTER_CROSS = "cross"
"""Raw side given to LOBSTER cross trades (type 6): an auction print has no aggressor."""

LOBSTER_DIRECTIONS: Mapping[str, str] = MappingProxyType(
    {"-1": "BUY", "1": "SELL", LOBSTER_CROSS: "UNKNOWN"}
)
"""LOBSTER ``direction`` of the executed resting order: an executed sell order (-1) means the
aggressor bought; an executed buy order (1) means the aggressor sold."""


def resolve_side_map(side_map: Mapping[str, str], *, name: str = "side_map") -> dict[str, int]:
    """Check a raw-value -> side-name mapping and return it as raw value -> side code.

    Matching is exact (case-sensitive, no trimming): ``"buy"`` and ``"Buy"`` are different values
    and both must be listed if a feed emits both.

    Raises
    ------
    ConfigError
        The mapping is empty, a key is not a string, or a value is not BUY, SELL or UNKNOWN.
    """
    if not isinstance(side_map, Mapping) or not side_map:
        raise ConfigError(f"{name}: expected a non-empty mapping of raw side -> side name")
    resolved: dict[str, int] = {}
    for raw, side in side_map.items():
        if not isinstance(raw, str):
            raise ConfigError(f"{name}[{raw!r}]: keys must be strings, got {type(raw).__name__}")
        if side not in SIDE_CODES:
            raise ConfigError(
                f"{name}[{raw!r}] = {side!r}: expected one of {', '.join(SIDE_NAMES)}"
            )
        resolved[raw] = SIDE_CODES[side]
    return resolved


BINANCE_BUYER_MAKER: Mapping[str, str] = MappingProxyType(
    {"true": "SELL", "True": "SELL", "TRUE": "SELL", "false": "BUY", "False": "BUY", "FALSE": "BUY"}
)
"""Binance ``is_buyer_maker``: true when the buyer's order rested, so the aggressor sold."""
