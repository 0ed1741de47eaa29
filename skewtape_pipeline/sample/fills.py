"""Trades (fills) of one venue-month, hourly candles derived from them, and trade corrections.

What real prediction-market trades look like, and how the generator imitates it:

- Activity is heavy-tailed: each market's share of its venue's trades is log-normal, so most
  markets trade a few times a day (on the days they trade at all) and a few are busy.
- Trades come in sessions (bursts around a moment of news), and an aggressive order often fills
  against several resting orders at once: those fills share the exact same timestamp, one tick
  apart, with the same taker side (about a quarter of trades repeat the previous timestamp).
- Timestamps have microsecond resolution (stored as ns).
- Prices wander in log-odds and drift towards the outcome as the close nears; they sit on the
  market's tick grid strictly inside (0, 1).
- Sizes are log-normal (median tens of contracts, a few thousands) and often round lots.
"""

from __future__ import annotations

import bisect
import math
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import pyarrow as pa

from skewtape_pipeline.sample.markets import Market
from skewtape_pipeline.sample.tables import DECIMAL, TS_NS, UNITS_PER_DOLLAR, decimal_array
from skewtape_pipeline.sample.venues import Venue

FILLS_SCHEMA = pa.schema(
    [
        ("venue", pa.string()),
        ("market_id", pa.string()),
        ("trade_id", pa.string()),
        ("ts", TS_NS),
        ("price", DECIMAL),
        ("quantity", pa.int64()),
        ("taker_side", pa.string()),
    ]
)
CANDLES_SCHEMA = pa.schema(
    [
        ("venue", pa.string()),
        ("market_id", pa.string()),
        ("bucket", TS_NS),
        ("open", DECIMAL),
        ("high", DECIMAL),
        ("low", DECIMAL),
        ("close", DECIMAL),
        ("volume", pa.int64()),
        ("trades", pa.int64()),
    ]
)

NS_PER_US = 1_000
NS_PER_HOUR = 3_600 * 10**9
TRADES_PER_SESSION = 2
SESSION_SPREAD_US = 40 * 60 * 1_000_000
SWEEP_CHANCE = 0.22
"""Chance that an order fills against more than one resting order (same timestamp)."""
ROUND_LOTS = (5, 10, 20, 25, 50, 100, 200, 250, 500, 1_000, 2_000, 2_500, 5_000, 10_000)
ROUND_LOT_CHANCE = 0.35
MAX_QUANTITY = 100_000
"""Largest single trade (contracts): caps the far tail of the log-normal."""
OUTCOME_LOGIT = 4.6


@dataclass
class Fills:
    """Trades of one venue-month as columns, sorted by market_id then ts.

    ``price`` is in 1/10_000 dollar, ``ts`` in ns since the epoch (UTC), ``taker_yes`` is True
    for a YES taker.
    """

    venue: str
    market_id: list[str] = field(default_factory=list)
    trade_id: list[str] = field(default_factory=list)
    ts: list[int] = field(default_factory=list)
    price: list[int] = field(default_factory=list)
    quantity: list[int] = field(default_factory=list)
    taker_yes: list[bool] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.ts)

    def append(self, row: tuple[str, str, int, int, int, bool]) -> None:
        market_id, trade_id, ts, price, quantity, taker_yes = row
        self.market_id.append(market_id)
        self.trade_id.append(trade_id)
        self.ts.append(ts)
        self.price.append(price)
        self.quantity.append(quantity)
        self.taker_yes.append(taker_yes)

    def extend(
        self,
        market_id: str,
        trade_ids: list[str],
        ts: int,
        prices: list[int],
        quantities: list[int],
        taker_yes: bool,
    ) -> None:
        """Append the fills of one order: same market, timestamp and taker side."""
        count = len(trade_ids)
        self.market_id.extend([market_id] * count)
        self.trade_id.extend(trade_ids)
        self.ts.extend([ts] * count)
        self.price.extend(prices)
        self.quantity.extend(quantities)
        self.taker_yes.extend([taker_yes] * count)

    def rows(self) -> Iterator[tuple[str, str, int, int, int, bool]]:
        """(market_id, trade_id, ts, price, quantity, taker_yes) per trade, in file order."""
        return zip(
            self.market_id,
            self.trade_id,
            self.ts,
            self.price,
            self.quantity,
            self.taker_yes,
            strict=True,
        )

    def to_table(self) -> pa.Table:
        """The fills file's table (see :data:`FILLS_SCHEMA`)."""
        sides = ["yes" if yes else "no" for yes in self.taker_yes]
        arrays = [
            pa.array([self.venue] * len(self), pa.string()),
            pa.array(self.market_id, pa.string()),
            pa.array(self.trade_id, pa.string()),
            pa.array(self.ts, TS_NS),
            decimal_array(self.price),
            pa.array(self.quantity, pa.int64()),
            pa.array(sides, pa.string()),
        ]
        return pa.Table.from_arrays(arrays, schema=FILLS_SCHEMA)


def generate_fills(
    *,
    seed: int,
    venue: Venue,
    month: str,
    window_us: tuple[int, int],
    markets: Sequence[Market],
    count: int,
) -> Fills:
    """``count`` trades of ``venue`` in ``month`` over its live ``markets`` (sorted by id).

    Deterministic for the arguments: one generator seeded by (seed, venue, month).
    """
    rng = random.Random(f"{seed}:fills:{venue.name}:{month}")
    fills = Fills(venue.name)
    start, end = window_us
    spans = [(max(m.open_us, start), min(m.close_us, end)) for m in markets]
    weights = [m.activity * (b - a) for m, (a, b) in zip(markets, spans, strict=True)]
    if not markets or count <= 0 or sum(weights) <= 0:
        return fills
    counts = [0] * len(markets)
    for pick in rng.choices(range(len(markets)), weights=weights, k=count):
        counts[pick] += 1
    ids = _TradeIds(rng, venue, month)
    for market, span, n in zip(markets, spans, counts, strict=True):
        if n:
            _market_trades(rng, venue, market, span, n, ids, fills)
    return fills


class _TradeIds:
    """Trade ids in the venue's style: uuid4, ``0x<tx hash>-<log index>`` or a serial number."""

    def __init__(self, rng: random.Random, venue: Venue, month: str):
        self.rng, self.style = rng, venue.trade_id_style
        year, number = (int(part) for part in month.split("-"))
        self.serial = (year * 12 + number) * 1_000_000

    def for_order(self, fills: int) -> list[str]:
        """Ids of the ``fills`` trades one order produced."""
        if self.style == "uuid":
            return [_uuid4(self.rng.getrandbits(128)) for _ in range(fills)]
        if self.style == "tx":
            tx = f"0x{self.rng.getrandbits(256):064x}"
            first = self.rng.randrange(0, 200)
            return [f"{tx}-{first + k}" for k in range(fills)]
        self.serial += fills
        return [str(self.serial - fills + k) for k in range(fills)]


def _uuid4(bits: int) -> str:
    h = f"{bits:032x}"
    variant = "89ab"[int(h[16], 16) & 3]
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{variant}{h[17:20]}-{h[20:]}"


def _market_trades(
    rng: random.Random,
    venue: Venue,
    market: Market,
    span: tuple[int, int],
    n: int,
    ids: _TradeIds,
    out: Fills,
) -> None:
    """Append ``n`` trades of ``market`` within ``span`` (µs) to ``out``, in time order."""
    low, high = span
    sessions = [rng.randrange(low, high) for _ in range(max(1, round(n / TRADES_PER_SESSION)))]
    orders: list[tuple[int, int]] = []
    remaining = n
    while remaining:
        fill_count = min(remaining, _sweep_size(rng))
        moment = int(rng.choice(sessions) + rng.gauss(0.0, SESSION_SPREAD_US))
        orders.append((min(max(moment, low), high - 1), fill_count))
        remaining -= fill_count
    orders.sort()
    life = max(1, market.close_us - market.open_us)
    target = OUTCOME_LOGIT if market.outcome == "yes" else -OUTCOME_LOGIT
    tick, top = market.tick, UNITS_PER_DOLLAR - market.tick
    noise = rng.gauss(0.0, 0.4)
    for moment, fill_count in orders:
        weight = ((moment - market.open_us) / life) ** 3
        before, noise = noise, 0.9 * noise + rng.gauss(0.0, 0.25)
        price = _on_grid(market.belief * (1 - weight) + target * weight + noise, tick)
        taker_yes = rng.random() < (0.7 if noise > before else 0.3)
        step = tick if taker_yes else -tick
        prices = [min(max(price + k * step, tick), top) for k in range(fill_count)]
        sizes = [_quantity(rng, venue, p) for p in prices]
        ts = moment * NS_PER_US
        out.extend(market.market_id, ids.for_order(fill_count), ts, prices, sizes, taker_yes)


def _sweep_size(rng: random.Random) -> int:
    if rng.random() >= SWEEP_CHANCE:
        return 1
    size = 2
    while rng.random() < 0.45:
        size += 1
    return size


def _on_grid(logit: float, tick: int) -> int:
    probability = 1.0 / (1.0 + math.exp(-logit))
    return _clamp(round(probability * UNITS_PER_DOLLAR / tick) * tick, tick)


def _clamp(units: int, tick: int) -> int:
    return min(max(units, tick), UNITS_PER_DOLLAR - tick)


def _quantity(rng: random.Random, venue: Venue, price: int) -> int:
    drawn = math.exp(rng.gauss(math.log(venue.quantity_median), venue.quantity_sigma))
    size = min(MAX_QUANTITY, max(1, round(drawn)))
    if size >= ROUND_LOTS[0] and rng.random() < ROUND_LOT_CHANCE:
        at = bisect.bisect_left(ROUND_LOTS, size)
        near = ROUND_LOTS[max(0, at - 1) : at + 1]
        size = min(near, key=lambda lot: abs(lot - size))
    if venue.max_position_dollars is not None:
        size = min(size, venue.max_position_dollars * UNITS_PER_DOLLAR // price)
    return size


# --- candles ------------------------------------------------------------------------------------


def candles_from(fills: Fills) -> pa.Table:
    """Hourly OHLC candles per market from ``fills`` (sorted by market_id, ts).

    One row per (market_id, hour) that has trades; volume is the sum of quantities.
    """
    keys: list[tuple[str, int]] = []
    ohlc: list[list[int]] = []
    volume: list[int] = []
    trades: list[int] = []
    for market_id, _, ts, price, quantity, _ in fills.rows():
        key = (market_id, ts - ts % NS_PER_HOUR)
        if keys and keys[-1] == key:
            bar = ohlc[-1]
            bar[1], bar[2], bar[3] = max(bar[1], price), min(bar[2], price), price
            volume[-1] += quantity
            trades[-1] += 1
            continue
        keys.append(key)
        ohlc.append([price, price, price, price])
        volume.append(quantity)
        trades.append(1)
    arrays = [
        pa.array([fills.venue] * len(keys), pa.string()),
        pa.array([k[0] for k in keys], pa.string()),
        pa.array([k[1] for k in keys], TS_NS),
        *(decimal_array([bar[i] for bar in ohlc]) for i in range(4)),
        pa.array(volume, pa.int64()),
        pa.array(trades, pa.int64()),
    ]
    return pa.Table.from_arrays(arrays, schema=CANDLES_SCHEMA)


# --- corrections of a closed month --------------------------------------------------------------


@dataclass(frozen=True)
class Correction:
    """What :func:`correct_fills` changed, by trade id."""

    repriced: tuple[str, ...]
    resized: tuple[str, ...]
    removed: tuple[str, ...]
    added: tuple[str, ...]


def correct_fills(
    fills: Fills, *, seed: int, ticks: dict[str, int], month_end_us: int, changes: int = 3
) -> tuple[Fills, Correction]:
    """A republished copy of ``fills``: ``changes`` trades repriced by one tick, ``changes``
    resized, ``changes`` removed (busted) and ``changes + 2`` late-reported trades added.

    ``ticks`` maps market_id to its tick. Kept trades keep their trade ids; late trades get
    new uuid4 ids, 1 µs to 90 s after an existing trade of the same market (never past
    ``month_end_us``). The input is not modified; rows stay sorted by market_id then ts.
    Deterministic for (seed, venue).
    """
    rng = random.Random(f"{seed}:correction:{fills.venue}")
    rows = [list(row) for row in fills.rows()]
    picked = rng.sample(range(len(rows)), min(len(rows), 3 * changes))
    repriced, resized, removed = (picked[i * changes : (i + 1) * changes] for i in range(3))
    for i in repriced:
        tick = ticks[rows[i][0]]
        up = rows[i][3] + tick <= UNITS_PER_DOLLAR - tick
        rows[i][3] += tick if up else -tick
    for i in resized:
        rows[i][4] = max(1, rows[i][4] + rng.choice((-1, 1)) * max(1, rows[i][4] // 2))
    added = []
    for i in rng.sample(range(len(rows)), min(len(rows), changes + 2)):
        market_id, _, ts, price, _, taker_yes = rows[i]
        late_ts = min(ts + rng.randrange(1, 90_000_000) * NS_PER_US, (month_end_us - 1) * NS_PER_US)
        trade_id = _uuid4(rng.getrandbits(128))
        added.append([market_id, trade_id, late_ts, price, rng.randrange(1, 200), taker_yes])
    gone = set(removed)
    kept = [row for i, row in enumerate(rows) if i not in gone] + added
    kept.sort(key=lambda row: (row[0], row[2]))
    corrected = Fills(fills.venue)
    for row in kept:
        corrected.append(tuple(row))  # type: ignore[arg-type]
    summary = Correction(
        repriced=tuple(rows[i][1] for i in repriced),
        resized=tuple(rows[i][1] for i in resized),
        removed=tuple(rows[i][1] for i in removed),
        added=tuple(row[1] for row in added),
    )
    return corrected, summary
