"""The sample's venues: price grids, trade sizes, identifier styles and fee schedules.

Modelled on real venues: Kalshi trades in whole cents (1..99) with uuid trade ids; Polymarket
quotes most markets in 0.001 steps; PredictIt trades in cents with an $850 position cap; the
departing venue (an on-chain market) quotes in 0.0001 steps. Trade sizes are log-normal with the
spread of real Kalshi trades (median ~30 contracts, 1 in 3 of 10 or fewer, a few in the thousands).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

CATEGORIES: tuple[str, ...] = ("crypto", "economics", "politics", "sports", "weather")


@dataclass(frozen=True)
class Venue:
    """How one venue's markets and trades look.

    Prices and fees are integer units of 1/10_000 of a dollar.
    """

    name: str
    ticks: tuple[int, ...]
    """Tick sizes the venue uses; the first is the most common."""
    second_tick_share: float
    """Share of markets listed with ``ticks[1]`` (0 when the venue has one tick)."""
    listing_share: float
    """Chance that a topic (outside politics) is listed on this venue."""
    politics_share: float
    """Chance that a politics topic is listed on this venue."""
    quantity_median: float
    quantity_sigma: float
    """Log-normal trade size: median contracts and the sigma of its logarithm."""
    max_position_dollars: int | None
    """Cap on one trade's cost (PredictIt's $850 limit), or None."""
    market_id_style: Literal["series", "hex64", "numeric", "hex40"]
    trade_id_style: Literal["uuid", "tx", "numeric"]
    resolve_delay_hours: tuple[int, int]
    """How long after a market closes its first resolution comes (min, max)."""
    taker_fee: int
    maker_fee: int
    fee_basis: str


VENUES: dict[str, Venue] = {
    "kalshi": Venue(
        name="kalshi",
        ticks=(100,),
        second_tick_share=0.0,
        listing_share=0.75,
        politics_share=0.6,
        quantity_median=30.0,
        quantity_sigma=2.0,
        max_position_dollars=None,
        market_id_style="series",
        trade_id_style="uuid",
        resolve_delay_hours=(0, 6),
        taker_fee=700,
        maker_fee=0,
        fee_basis="rate_x_price_x_(1-price)",
    ),
    "polymarket": Venue(
        name="polymarket",
        ticks=(10, 100),
        second_tick_share=0.3,
        listing_share=0.6,
        politics_share=0.9,
        quantity_median=60.0,
        quantity_sigma=2.2,
        max_position_dollars=None,
        market_id_style="hex64",
        trade_id_style="tx",
        resolve_delay_hours=(2, 72),
        taker_fee=0,
        maker_fee=0,
        fee_basis="share_of_notional",
    ),
    "predictit": Venue(
        name="predictit",
        ticks=(100,),
        second_tick_share=0.0,
        listing_share=0.08,
        politics_share=0.8,
        quantity_median=25.0,
        quantity_sigma=1.6,
        max_position_dollars=850,
        market_id_style="numeric",
        trade_id_style="numeric",
        resolve_delay_hours=(12, 48),
        taker_fee=1000,
        maker_fee=1000,
        fee_basis="share_of_profit",
    ),
    "augur": Venue(
        name="augur",
        ticks=(1,),
        second_tick_share=0.0,
        listing_share=0.15,
        politics_share=0.3,
        quantity_median=12.0,
        quantity_sigma=1.8,
        max_position_dollars=None,
        market_id_style="hex40",
        trade_id_style="tx",
        resolve_delay_hours=(72, 240),
        taker_fee=100,
        maker_fee=100,
        fee_basis="share_of_payout",
    ),
}

MATCHED_VENUES: tuple[str, ...] = ("kalshi", "polymarket", "predictit")
"""Venues whose markets the matched_events table pairs up (one column each)."""
