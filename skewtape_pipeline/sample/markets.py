"""The market universe of the sample and the four reference tables of each snapshot.

Every month (and two months before the first, so the first snapshot has a backlog) new topics
are listed on some venues. The universe records, per market, when it opens, closes and resolves,
and the few things that change later, so snapshot ``i``'s tables are a pure function of ``i``:

- ``markets``: listed markets; ``status`` moves open -> closed -> settled; about 5% get an
  amended title the month after listing; about 3% (at least one a month) were listed by mistake
  and are removed the next month; ``settlement_source`` exists from the schema break on.
- ``resolutions``: seq 1 when a market resolves, seq 2 when about 4% are restated weeks later.
- ``matched_events``: topics listed on two or more of kalshi/polymarket/predictit; reviewed
  (confidence 1.0) the month after listing, and about 5% (at least one) dropped as false matches.
- ``fees``: a schedule per venue and category since 2025; one new ``effective_from`` a month.
The departing venue stops listing and vanishes from all four tables from the plan's leave month.
Each listing month draws from its own seeded generator, so earlier months do not depend on how
many months are published.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa

from skewtape_pipeline.sample.months import (
    US_PER_DAY,
    US_PER_HOUR,
    add_months,
    month_end_us,
    month_start_us,
)
from skewtape_pipeline.sample.plan import VENUE_NAMES, ChainPlan
from skewtape_pipeline.sample.tables import DECIMAL, TS_US, UNITS_PER_DOLLAR, decimal_array
from skewtape_pipeline.sample.topics import ACTIVITY, Topic, draw_topic, ticker_date
from skewtape_pipeline.sample.venues import CATEGORIES, MATCHED_VENUES, VENUES, Venue

BACKLOG_MONTHS = 2
"""Listing months before the first published month (markets already open when it starts)."""

MARKETS_COLUMNS: list[tuple[str, pa.DataType]] = [
    ("venue", pa.string()),
    ("market_id", pa.string()),
    ("title", pa.string()),
    ("category", pa.string()),
    ("open_time", TS_US),
    ("close_time", TS_US),
    ("tick_size", DECIMAL),
    ("status", pa.string()),
]
SETTLEMENT_SOURCE: tuple[str, pa.DataType] = ("settlement_source", pa.string())
"""The column ``markets`` gains at the schema break."""
RESOLUTIONS_COLUMNS: list[tuple[str, pa.DataType]] = [
    ("venue", pa.string()),
    ("market_id", pa.string()),
    ("seq", pa.int64()),
    ("resolved_at", TS_US),
    ("outcome", pa.string()),
    ("settlement_price", DECIMAL),
    ("note", pa.string()),
]
MATCHED_EVENTS_COLUMNS: list[tuple[str, pa.DataType]] = [
    ("event_id", pa.string()),
    ("title", pa.string()),
    ("category", pa.string()),
    *((f"{venue}_market_id", pa.string()) for venue in MATCHED_VENUES),
    ("match_confidence", DECIMAL),
    ("reviewed", pa.bool_()),
    ("matched_at", TS_US),
]
FEES_COLUMNS: list[tuple[str, pa.DataType]] = [
    ("venue", pa.string()),
    ("category", pa.string()),
    ("effective_from", TS_US),
    ("taker_fee", DECIMAL),
    ("maker_fee", DECIMAL),
    ("fee_basis", pa.string()),
]

_SOURCES = {
    "crypto": "CF Benchmarks reference rate",
    "economics": "official statistical release",
    "politics": "certified result or named poll average",
    "sports": "official league result",
    "weather": "NWS climatological report",
}
_ORACLE_SOURCES = {"polymarket": "UMA optimistic oracle", "augur": "REP token reporters"}
_FEE_SINCE_US = month_start_us("2025-01")
_FEE_STEPS = (-50, 50, 100, 150)


@dataclass(frozen=True)
class Market:
    """One venue's market on one topic, with everything that later happens to it."""

    venue: str
    market_id: str
    title: str
    category: str
    open_us: int
    close_us: int
    tick: int
    """Price tick in 1/10_000 dollar."""
    listed_at: int
    """Chain index of the listing month (negative: before the first published month)."""
    outcome: str
    resolved_us: int
    restated_us: int | None
    restated_outcome: str | None
    activity: float
    """Relative share of its venue's trades while it is open (0 for a withdrawn listing)."""
    belief: float
    """Log-odds of YES at the open."""
    amended_title: str | None = None
    withdrawn: bool = False

    def title_at(self, index: int) -> str:
        return self.amended_title if self.amended_title and index > self.listed_at else self.title

    def status_at(self, end_us: int) -> str:
        if self.close_us > end_us:
            return "open"
        return "settled" if self.resolved_us <= end_us else "closed"

    @property
    def settlement_source(self) -> str:
        return _ORACLE_SOURCES.get(self.venue, _SOURCES[self.category])


@dataclass(frozen=True)
class MatchedEvent:
    """One topic listed on two or more matched venues."""

    event_id: str
    title: str
    category: str
    legs: tuple[tuple[str, str], ...]
    """(venue, market_id) per venue that lists the topic."""
    confidence: int
    """Matching confidence before review, in 1/10_000."""
    matched_us: int
    listed_at: int
    false_match: bool = False


@dataclass(frozen=True)
class FeeChange:
    """One row of the fee schedule, published in snapshot ``published_at`` and later."""

    venue: str
    category: str
    effective_us: int
    taker: int
    maker: int
    basis: str
    published_at: int


@dataclass(frozen=True)
class Universe:
    """Every market, matched event and fee row the chain will ever publish."""

    plan: ChainPlan
    markets: tuple[Market, ...]
    events: tuple[MatchedEvent, ...]
    fees: tuple[FeeChange, ...]

    @classmethod
    def build(cls, plan: ChainPlan, *, seed: int, topics_per_month: int) -> Universe:
        """Draw the universe; deterministic for ``(seed, plan.months[0], topics_per_month)``."""
        markets: list[Market] = []
        events: list[MatchedEvent] = []
        used_ids: set[str] = set()
        for index in range(-BACKLOG_MONTHS, len(plan.months)):
            label = add_months(plan.months[0], index)
            rng = random.Random(f"{seed}:listing:{label}")
            listed, matched = _list_month(rng, plan, index, label, topics_per_month, used_ids)
            markets.extend(listed)
            events.extend(matched)
        return cls(plan, tuple(markets), tuple(events), tuple(_fee_schedule(plan, seed)))

    def live_markets(self, venue: str, index: int) -> list[Market]:
        """``venue``'s tradable markets during month ``index``, sorted by market_id."""
        start, end = self._bounds(index)
        live = [
            m
            for m in self.markets
            if m.venue == venue and not m.withdrawn and m.open_us < end and m.close_us > start
        ]
        return sorted(live, key=lambda m: m.market_id)

    def tables(self, index: int) -> dict[str, pa.Table]:
        """The four reference tables of snapshot ``index``, each sorted by its key."""
        return {
            "markets.parquet": self._markets_table(index),
            "resolutions.parquet": self._resolutions_table(index),
            "matched_events.parquet": self._matched_events_table(index),
            "fees.parquet": self._fees_table(index),
        }

    def _bounds(self, index: int) -> tuple[int, int]:
        month = self.plan.months[index]
        return month_start_us(month), month_end_us(month)

    def _listed(self, index: int) -> Iterable[Market]:
        for m in self.markets:
            gone = m.withdrawn and m.listed_at < index
            if m.listed_at <= index and not gone and self.plan.has_venue(m.venue, index):
                yield m

    def _markets_table(self, index: int) -> pa.Table:
        _, end = self._bounds(index)
        with_source = self.plan.schema_version_at(index) >= 2
        rows = [
            {
                "venue": m.venue,
                "market_id": m.market_id,
                "title": m.title_at(index),
                "category": m.category,
                "open_time": m.open_us,
                "close_time": m.close_us,
                "tick_size": m.tick,
                "status": m.status_at(end),
                "settlement_source": m.settlement_source,
            }
            for m in self._listed(index)
        ]
        columns = MARKETS_COLUMNS + ([SETTLEMENT_SOURCE] if with_source else [])
        return build_table(columns, rows, key=("venue", "market_id"))

    def _resolutions_table(self, index: int) -> pa.Table:
        _, end = self._bounds(index)
        rows: list[dict[str, Any]] = []
        for m in self._listed(index):
            if m.withdrawn or m.resolved_us > end:
                continue
            rows.append(_resolution(m, 1, m.resolved_us, m.outcome, "final"))
            if m.restated_us is not None and m.restated_us <= end and m.restated_outcome:
                note = "restated after dispute"
                rows.append(_resolution(m, 2, m.restated_us, m.restated_outcome, note))
        return build_table(RESOLUTIONS_COLUMNS, rows, key=("venue", "market_id", "seq"))

    def _matched_events_table(self, index: int) -> pa.Table:
        rows = []
        for event in self.events:
            if event.listed_at > index or (event.false_match and event.listed_at < index):
                continue
            reviewed = index > event.listed_at
            legs = dict(event.legs)
            rows.append(
                {
                    "event_id": event.event_id,
                    "title": event.title,
                    "category": event.category,
                    **{f"{v}_market_id": legs.get(v) for v in MATCHED_VENUES},
                    "match_confidence": UNITS_PER_DOLLAR if reviewed else event.confidence,
                    "reviewed": reviewed,
                    "matched_at": event.matched_us,
                }
            )
        return build_table(MATCHED_EVENTS_COLUMNS, rows, key=("event_id",))

    def _fees_table(self, index: int) -> pa.Table:
        rows = [
            {
                "venue": f.venue,
                "category": f.category,
                "effective_from": f.effective_us,
                "taker_fee": f.taker,
                "maker_fee": f.maker,
                "fee_basis": f.basis,
            }
            for f in self.fees
            if f.published_at <= index and self.plan.has_venue(f.venue, index)
        ]
        return build_table(FEES_COLUMNS, rows, key=("venue", "category", "effective_from"))


def build_table(
    columns: Sequence[tuple[str, pa.DataType]], rows: list[dict[str, Any]], *, key: Sequence[str]
) -> pa.Table:
    """An Arrow table of ``rows`` (dicts) with ``columns``, sorted by ``key``.

    Decimal columns take integer units of 1/10_000; timestamp columns take microseconds.
    """
    rows = sorted(rows, key=lambda row: tuple(row[k] for k in key))
    arrays = []
    for name, kind in columns:
        values = [row[name] for row in rows]
        arrays.append(decimal_array(values) if kind == DECIMAL else pa.array(values, kind))
    return pa.Table.from_arrays(arrays, schema=pa.schema(columns))


def _resolution(m: Market, seq: int, at_us: int, outcome: str, note: str) -> dict[str, Any]:
    return {
        "venue": m.venue,
        "market_id": m.market_id,
        "seq": seq,
        "resolved_at": at_us,
        "outcome": outcome,
        "settlement_price": UNITS_PER_DOLLAR if outcome == "yes" else 0,
        "note": note,
    }


# --- drawing one listing month ------------------------------------------------------------------


def _list_month(
    rng: random.Random,
    plan: ChainPlan,
    index: int,
    label: str,
    topics_per_month: int,
    used_ids: set[str],
) -> tuple[list[Market], list[MatchedEvent]]:
    start, end = month_start_us(label), month_end_us(label)
    markets: list[Market] = []
    events: list[MatchedEvent] = []
    for ordinal in range(topics_per_month):
        topic = draw_topic(rng, month_start_us=start, month_end_us=end)
        venues = _venues_for(rng, plan, index, topic, ordinal)
        legs = [_market(rng, VENUES[v], topic, index, end, used_ids) for v in venues]
        markets.extend(legs)
        matched = [(m.venue, m.market_id) for m in legs if m.venue in MATCHED_VENUES]
        if len(matched) >= 2:
            event_id = f"EVT-{label.replace('-', '')}-{ordinal:05d}"
            matched_us = min(
                max(m.open_us for m in legs) + rng.randrange(1, 48) * US_PER_HOUR, end - 1
            )
            confidence = rng.randrange(8_000, 9_900)
            events.append(
                MatchedEvent(
                    event_id,
                    topic.title,
                    topic.category,
                    tuple(matched),
                    confidence,
                    matched_us,
                    index,
                )
            )
    if index < 0:
        return markets, events
    return _mark_later_changes(rng, markets, events)


def _venues_for(
    rng: random.Random, plan: ChainPlan, index: int, topic: Topic, ordinal: int
) -> list[str]:
    """Venues listing ``topic``; the first topics of a month are forced onto every venue in turn
    (and the very first onto two matched venues), so small samples still exercise everything."""
    chosen = set()
    for name in VENUE_NAMES:
        venue = VENUES[name]
        share = venue.politics_share if topic.category == "politics" else venue.listing_share
        if rng.random() < share:
            chosen.add(name)
    if ordinal < len(VENUE_NAMES):
        chosen.add(VENUE_NAMES[ordinal])
    if ordinal == 0:
        chosen.update(MATCHED_VENUES[:2])
    return [v for v in VENUE_NAMES if v in chosen and plan.has_venue(v, index)] or ["kalshi"]


def _market(
    rng: random.Random, venue: Venue, topic: Topic, index: int, month_end: int, used: set[str]
) -> Market:
    open_us = min(topic.open_us + rng.randrange(0, 12 * US_PER_HOUR), month_end - 1)
    open_us = min(open_us, topic.close_us - US_PER_HOUR)
    tick = venue.ticks[1] if rng.random() < venue.second_tick_share else venue.ticks[0]
    low, high = venue.resolve_delay_hours
    resolved_us = topic.close_us + int(rng.uniform(low, high) * US_PER_HOUR) + rng.randrange(60)
    restated_us = restated_outcome = None
    if rng.random() < 0.04:
        restated_us = resolved_us + int(rng.uniform(3, 25) * US_PER_DAY)
        flipped = "no" if topic.outcome == "yes" else "yes"
        restated_outcome = flipped if rng.random() < 0.5 else topic.outcome
    return Market(
        venue=venue.name,
        market_id=_market_id(rng, venue, topic, used),
        title=topic.title,
        category=topic.category,
        open_us=open_us,
        close_us=topic.close_us,
        tick=tick,
        listed_at=index,
        outcome=topic.outcome,
        resolved_us=resolved_us,
        restated_us=restated_us,
        restated_outcome=restated_outcome,
        activity=rng.lognormvariate(0.0, 1.5) * ACTIVITY[topic.category],
        belief=topic.belief + rng.gauss(0.0, 0.2),
    )


def _market_id(rng: random.Random, venue: Venue, topic: Topic, used: set[str]) -> str:
    while True:
        if venue.market_id_style == "series":
            candidate = f"KX{topic.series}-{ticker_date(topic.close_us)}-{topic.strike}"
            if candidate in used:
                candidate += f"-{rng.randrange(2, 100)}"
        elif venue.market_id_style == "hex64":
            candidate = f"0x{rng.getrandbits(256):064x}"
        elif venue.market_id_style == "hex40":
            candidate = f"0x{rng.getrandbits(160):040x}"
        else:
            candidate = str(rng.randrange(10_000, 99_999))
        if candidate not in used:
            used.add(candidate)
            return candidate


def _mark_later_changes(
    rng: random.Random, markets: list[Market], events: list[MatchedEvent]
) -> tuple[list[Market], list[MatchedEvent]]:
    """Pick the listings withdrawn or amended next month and the false matches."""
    in_events = {leg for event in events for leg in event.legs}
    free = [i for i, m in enumerate(markets) if (m.venue, m.market_id) not in in_events]
    withdrawn = set(rng.sample(free, min(len(free), max(1, round(0.03 * len(markets))))))
    for i in withdrawn:
        markets[i] = replace(markets[i], withdrawn=True, activity=0.0)
    for i, m in enumerate(markets):
        if i not in withdrawn and rng.random() < 0.05:
            markets[i] = replace(m, amended_title=f"{m.title} (per the settlement source)")
    if events:
        false_count = max(1, round(0.05 * len(events)))
        for i in rng.sample(range(len(events)), min(len(events), false_count)):
            events[i] = replace(events[i], false_match=True)
    return markets, events


def _fee_schedule(plan: ChainPlan, seed: int) -> list[FeeChange]:
    """Base fees since 2025-01 for every venue and category, then one new row a month."""
    rows = [
        FeeChange(
            name,
            category,
            _FEE_SINCE_US,
            venue.taker_fee,
            venue.maker_fee,
            venue.fee_basis,
            -BACKLOG_MONTHS,
        )
        for name, venue in VENUES.items()
        for category in CATEGORIES
    ]
    latest = {(r.venue, r.category): r for r in rows}
    for index in range(1, len(plan.months)):
        rng = random.Random(f"{seed}:fees:{plan.months[index]}")
        venue = MATCHED_VENUES[(index - 1) % len(MATCHED_VENUES)]
        category = rng.choice(CATEGORIES)
        before = latest[(venue, category)]
        effective = month_start_us(plan.months[index]) + rng.randrange(28) * US_PER_DAY
        change = FeeChange(
            venue,
            category,
            effective + 5 * US_PER_HOUR,
            max(0, before.taker + rng.choice(_FEE_STEPS)),
            max(0, before.maker + rng.choice((0, 0, 25))),
            before.basis,
            index,
        )
        rows.append(change)
        latest[(venue, category)] = change
    return rows
