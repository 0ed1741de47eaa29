"""Our tick archive as benchmark contenders (imported only when the tick engine is installed).

"Ours" stores each dataset with default flags: the coarsest exact timestamp unit and the
smallest exact price and quantity scales, detected from the data exactly as ``compact-ticks``
does when no flag is given (the detection is timed with the rest). The anchors store the
dataset as SOURCES.md maps it (nanoseconds, the mapping's scales).

Single-symbol files and symbol-day splits go through the public ``compact_symbol_day``
(validate, choose encodings, write atomically, read back and compare, report). The whole
multi-symbol Kalshi file is, as the issue defines it, one file sorted by symbol then time with
a ``symbol`` column, at the cold tier's settings: the archive's own columns
(``parquet_file.archive_table``), encoding choice (``choose_encodings``, ts measured since it
restarts at every symbol) and writer options (``writer_options``), plus a dictionary-encoded
``symbol`` column, read back and compared. What the cold tier's consolidated layout writes for
the same ticks (``write_consolidated_file``: symbol and date columns, row groups on symbol-day
boundaries) is printed beside it, not counted for the bar. Raw sizes passed to the reports are
measured before timing (canonical CSV serialized), so timing covers validate + encode + write +
verify.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from tick_anchors import Part, canonical_csv, file_bytes, tkc1_blob
from tick_data import NS_PER_DAY, Ticks, symbol_days

from skewtape_pipeline.ticks.archive.handle import Archive
from skewtape_pipeline.ticks.archive.ops.compact import compact_symbol_day
from skewtape_pipeline.ticks.archive.ops.compact_plan import SourceFacts, SymbolDayWrite
from skewtape_pipeline.ticks.archive.store.policy import COLD, HOT, TierPolicy
from skewtape_pipeline.ticks.encode import parquet_file
from skewtape_pipeline.ticks.encode.model import TickBatch, TickSchema, widest_schema
from skewtape_pipeline.ticks.encode.sides import BUY, SELL, UNKNOWN

POLICY = TierPolicy()
AGE_DAYS = {HOT: 0, COLD: POLICY.warm_max_age_days + 1}
OUR_SIDE_CODES = np.array([BUY, SELL, UNKNOWN], dtype=np.int8)  # from the benchmark's codes


@dataclasses.dataclass(frozen=True)
class SourceConfig:
    """The archive schema ours stores a dataset at: ``timestamp_unit`` and the scales."""

    timestamp_unit: str
    price_scale: int
    quantity_scale: int

    def describe(self) -> str:
        return (
            f"timestamp_unit {self.timestamp_unit}, price scale {self.price_scale}, "
            f"quantity scale {self.quantity_scale}"
        )


def dataset_config(t: Ticks) -> SourceConfig:
    """The dataset's own mapping: nanoseconds, the loader's scales."""
    return SourceConfig("ns", t.price_scale, t.quantity_scale)


def mapped_batch(t: Ticks) -> TickBatch:
    """The benchmark's integer columns as our TickBatch at the dataset's own mapping."""
    return TickBatch.from_units(
        pa.array(t.ts_ns, pa.int64()),
        pa.array(t.price, pa.int64()),
        pa.array(t.quantity, pa.int64()),
        pa.array(OUR_SIDE_CODES[t.side], pa.int8()),
        TickSchema(timestamp_unit="ns", price_scale=t.price_scale, quantity_scale=t.quantity_scale),
    )


def default_batch(batch: TickBatch) -> TickBatch:
    """What compaction stores by default: the coarsest exact unit and smallest exact scales,
    detected from the data (``TickBatch.smallest_schema``, the detection ``compact-ticks`` runs
    when no flag is given)."""
    return batch.smallest()


def config_for(t: Ticks) -> tuple[SourceConfig, str]:
    """The schema ours detects for ``t`` with default flags, and a line saying which."""
    schema = mapped_batch(t).smallest_schema()
    config = SourceConfig(schema.timestamp_unit, schema.price_scale, schema.quantity_scale)
    return config, f"ours: default flags (detected {config.describe()})"


def to_batch(t: Ticks) -> TickBatch:
    """``t`` as ours stores it by default (detected schema)."""
    return default_batch(mapped_batch(t))


def day_of(t: Ticks) -> dt.date:
    days = np.unique(t.ts_ns // NS_PER_DAY)
    if len(days) != 1:
        raise ValueError(f"{t.name}: expected one UTC day, found {len(days)}")
    return dt.date(1970, 1, 1) + dt.timedelta(days=int(days[0]))


class SymbolDays:
    """Ours through ``compact_symbol_day``, one call per part, at one tier."""

    counted = True

    def __init__(self, tier: str, config: SourceConfig):
        self.tier = tier
        self.config = config
        self.raw_sizes: dict[int, int] = {}

    def prepare(self, parts: list[Part]) -> None:
        """Untimed: the dataset's columns as batches (at its own mapping), each part's day and
        canonical CSV size."""
        self.batches = [mapped_batch(p.ticks) for p in parts]
        self.days = [dt.date.fromisoformat(p.date) if p.date else day_of(p.ticks) for p in parts]
        self.raw_sizes = {i: len(canonical_csv(p)) for i, p in enumerate(parts)}

    def __call__(self, parts: list[Part], workdir: Path) -> int:
        """Timed: default-flag detection (one schema for the dataset, as ``compact_source``
        detects it over the whole input), validate, encode, write, verify, report."""
        if len(self.batches) == 1:
            batches = [self.batches[0].smallest()]
        else:
            schema = widest_schema([batch.smallest_schema() for batch in self.batches])
            batches = [batch.at_schema(schema) for batch in self.batches]
        archive = Archive(workdir, policy=POLICY, audit_log=None)
        for i, part in enumerate(parts):
            compact_symbol_day(
                archive.core,
                batches[i],
                SymbolDayWrite(
                    symbol=part.symbol,
                    day=self.days[i],
                    age_days=AGE_DAYS[self.tier],
                    source=SourceFacts(self.raw_sizes[i], "canonical_csv"),
                ),
            )
        return file_bytes(workdir)


class WholeMultiSymbol:
    """A whole multi-symbol file as the issue defines it: one file sorted by symbol then time,
    symbol column included, with the archive's columns, encoding choice and writer options at
    the tier's settings; read back and compared before its size counts."""

    counted = True

    def __init__(self, tier: str, config: SourceConfig):
        self.tier = tier
        self.config = config

    def prepare(self, parts: list[Part]) -> None:
        self.batch = to_batch(parts[0].ticks)
        self.symbols = pa.array(parts[0].ticks.symbols, pa.string())

    def __call__(self, parts: list[Part], workdir: Path) -> int:
        settings = POLICY.settings_for(self.tier)
        archive = parquet_file.archive_table(self.batch)
        choice = parquet_file.choose_encodings(archive, settings, ts_sorted=False)
        choice = dataclasses.replace(
            choice, dictionary_columns=["symbol", *choice.dictionary_columns]
        )
        table = archive.add_column(0, pa.field("symbol", pa.string(), nullable=False), self.symbols)
        options = parquet_file.writer_options(
            settings.compression, settings.compression_level, choice, sorting_columns=(0, 1)
        )
        path = workdir / "whole.parquet"
        with pq.ParquetWriter(path, table.schema, **options) as writer:
            writer.write_table(table, row_group_size=settings.row_group_size)
            writer.add_key_value_metadata(self._key_values(settings))
        back = pq.read_table(path, page_checksum_verification=True)
        for name in table.column_names:
            if not _decoded(back.column(name)).equals(_decoded(table.column(name))):
                raise RuntimeError(f"{path}: column {name} did not read back equal")
        return path.stat().st_size

    def _key_values(self, settings) -> dict[str, str]:
        """The same key-value metadata an archive file carries (so sizes compare fairly)."""
        return {
            **parquet_file.file_metadata(self.batch, settings.compression_level),
            parquet_file.META_PREFIX + "tier": self.tier,
        }


def _decoded(column: pa.ChunkedArray) -> pa.ChunkedArray:
    """Dictionary columns as their values; decimals as decimal128 (same scale)."""
    if pa.types.is_dictionary(column.type):
        return column.cast(column.type.value_type)
    if pa.types.is_decimal(column.type):
        return column.cast(pa.decimal128(18, column.type.scale))
    return column


class WholeConsolidated:
    """What the tier's consolidated layout writes for a whole multi-symbol file
    (``write_consolidated_file``: symbol and date columns, rows by symbol then time, row groups
    on symbol-day boundaries). Printed for information; not the issue's definition."""

    counted = False

    def __init__(self, tier: str, config: SourceConfig):
        self.tier = tier
        self.config = config

    def prepare(self, parts: list[Part]) -> None:
        from skewtape_pipeline.ticks.archive.store.consolidate import SymbolDayRows

        whole = to_batch(parts[0].ticks)
        self.rows = [
            SymbolDayRows(
                symbol=s, day=dt.date.fromisoformat(d), batch=to_batch(t).at_schema(whole.schema)
            )
            for s, d, t in symbol_days(parts[0].ticks)
        ]

    def __call__(self, parts: list[Part], workdir: Path) -> int:
        from skewtape_pipeline.ticks.archive.store.consolidate import write_consolidated_file

        written = write_consolidated_file(
            self.rows, workdir, settings=POLICY.settings_for(self.tier), metadata={}
        )
        return written.bytes


def ours_contenders(kind: str, t: Ticks) -> tuple[dict[str, object], str]:
    """Contenders for a whole file (cold tier) or a symbol-day split (hot and cold), and the
    line saying which configuration they use. Contenders with ``counted`` False are printed
    but never count for a bar."""
    config, note = config_for(t)
    if kind == "split":
        return {
            "ours, hot tier": SymbolDays(HOT, config),
            "ours, cold tier": SymbolDays(COLD, config),
        }, note
    if t.symbols is None:
        return {"ours, cold tier": SymbolDays(COLD, config)}, note
    return {
        "ours, cold tier (one file, symbol column)": WholeMultiSymbol(COLD, config),
        "ours, cold consolidated layout (info)": WholeConsolidated(COLD, config),
    }, note


def throughput_check(t: Ticks, workdir: Path) -> tuple[float, str]:
    """Hot tier, one symbol-day through compact_symbol_day with default flags: ticks per
    second, and beside it pyarrow's write alone of the same columns with the same writer
    options in the same run (what a busy machine does to both)."""
    config, _ = config_for(t)
    contender = SymbolDays(HOT, config)
    part = Part("whole", t.symbol, None, t, with_symbol=False)
    contender.prepare([part])
    scratch = workdir / "throughput"
    scratch.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    contender([part], scratch)
    seconds = time.perf_counter() - start
    write_only = _pyarrow_write_seconds(to_batch(t), scratch / "write-only.parquet")
    return len(t) / seconds, (
        f"({len(t):,} ticks in {seconds:.2f} s; {config.describe()}; pyarrow's write alone "
        f"{len(t) / write_only / 1e6:.2f} M ticks/s in the same run, ours "
        f"{write_only / seconds:.2f}x of it)"
    )


def _pyarrow_write_seconds(batch: TickBatch, path: Path) -> float:
    """Seconds of ``ParquetWriter.write_table`` alone for the archive columns of ``batch``
    (the hot tier's settings and encodings, chosen untimed)."""
    settings = POLICY.settings_for(HOT)
    table = parquet_file.archive_table(batch)
    choice = parquet_file.choose_encodings(table, settings)
    options = parquet_file.writer_options(settings.compression, settings.compression_level, choice)
    start = time.perf_counter()
    with pq.ParquetWriter(path, table.schema, **options) as writer:
        writer.write_table(table, row_group_size=settings.row_group_size)
    return time.perf_counter() - start


def check_tkc1_matches_ours(t: Ticks) -> None:
    """The benchmark's vectorized TKC1 encoder gives the project's TKC1 bytes exactly."""
    from skewtape_pipeline.reference.tkc1 import encode_columns

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
    from skewtape_pipeline.ticks.encode import sources

    readers = {
        "kalshi": (sources.read_kalshi_trades, {}),
        "tardis": (sources.read_tardis_trades, {}),
        "lobster": (
            sources.read_lobster_messages,
            {"symbol": "AMZN", "session_date": dt.date(2012, 6, 21)},  # the file is renamed
        ),
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
