"""Our tick archive as benchmark contenders (imported only when the tick engine is installed).

Whole single-symbol-day files and symbol-day splits go through the public
``compact_symbol_day`` (validate, choose encodings, write atomically, read back and compare,
report). A whole multi-symbol file (Kalshi: sorted by symbol then time, symbol column included)
has no public writer yet: it is written with the archive's own schema, encoding choice and
writer options from ``parquet_store``, plus a dictionary-encoded ``symbol`` column, and read back
and compared like the archive does. Raw sizes passed to the reports are measured before timing
(canonical CSV serialized), so timing covers validate + encode + write + verify.
"""

from __future__ import annotations

import datetime as dt
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from tick_anchors import Part, canonical_csv, file_bytes, tkc1_blob
from tick_data import NS_PER_DAY, Ticks, symbol_days

from skewtape_pipeline.ticks import parquet_store
from skewtape_pipeline.ticks.compact import compact_symbol_day
from skewtape_pipeline.ticks.model import TickBatch
from skewtape_pipeline.ticks.sides import BUY, SELL, UNKNOWN
from skewtape_pipeline.ticks.tiers import COLD, HOT, TierPolicy

POLICY = TierPolicy()
AGE_DAYS = {HOT: 0, COLD: POLICY.warm_max_age_days + 1}
OUR_SIDE_CODES = np.array([BUY, SELL, UNKNOWN], dtype=np.int8)  # from the benchmark's codes


def to_batch(t: Ticks) -> TickBatch:
    """The benchmark's integer columns as our exact TickBatch (no conversion of values)."""
    return TickBatch.from_units(
        pa.array(t.ts_ns, pa.int64()),
        pa.array(t.price, pa.int64()),
        pa.array(t.quantity, pa.int64()),
        pa.array(OUR_SIDE_CODES[t.side], pa.int8()),
        price_scale=t.price_scale,
        quantity_scale=t.quantity_scale,
    )


def day_of(t: Ticks) -> dt.date:
    days = np.unique(t.ts_ns // NS_PER_DAY)
    if len(days) != 1:
        raise ValueError(f"{t.name}: expected one UTC day, found {len(days)}")
    return dt.date(1970, 1, 1) + dt.timedelta(days=int(days[0]))


class SymbolDays:
    """Ours through ``compact_symbol_day``, one call per part, at one tier."""

    def __init__(self, tier: str):
        self.tier = tier
        self.raw_sizes: dict[int, int] = {}

    def prepare(self, parts: list[Part]) -> None:
        """Untimed: convert to batches and measure each part's canonical CSV."""
        self.batches = [to_batch(p.ticks) for p in parts]
        self.raw_sizes = {i: len(canonical_csv(p)) for i, p in enumerate(parts)}

    def __call__(self, parts: list[Part], workdir: Path) -> int:
        for i, part in enumerate(parts):
            compact_symbol_day(
                self.batches[i],
                symbol=part.symbol,
                day=dt.date.fromisoformat(part.date) if part.date else day_of(part.ticks),
                out=workdir,
                age_days=AGE_DAYS[self.tier],
                policy=POLICY,
                raw_size_bytes=self.raw_sizes[i],
                raw_size_basis="canonical_csv",
            )
        return file_bytes(workdir)


class WholeMultiSymbol:
    """Ours for a whole multi-symbol file: the archive's schema and writer options + symbol."""

    def __init__(self, tier: str):
        self.tier = tier

    def prepare(self, parts: list[Part]) -> None:
        self.batch = to_batch(parts[0].ticks)
        self.symbols = pa.array(parts[0].ticks.symbols, pa.string())

    def __call__(self, parts: list[Part], workdir: Path) -> int:
        settings = POLICY.settings_for(self.tier)
        archive = parquet_store.archive_table(self.batch)
        choice = parquet_store.choose_encodings(archive, settings)
        symbol = self.symbols.dictionary_encode().cast(pa.dictionary(pa.int32(), pa.string()))
        table = archive.add_column(0, pa.field("symbol", symbol.type, nullable=False), symbol)
        path = workdir / "whole.parquet"
        with pq.ParquetWriter(
            path,
            table.schema,
            version="2.6",
            use_dictionary=["symbol", *choice.dictionary_columns],
            column_encoding=choice.column_encoding,
            compression=settings.compression,
            compression_level=settings.compression_level,
            write_statistics=True,
            write_page_index=True,
            write_page_checksum=True,
            sorting_columns=[pq.SortingColumn(0), pq.SortingColumn(1)],
            store_decimal_as_integer=True,
            store_schema=False,
        ) as writer:
            writer.write_table(table, row_group_size=settings.row_group_size)
        back = pq.read_table(path)
        for name in table.column_names:
            if not _decoded(back.column(name)).equals(_decoded(table.column(name))):
                raise RuntimeError(f"{path}: column {name} did not read back equal")
        return path.stat().st_size


def _decoded(column: pa.ChunkedArray) -> pa.ChunkedArray:
    """Dictionary columns as their values; decimals as their unscaled integers."""
    if pa.types.is_dictionary(column.type):
        return column.cast(column.type.value_type)
    if pa.types.is_decimal(column.type):
        return column.cast(pa.decimal128(38, column.type.scale))
    return column


def ours_yardsticks(ticks: Ticks) -> dict[str, object]:
    """Extra rows for a multi-symbol whole file: our settings in one row group, no date column
    (what the consolidated layout's row groups and date column cost)."""
    if ticks.symbols is None:
        return {}
    return {"ours' settings, one row group, no date (yardstick)": WholeMultiSymbol(COLD)}


def ours_contenders(kind: str) -> dict[str, object]:
    """Contenders for a whole file (cold tier) or a symbol-day split (hot and cold)."""
    if kind == "whole":
        return {"ours, cold tier": _Whole(COLD)}
    return {"ours, hot tier": SymbolDays(HOT), "ours, cold tier": SymbolDays(COLD)}


class WholeConsolidated:
    """Ours for a whole multi-symbol file: one consolidated file (``write_consolidated_file``:
    symbol and date columns, rows by symbol then time, row groups on symbol-day boundaries)."""

    def __init__(self, tier: str):
        self.tier = tier

    def prepare(self, parts: list[Part]) -> None:
        from skewtape_pipeline.ticks.consolidate import SymbolDayRows

        self.rows = [
            SymbolDayRows(symbol=s, day=dt.date.fromisoformat(d), batch=to_batch(t))
            for s, d, t in symbol_days(parts[0].ticks)
        ]

    def __call__(self, parts: list[Part], workdir: Path) -> int:
        from skewtape_pipeline.ticks.consolidate import write_consolidated_file

        written = write_consolidated_file(
            self.rows, workdir, settings=POLICY.settings_for(self.tier), metadata={}
        )
        return written.bytes


def _multi_symbol_writer(tier: str) -> object:
    try:
        from skewtape_pipeline.ticks.consolidate import write_consolidated_file  # noqa: F401
    except ImportError:
        return WholeMultiSymbol(tier)
    return WholeConsolidated(tier)


class _Whole:
    """A whole file: one symbol-day goes through compact_symbol_day, several symbols are one
    consolidated file (or, before that writer existed, the archive's writer plus a symbol)."""

    def __init__(self, tier: str):
        self.single, self.multi = SymbolDays(tier), _multi_symbol_writer(tier)

    def prepare(self, parts: list[Part]) -> None:
        self.chosen = self.multi if parts[0].with_symbol else self.single
        self.chosen.prepare(parts)

    def __call__(self, parts: list[Part], workdir: Path) -> int:
        return self.chosen(parts, workdir)


def throughput_check(t: Ticks, workdir: Path) -> tuple[float, str]:
    """Hot tier, one symbol-day through compact_symbol_day: ticks per second (and how)."""
    contender = SymbolDays(HOT)
    part = Part("whole", t.symbol, None, t, with_symbol=False)
    contender.prepare([part])
    scratch = workdir / "throughput"
    scratch.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    contender([part], scratch)
    seconds = time.perf_counter() - start
    return len(t) / seconds, f"({len(t):,} ticks in {seconds:.2f} s)"


def check_tkc1_matches_ours(t: Ticks) -> None:
    """The benchmark's vectorized TKC1 encoder gives the project's TKC1 bytes exactly."""
    from skewtape_pipeline.ticks.tkc1 import encode_columns

    sample = t.take(slice(0, 5_000), symbol=t.symbol)
    ours = encode_columns(
        sample.ts_ns.tolist(),
        sample.price.tolist(),
        sample.quantity.tolist(),
        bytes([[1, 2, 0][s] for s in sample.side]),
        price_scale=sample.price_scale,
    )
    if ours != tkc1_blob(sample):
        raise RuntimeError("the benchmark's TKC1 encoder differs from skewtape_pipeline's")


def check_readers_match_ours(t: Ticks, path: Path) -> str:
    """Compare the benchmark's loader with the project's reader of the same real file."""
    from skewtape_pipeline.ticks import sources

    readers = {
        "kalshi": (sources.read_kalshi_trades, {}),
        "tardis": (sources.read_tardis_trades, {}),
        "lobster": (sources.read_lobster_messages, {}),
    }
    key = next(k for k in readers if k in t.name)
    reader, kwargs = readers[key]
    source = reader(path, **kwargs)
    batch = source.to_batch(price_scale=t.price_scale, quantity_scale=t.quantity_scale)
    theirs = np.column_stack(
        [
            batch.ts_ns.to_numpy(),
            batch.price.to_numpy(),
            batch.quantity.to_numpy(),
            batch.side.to_numpy().astype(np.int64),
        ]
    )
    mine = np.column_stack([t.ts_ns, t.price, t.quantity, OUR_SIDE_CODES[t.side].astype(np.int64)])
    if len(theirs) != len(mine):
        return f"row counts differ: ours {len(theirs)}, benchmark {len(mine)}"
    order = lambda m: m[np.lexsort(m.T[::-1])]  # noqa: E731
    if not np.array_equal(order(theirs), order(mine)):
        return "values differ"
    return "same ticks"
