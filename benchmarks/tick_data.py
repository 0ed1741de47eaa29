"""Tick batches for the compaction benchmark: the real files mapped exactly, and a synthetic batch.

Every batch is held as exact integers (nanosecond timestamps, prices and quantities scaled to a
fixed number of decimals, side codes), so every contender encodes exactly the same numbers.
The mappings follow ``SOURCES.md`` beside the real files; values are parsed from their text,
never through floats.
"""

from __future__ import annotations

import csv
import dataclasses
import datetime as dt
import itertools
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa

BUY, SELL, UNKNOWN = 0, 1, 2
SIDE_NAMES = ("BUY", "SELL", "UNKNOWN")
NS_PER_DAY = 86_400 * 10**9

KALSHI_FILE = "jdkatz21__Prediction_Markets_Public__trade_level_data_payrolls.csv"
TARDIS_FILE = "nautechsystems__nautilus_trader__tardis_trades.csv"
LOBSTER_FILE = "aronbencsiknu__KV6003-thesis__Amazon__message.csv"
LOBSTER_MIDNIGHT_NS = 1_340_251_200_000_000_000  # 2012-06-21 00:00 America/New_York, in UTC ns


@dataclasses.dataclass
class Ticks:
    """One batch of ticks as exact integer columns.

    ``symbols`` is one value per row when the batch holds several instruments (then it is sorted
    by symbol, then time); otherwise ``None`` and the batch is the single instrument ``symbol``.
    """

    name: str
    ts_ns: np.ndarray  # int64
    price: np.ndarray  # int64, price * 10**price_scale
    quantity: np.ndarray  # int64, quantity * 10**quantity_scale
    side: np.ndarray  # uint8, BUY/SELL/UNKNOWN
    price_scale: int
    quantity_scale: int
    symbol: str
    symbols: np.ndarray | None = None  # object array of str, or None
    source_bytes: int | None = None

    def __len__(self) -> int:
        return len(self.ts_ns)

    def take(self, rows: np.ndarray | slice, *, symbol: str | None = None) -> Ticks:
        """The rows ``rows`` as a single-instrument batch (``symbol``) or keeping the symbols."""
        return Ticks(
            name=self.name,
            ts_ns=self.ts_ns[rows],
            price=self.price[rows],
            quantity=self.quantity[rows],
            side=self.side[rows],
            price_scale=self.price_scale,
            quantity_scale=self.quantity_scale,
            symbol=symbol if symbol is not None else self.symbol,
            symbols=None if (symbol is not None or self.symbols is None) else self.symbols[rows],
        )


def scaled_int(text: str, scale: int, *, where: str) -> int:
    """The exact decimal ``text`` times ``10**scale``; refuses a digit beyond ``scale``."""
    sign = -1 if text.startswith("-") else 1
    whole, _, frac = text.lstrip("+-").partition(".")
    if len(frac) > scale and frac[scale:].strip("0"):
        raise ValueError(f"{where}: {text!r} has more than {scale} decimals")
    frac = frac[:scale].ljust(scale, "0")
    return sign * int((whole or "0") + frac)


def _iso_utc_to_ns(text: str) -> int:
    """``2023-04-07T12:18:35.0610Z`` as integer UTC nanoseconds, fraction kept exact."""
    body = text.removesuffix("Z")
    seconds_part, _, frac = body.partition(".")
    whole = dt.datetime.strptime(seconds_part, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=dt.UTC)
    return int(whole.timestamp()) * 10**9 + int(frac.ljust(9, "0")[:9] or "0")


def _sort_by_symbol_then_time(ticks: Ticks) -> Ticks:
    order = np.lexsort((ticks.ts_ns, ticks.symbols))
    return ticks.take(order)


def load_kalshi(path: Path) -> Ticks:
    """Kalshi trades: price = yes_price cents (scale 2), quantity = count, yes BUY, no SELL."""
    ts, price, qty, side, sym = [], [], [], [], []
    with path.open(newline="") as handle:
        for row in csv.DictReader(handle):
            ts.append(_iso_utc_to_ns(row["created_time"]))
            price.append(int(row["yes_price"]))
            qty.append(int(row["count"]))
            side.append({"yes": BUY, "no": SELL}[row["taker_side"]])
            sym.append(row["ticker"])
    ticks = Ticks(
        name="kalshi payrolls (166 tickers)",
        ts_ns=np.array(ts, dtype=np.int64),
        price=np.array(price, dtype=np.int64),
        quantity=np.array(qty, dtype=np.int64),
        side=np.array(side, dtype=np.uint8),
        price_scale=2,
        quantity_scale=0,
        symbol="KALSHI",
        symbols=np.array(sym, dtype=object),
    )
    ticks = _sort_by_symbol_then_time(ticks)
    ticks.source_bytes = path.stat().st_size
    return ticks


def load_tardis(path: Path) -> Ticks:
    """Binance BTCUSDT futures: ts = timestamp µs * 1000, price scale 2, amount scale 3."""
    ts, price, qty, side = [], [], [], []
    with path.open(newline="") as handle:
        for line, row in enumerate(csv.DictReader(handle), start=2):
            ts.append(int(row["timestamp"]) * 1000)
            price.append(scaled_int(row["price"], 2, where=f"{path.name}:{line} price"))
            qty.append(scaled_int(row["amount"], 3, where=f"{path.name}:{line} amount"))
            side.append({"buy": BUY, "sell": SELL}[row["side"]])
    return Ticks(
        name="tardis binance BTCUSDT",
        ts_ns=np.array(ts, dtype=np.int64),
        price=np.array(price, dtype=np.int64),
        quantity=np.array(qty, dtype=np.int64),
        side=np.array(side, dtype=np.uint8),
        price_scale=2,
        quantity_scale=3,
        symbol="BTCUSDT",
        source_bytes=path.stat().st_size,
    )


def load_lobster(path: Path) -> Ticks:
    """LOBSTER AMZN executions (types 4, 5): price/10_000 (scale 4), direction -1 -> BUY."""
    ts, price, qty, side = [], [], [], []
    with path.open(newline="") as handle:
        for time_text, kind, _order, size, px, direction in csv.reader(handle):
            if kind not in ("4", "5", "6"):
                continue
            seconds, _, frac = time_text.partition(".")
            ts.append(LOBSTER_MIDNIGHT_NS + int(seconds) * 10**9 + int(frac.ljust(9, "0") or "0"))
            price.append(int(px))
            qty.append(int(size))
            side.append(BUY if direction == "-1" else SELL)
    return Ticks(
        name="lobster NASDAQ AMZN executions",
        ts_ns=np.array(ts, dtype=np.int64),
        price=np.array(price, dtype=np.int64),
        quantity=np.array(qty, dtype=np.int64),
        side=np.array(side, dtype=np.uint8),
        price_scale=4,
        quantity_scale=0,
        symbol="AMZN",
        source_bytes=path.stat().st_size,
    )


REAL_LOADERS = {KALSHI_FILE: load_kalshi, TARDIS_FILE: load_tardis, LOBSTER_FILE: load_lobster}


def synthetic_ticks(n: int, *, seed: int = 20240315) -> Ticks:
    """A busy equity-like symbol-day of ``n`` trades, reproducible from ``seed``.

    Nanosecond timestamps over a 6.5 h session with bursty gaps (a quarter of them zero: one
    aggressor sweeping several resting orders), a random walk on a 0.01 grid stored at 4
    decimals, heavy-tailed sizes (odd lots and Zipf round lots) and sides that follow the
    price move, with runs, and 1% UNKNOWN (auction/cross prints).
    """
    rng = np.random.default_rng(seed)
    session_ns = int(6.5 * 3600 * 10**9)
    gaps = rng.lognormal(mean=0.0, sigma=2.0, size=n)
    gaps[rng.random(n) < 0.25] = 0.0
    gaps *= (session_ns * 0.999) / gaps.sum()
    start = 1_710_509_400 * 10**9  # 2024-03-15 13:30:00 UTC, the opening bell
    ts = start + np.cumsum(gaps.astype(np.int64))
    ts[0] = start
    steps = rng.choice(
        [-3, -2, -1, 0, 1, 2, 3], p=[0.005, 0.02, 0.14, 0.67, 0.14, 0.02, 0.005], size=n
    )
    steps[0] = 0
    price = 1_501_500 + np.cumsum(steps.astype(np.int64)) * 100  # 150.15 on a 0.01 grid, scale 4
    odd_lot = rng.integers(1, 100, size=n)
    round_lot = 100 * np.minimum(rng.zipf(1.8, size=n), 10_000)
    quantity = np.where(rng.random(n) < 0.45, odd_lot, round_lot).astype(np.int64)
    flips = rng.random(n) < 0.3
    side = (np.cumsum(flips) % 2).astype(np.uint8)
    side[steps > 0] = BUY
    side[steps < 0] = SELL
    side[rng.random(n) < 0.01] = UNKNOWN
    return Ticks(
        name=f"synthetic {n:,} ticks",
        ts_ns=ts.astype(np.int64),
        price=price,
        quantity=quantity,
        side=side,
        price_scale=4,
        quantity_scale=0,
        symbol="SYNTH",
    )


def symbol_days(ticks: Ticks) -> Iterator[tuple[str, str, Ticks]]:
    """Split into (symbol, UTC date, single-instrument batch), each in time order."""
    symbols = ticks.symbols if ticks.symbols is not None else np.full(len(ticks), ticks.symbol)
    days = ticks.ts_ns // NS_PER_DAY
    order = np.lexsort((ticks.ts_ns, days, symbols))
    symbols, days = symbols[order], days[order]
    change = np.flatnonzero((symbols[1:] != symbols[:-1]) | (days[1:] != days[:-1])) + 1
    bounds = np.concatenate(([0], change, [len(order)]))
    for lo, hi in itertools.pairwise(bounds):
        symbol = str(symbols[lo])
        date = (dt.date(1970, 1, 1) + dt.timedelta(days=int(days[lo]))).isoformat()
        yield symbol, date, ticks.take(order[lo:hi], symbol=symbol)


def decimal_array(values: np.ndarray, scale: int) -> pa.Array:
    """Exact decimal128(18, scale) Arrow array whose unscaled values are ``values`` (int64)."""
    words = np.empty((len(values), 2), dtype=np.int64)
    words[:, 0] = values
    words[:, 1] = np.where(values < 0, -1, 0)  # sign extension to 128 bits, little-endian
    buffer = pa.py_buffer(np.ascontiguousarray(words).tobytes())
    return pa.Array.from_buffers(pa.decimal128(18, scale), len(values), [None, buffer])


def to_arrow(ticks: Ticks, *, with_symbol: bool) -> pa.Table:
    """The logical tick table: ts (timestamp ns UTC), price, quantity (scaled int64), side."""
    columns: dict[str, pa.Array] = {}
    if with_symbol:
        symbols = ticks.symbols if ticks.symbols is not None else np.full(len(ticks), ticks.symbol)
        columns["symbol"] = pa.array(symbols, type=pa.string())
    columns["ts"] = pa.array(ticks.ts_ns, type=pa.int64()).view(pa.timestamp("ns", tz="UTC"))
    columns["price"] = pa.array(ticks.price, type=pa.int64())
    columns["quantity"] = pa.array(ticks.quantity, type=pa.int64())
    columns["side"] = pa.array(np.array(SIDE_NAMES, dtype=object)[ticks.side], type=pa.string())
    return pa.table(columns)
