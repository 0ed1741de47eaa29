"""Topics: the real-world questions that venues list markets on, with titles and series codes.

A topic is one question (``Bitcoin above $120,000 at 5pm ET on Oct 3``) with one close time and
one outcome; each venue that lists it gets its own market. Lifetimes follow the category: daily
crypto and weather questions live a few days, economic releases weeks, elections many months.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from skewtape_pipeline.sample.months import US_PER_DAY, US_PER_HOUR, us_to_datetime

CATEGORY_WEIGHTS: dict[str, float] = {
    "crypto": 0.25,
    "economics": 0.22,
    "politics": 0.13,
    "sports": 0.22,
    "weather": 0.18,
}
LIFETIME_DAYS: dict[str, tuple[float, float]] = {
    "crypto": (0.5, 7),
    "economics": (5, 40),
    "politics": (60, 420),
    "sports": (1, 10),
    "weather": (1, 3),
}
ACTIVITY: dict[str, float] = {
    "crypto": 1.5,
    "economics": 1.2,
    "politics": 2.0,
    "sports": 1.0,
    "weather": 0.6,
}
"""Relative trading activity per category (scales a market's log-normal activity)."""

_CRYPTO = (
    ("BTC", "Bitcoin", 80_000, 160_000, 2_500),
    ("ETH", "Ether", 2_000, 6_000, 100),
    ("SOL", "Solana", 100, 400, 10),
)
_ECONOMICS = (
    ("PAYROLLS", "Nonfarm payrolls", "k", 0.0, 300.0, 25.0),
    ("CPI", "CPI year over year", "%", 2.0, 4.5, 0.1),
    ("JOBLESS", "Initial jobless claims", "k", 180.0, 280.0, 5.0),
    ("FED", "Fed funds upper bound", "%", 3.0, 5.0, 0.25),
    ("GDP", "Real GDP growth, annualized,", "%", -1.0, 4.0, 0.5),
)
_STATES = ("AZ", "GA", "MI", "NC", "NV", "OH", "PA", "TX", "WI", "ME", "NH", "IA")
_PARTIES = (("D", "Democrats"), ("R", "Republicans"))
_LEAGUES = {
    "NFL": ("KC", "BUF", "PHI", "SF", "DAL", "BAL", "DET", "GB", "CIN", "MIA"),
    "NBA": ("BOS", "DEN", "LAL", "NYK", "OKC", "MIL", "PHX", "GSW", "MIA", "DAL"),
    "NHL": ("EDM", "FLA", "NYR", "VGK", "TOR", "COL", "DAL", "BOS", "CAR", "WPG"),
}
_CITIES = (
    ("NY", "New York"),
    ("CHI", "Chicago"),
    ("LAX", "Los Angeles"),
    ("MIA", "Miami"),
    ("AUS", "Austin"),
    ("DEN", "Denver"),
    ("PHIL", "Philadelphia"),
)
_MONTHS = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")


@dataclass(frozen=True)
class Topic:
    """One question listed by one or more venues."""

    series: str
    """Series code, e.g. ``PAYROLLS`` (Kalshi tickers are built from it)."""
    title: str
    category: str
    strike: str
    """What distinguishes this question within its series and date, e.g. ``T150`` or ``KCBUF``."""
    open_us: int
    close_us: int
    outcome: str
    """``yes`` or ``no``: how the question resolves (the same on every venue)."""
    belief: float
    """Log-odds of YES when the market opens."""


def draw_topic(rng: random.Random, *, month_start_us: int, month_end_us: int) -> Topic:
    """A random topic that opens within ``[month_start_us, month_end_us)``."""
    category = rng.choices(tuple(CATEGORY_WEIGHTS), weights=tuple(CATEGORY_WEIGHTS.values()))[0]
    open_us = rng.randrange(month_start_us, month_end_us)
    low, high = LIFETIME_DAYS[category]
    close_us = open_us + int(rng.uniform(low, high) * US_PER_DAY)
    close_us -= close_us % US_PER_HOUR  # questions close on the hour
    close_us = max(close_us, open_us + US_PER_HOUR)
    series, title, strike = _describe(rng, category, close_us)
    belief = rng.gauss(0.0, 1.3)
    yes_chance = 1.0 / (1.0 + math.exp(-belief))
    outcome = "yes" if rng.random() < yes_chance else "no"
    return Topic(series, title, category, strike, open_us, close_us, outcome, belief)


def ticker_date(us: int) -> str:
    """``26OCT03``: the date part of a Kalshi ticker."""
    day = us_to_datetime(us)
    return f"{day.year % 100:02d}{_MONTHS[day.month - 1]}{day.day:02d}"


def _describe(rng: random.Random, category: str, close_us: int) -> tuple[str, str, str]:
    day = us_to_datetime(close_us)
    date = f"{day:%b} {day.day}, {day.year}"
    if category == "crypto":
        code, name, low, high, step = rng.choice(_CRYPTO)
        strike = rng.randrange(low, high + 1, step)
        return code, f"{name} above ${strike:,} at 5pm ET on {date}", f"T{strike}"
    if category == "economics":
        code, name, unit, low, high, step = rng.choice(_ECONOMICS)
        strike = round(low + step * rng.randrange(round((high - low) / step) + 1), 2)
        text = f"{strike:g}"
        return code, f"{name} above {text}{unit} in the release of {date}", f"T{text}"
    if category == "politics":
        return _politics(rng, date)
    if category == "sports":
        league = rng.choice(tuple(_LEAGUES))
        home, away = rng.sample(_LEAGUES[league], 2)
        return f"{league}GAME", f"{home} beat {away} on {date} ({league})", f"{home}{away}"
    code, city = rng.choice(_CITIES)
    strike = rng.randrange(30, 100)
    return f"HIGH{code}", f"Highest temperature in {city} on {date} above {strike}°F", f"T{strike}"


def _politics(rng: random.Random, date: str) -> tuple[str, str, str]:
    party, party_name = rng.choice(_PARTIES)
    state = rng.choice(_STATES)
    kind = rng.randrange(3)
    if kind == 0:
        return "SENATE", f"{party_name} win the {state} Senate race", f"{state}{party}"
    if kind == 1:
        return "GOV", f"{party_name} win the {state} governor race", f"{state}{party}"
    approval = rng.randrange(36, 52)
    return "APPROVAL", f"Presidential approval above {approval}% on {date}", f"T{approval}"
