"""compact_ticks / compact_symbol_day: symbol-days, counted sorting, baselines, tiers, refusals."""

from __future__ import annotations

import json
from datetime import date
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from skewtape_pipeline import fsio
from skewtape_pipeline.audit import verify_audit_log
from skewtape_pipeline.cli.app import main
from skewtape_pipeline.errors import (
    ArchiveBusyError,
    CatalogMismatchError,
    ConfigError,
    PrecisionLossError,
    TickValidationError,
)
from skewtape_pipeline.hashing import sha256_file
from skewtape_pipeline.ticks.archive.handle import Archive
from skewtape_pipeline.ticks.archive.ops import compact
from skewtape_pipeline.ticks.archive.ops.compact import (
    UNCHANGED,
    compact_source,
    compact_symbol_day,
    compact_ticks,
)
from skewtape_pipeline.ticks.archive.ops.compact_plan import (
    CompactionRun,
    SourceFacts,
    SymbolDayWrite,
    sort_batch,
)
from skewtape_pipeline.ticks.archive.store.books import EVENT_RECOMPACT, EVENT_WRITE
from skewtape_pipeline.ticks.archive.store.layout import (
    ARCHIVE_LOCK_FILE,
    CATALOG_FILE,
    partition_file,
    staging_folder,
)
from skewtape_pipeline.ticks.archive.store.placement import scan_hot_files
from skewtape_pipeline.ticks.archive.store.policy import TierPolicy
from skewtape_pipeline.ticks.archive.store.tiers import ArchiveTiers
from skewtape_pipeline.ticks.archive.store.version_files import EVENT_VERSION
from skewtape_pipeline.ticks.encode.parquet_file import read_archive_batch
from skewtape_pipeline.ticks.encode.report import (
    DEFAULT_TARGET_RATIO,
    RAW_SIZE_BASIS_CANONICAL_CSV,
    RAW_SIZE_BASIS_SOURCE_FILE,
    RAW_SIZE_BASIS_SOURCE_ROWS,
    RAW_SIZE_BASIS_SUPPLIED,
)
from skewtape_pipeline.ticks.encode.sides import KALSHI_TAKER_SIDES
from skewtape_pipeline.ticks.encode.sources import canonical_csv_size_bytes, source_from_table
from skewtape_pipeline_tests.ticks.archive_builders import POLICY, day_ticks
from skewtape_pipeline_tests.ticks.conftest import (
    DAY,
    DAY_NS,
    archive_at,
    archive_rows,
    day_batch,
    duckdb_archive,
    encoded,
    make_batch,
    write_text,
)

NS_DAY = 86_400 * 10**9
AS_OF = date(2026, 11, 29)
HEADER = "timestamp_nanos,price,quantity,side,symbol\n"
# Two symbols over two days, not in time order; two equal timestamps in ES on DAY.
ROWS = [
    (DAY_NS + 300, "4512.25", "3", "BUY", "ES"),
    (DAY_NS + 100, "4512.00", "1", "SELL", "ES"),
    (DAY_NS + 100, "4512.50", "2", "UNKNOWN", "ES"),
    (DAY_NS + NS_DAY + 5, "4513.75", "7", "BUY", "ES"),
    (DAY_NS + 50, "-37.63", "10000000000", "SELL", "CL/F"),
    (DAY_NS + 60, "712345.6789", "1", "BUY", "CL/F"),
]


def csv_text(rows) -> str:
    return HEADER + "".join(",".join(str(v) for v in row) + "\n" for row in rows)


def expected_rows(rows) -> list[tuple]:
    return sorted((s, ts, Decimal(p), int(q), side) for ts, p, q, side, s in rows)


def file_listing(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")) if root.exists() else []


def test_compact_ticks_when_csv_has_symbol_days_writes_one_verified_file_each(tmp_path):
    source = write_text(tmp_path / "ticks.csv", csv_text(ROWS))
    out = tmp_path / "archive"
    reports = compact_ticks(
        archive_at(out).core, source, as_of=AS_OF, encoding=encoded(price_scale=4)
    )
    assert [(r.symbol, r.date, r.tick_count) for r in reports] == [
        ("CL/F", "2026-11-20", 2), ("ES", "2026-11-20", 3), ("ES", "2026-11-21", 1)
    ]  # fmt: skip
    assert all(r.round_trip_verified for r in reports)
    assert archive_rows(duckdb_archive(out)) == expected_rows(ROWS)
    es_day = read_archive_batch(Path(reports[1].path))
    # Stable sort: the two ticks at +100 keep their file order (SELL before UNKNOWN).
    assert es_day.ts_ns.to_pylist() == [DAY_NS + 100, DAY_NS + 100, DAY_NS + 300]
    assert es_day.side.to_pylist() == [2, 0, 1]
    json.dumps([r.to_dict() for r in reports])


def test_compact_ticks_when_rows_out_of_order_counts_moved_ticks(tmp_path):
    source = write_text(tmp_path / "ticks.csv", csv_text(ROWS))
    reports = compact_ticks(
        archive_at(tmp_path / "a").core, source, as_of=AS_OF, encoding=encoded(price_scale=4)
    )
    assert [r.reordered_ticks for r in reports] == [0, 3, 0]


def test_compact_ticks_when_multi_day_csv_measures_each_days_source_lines(tmp_path):
    text = csv_text(ROWS)
    source = write_text(tmp_path / "ticks.csv", text)
    reports = compact_ticks(
        archive_at(tmp_path / "a").core, source, as_of=AS_OF, encoding=encoded(price_scale=4)
    )
    assert {r.raw_size_basis for r in reports} == {RAW_SIZE_BASIS_SOURCE_ROWS}
    lines = text.encode().splitlines(keepends=True)[1:]
    assert reports[0].raw_size_bytes == len(lines[4]) + len(lines[5])
    assert sum(r.raw_size_bytes for r in reports) == len(text.encode()) - len(HEADER)


def test_compact_ticks_when_file_is_one_symbol_day_measures_whole_file(tmp_path):
    source = write_text(tmp_path / "ticks.csv", csv_text(ROWS[:3]))
    (report,) = compact_ticks(
        archive_at(tmp_path / "a").core, source, as_of=AS_OF, encoding=encoded(price_scale=2)
    )
    assert report.raw_size_basis == RAW_SIZE_BASIS_SOURCE_FILE
    assert report.raw_size_bytes == source.stat().st_size


def test_compact_ticks_when_parquet_input_measures_canonical_csv(tmp_path):
    batch = day_batch(40)
    source = tmp_path / "ticks.parquet"
    pq.write_table(
        pa.table(
            {
                "timestamp_nanos": batch.ts_ns,
                "price": pa.array([Decimal(p).scaleb(-4) for p in batch.price.to_pylist()]),
                "quantity": batch.quantity,
                "side": batch.side_names(),
            }
        ),
        source,
    )
    (report,) = compact_ticks(
        archive_at(tmp_path / "a").core,
        source,
        as_of=AS_OF,
        encoding=encoded(price_scale=4),
        run=CompactionRun(symbol="X"),
    )
    assert report.raw_size_basis == RAW_SIZE_BASIS_SOURCE_FILE
    assert report.raw_size_bytes == source.stat().st_size
    two_days = tmp_path / "two.parquet"
    shifted = pa.concat_tables(
        [pq.read_table(source), pq.read_table(source).set_column(
            0, "timestamp_nanos", pa.array([t + NS_DAY for t in batch.ts_ns.to_pylist()]))]
    )  # fmt: skip
    pq.write_table(shifted, two_days)
    first, second = compact_ticks(
        archive_at(tmp_path / "b").core,
        two_days,
        as_of=AS_OF,
        encoding=encoded(price_scale=4),
        run=CompactionRun(symbol="X"),
    )
    assert first.raw_size_basis == RAW_SIZE_BASIS_CANONICAL_CSV
    assert first.raw_size_bytes == canonical_csv_size_bytes(batch)
    assert second.raw_size_bytes == first.raw_size_bytes  # same digits, one day later


def test_compact_ticks_when_bad_row_in_later_symbol_day_writes_nothing(tmp_path):
    rows = [*ROWS[:5], (DAY_NS + 60, "1.5", "1", "LONG", "CL/F")]
    source = write_text(tmp_path / "ticks.csv", csv_text(rows))
    out = tmp_path / "archive"
    with pytest.raises(TickValidationError) as info:
        compact_ticks(archive_at(out).core, source, as_of=AS_OF, encoding=encoded(price_scale=4))
    assert (info.value.row, info.value.field) == (5, "side")
    assert str(source) in str(info.value)
    assert file_listing(out) == []


@pytest.mark.parametrize(
    ("column", "bad", "field"),
    [(1, "NaN", "price"), (2, "-1", "quantity"), (0, "12.5", "timestamp_nanos")],
)
def test_compact_ticks_when_value_invalid_names_row_and_writes_nothing(tmp_path, column, bad,
                                                                       field):  # fmt: skip
    rows = [list(row) for row in ROWS]
    rows[3][column] = bad
    source = write_text(tmp_path / "ticks.csv", csv_text(rows))
    with pytest.raises(TickValidationError) as info:
        compact_ticks(
            archive_at(tmp_path / "archive").core,
            source,
            as_of=AS_OF,
            encoding=encoded(price_scale=4),
        )
    assert (info.value.row, info.value.field) == (3, field)
    assert file_listing(tmp_path / "archive") == []


def test_compact_ticks_when_precision_lost_refuses_unless_allowed_then_counts(tmp_path):
    rows = [*ROWS[:3], (DAY_NS + 400, "4512.123456", "1", "BUY", "ES")]
    source = write_text(tmp_path / "ticks.csv", csv_text(rows))
    with pytest.raises(PrecisionLossError) as info:
        compact_ticks(
            archive_at(tmp_path / "a").core, source, as_of=AS_OF, encoding=encoded(price_scale=4)
        )
    assert info.value.row == 3
    assert file_listing(tmp_path / "a") == []
    (report,) = compact_ticks(
        archive_at(tmp_path / "a").core,
        source,
        as_of=AS_OF,
        encoding=encoded(price_scale=4, allow_precision_loss=True),
    )
    assert report.price_precision_loss_ticks == 1
    assert report.precision_loss_ticks == 1
    assert any("1 price(s) rounded" in note for note in report.notes)
    assert read_archive_batch(Path(report.path)).price.to_pylist()[-1] == 45_121_235
    (exact,) = compact_ticks(
        archive_at(tmp_path / "b").core, source, as_of=AS_OF, encoding=encoded(price_scale=6)
    )
    assert exact.price_precision_loss_ticks == 0


def test_compact_ticks_when_fractional_quantities_use_quantity_scale(tmp_path):
    rows = [(DAY_NS + i, "9682.07", q, "BUY", "BTCUSDT") for i, q in enumerate(["0.001", "23.139"])]
    source = write_text(tmp_path / "ticks.csv", csv_text(rows))
    with pytest.raises(PrecisionLossError, match="quantity"):
        compact_ticks(
            archive_at(tmp_path / "a").core,
            source,
            as_of=AS_OF,
            encoding=encoded(price_scale=2, quantity_scale=0),
        )
    (report,) = compact_ticks(
        archive_at(tmp_path / "a").core,
        source,
        as_of=AS_OF,
        encoding=encoded(price_scale=2, quantity_scale=8),
    )
    assert report.quantity_scale == 8
    table = duckdb_archive(tmp_path / "a")
    assert table.column("quantity").to_pylist() == [Decimal("0.001"), Decimal("23.139")]


def test_compact_ticks_when_ticks_dated_after_as_of_refuses(tmp_path):
    source = write_text(tmp_path / "ticks.csv", csv_text(ROWS))
    with pytest.raises(TickValidationError, match="after as_of"):
        compact_ticks(
            archive_at(tmp_path / "a").core,
            source,
            as_of=date(2026, 11, 20),
            encoding=encoded(price_scale=4),
        )
    assert file_listing(tmp_path / "a") == []


def test_compact_ticks_when_no_symbol_anywhere_raises_config_error(tmp_path):
    text = "timestamp_nanos,price,quantity,side\n" + f"{DAY_NS},1.5,1,BUY\n"
    source = write_text(tmp_path / "ticks.csv", text)
    with pytest.raises(ConfigError, match="symbol"):
        compact_ticks(
            archive_at(tmp_path / "a").core, source, as_of=AS_OF, encoding=encoded(price_scale=2)
        )
    (report,) = compact_ticks(
        archive_at(tmp_path / "a").core,
        source,
        as_of=AS_OF,
        encoding=encoded(price_scale=2),
        run=CompactionRun(symbol="Z"),
    )
    assert report.symbol == "Z"


def test_compact_ticks_when_symbol_given_selects_its_rows(tmp_path):
    source = write_text(tmp_path / "ticks.csv", csv_text(ROWS))
    reports = compact_ticks(
        archive_at(tmp_path / "a").core,
        source,
        as_of=AS_OF,
        encoding=encoded(price_scale=4),
        run=CompactionRun(symbol="ES"),
    )
    assert [(r.symbol, r.tick_count) for r in reports] == [("ES", 3), ("ES", 1)]
    with pytest.raises(TickValidationError, match="no ticks of symbol"):
        compact_ticks(
            archive_at(tmp_path / "b").core,
            source,
            as_of=AS_OF,
            encoding=encoded(price_scale=4),
            run=CompactionRun(symbol="NQ"),
        )


def test_compact_ticks_when_side_vocabulary_given_maps_explicitly(tmp_path):
    rows = [(DAY_NS, "1", "1", "B", "X"), (DAY_NS + 1, "1", "1", "S", "X")]
    source = write_text(tmp_path / "ticks.csv", csv_text(rows))
    with pytest.raises(TickValidationError, match="'B'"):
        compact_ticks(
            archive_at(tmp_path / "a").core, source, as_of=AS_OF, encoding=encoded(price_scale=0)
        )
    compact_ticks(
        archive_at(tmp_path / "a").core,
        source,
        as_of=AS_OF,
        encoding=encoded(price_scale=0, side_map={"B": "BUY", "S": "SELL"}),
    )
    assert duckdb_archive(tmp_path / "a").column("side").to_pylist() == ["BUY", "SELL"]


@pytest.mark.parametrize(("age", "tier"), [(0, "HOT"), (7, "HOT"), (8, "WARM"), (91, "COLD")])
def test_compact_ticks_when_day_ages_assigns_tier_from_real_age(tmp_path, age, tier):
    source = write_text(tmp_path / "ticks.csv", csv_text(ROWS[:3]))
    as_of = date.fromordinal(DAY.toordinal() + age)
    (report,) = compact_ticks(
        archive_at(tmp_path / "a").core, source, as_of=as_of, encoding=encoded(price_scale=2)
    )
    assert (report.age_days, report.tier) == (age, tier)
    assert report.tier_policy == TierPolicy().to_dict()
    custom = TierPolicy(hot_max_age_days=0, warm_max_age_days=1)
    (other,) = compact_ticks(
        archive_at(tmp_path / "b", custom).core,
        source,
        as_of=as_of,
        encoding=encoded(price_scale=2),
    )
    assert other.tier == ("HOT" if age == 0 else "COLD")
    assert other.tier_policy["warm_max_age_days"] == 1


def test_compact_ticks_when_run_twice_is_idempotent(tmp_path):
    source = write_text(tmp_path / "ticks.csv", csv_text(ROWS))
    first = compact_ticks(
        archive_at(tmp_path / "a").core, source, as_of=AS_OF, encoding=encoded(price_scale=4)
    )
    before = {r.path: Path(r.path).stat().st_ino for r in first}
    second = compact_ticks(
        archive_at(tmp_path / "a").core, source, as_of=AS_OF, encoding=encoded(price_scale=4)
    )
    assert {r.path: Path(r.path).stat().st_ino for r in second} == before  # not rewritten
    assert [r.to_dict() | {"seconds": 0} for r in first] == [
        r.to_dict() | {"seconds": 0, "notes": r.notes[:-1]} for r in second
    ]
    assert all(r.notes[-1].startswith(UNCHANGED) for r in second)


def test_compact_symbol_day_when_no_size_given_measures_canonical_csv(tmp_path):
    batch = day_batch(500)
    report = compact_symbol_day(
        archive_at(tmp_path, TierPolicy()).core,
        batch,
        SymbolDayWrite(symbol="S", day=DAY, age_days=2),
    )
    assert report.raw_size_basis == RAW_SIZE_BASIS_CANONICAL_CSV
    assert report.raw_size_bytes == canonical_csv_size_bytes(batch)
    assert report.compacted_size_bytes == Path(report.path).stat().st_size
    assert report.compression_ratio == report.raw_size_bytes / report.compacted_size_bytes


def test_compact_symbol_day_when_size_supplied_reports_it_with_basis(tmp_path):
    report = compact_symbol_day(
        archive_at(tmp_path, TierPolicy()).core,
        day_batch(50),
        SymbolDayWrite(symbol="S", day=DAY, age_days=2, source=SourceFacts(raw_size_bytes=98_765)),
    )
    assert (report.raw_size_bytes, report.raw_size_basis) == (98_765, RAW_SIZE_BASIS_SUPPLIED)


def test_compact_symbol_day_when_target_checked_meets_five_fails_one_above(tmp_path):
    batch = day_batch(5_000)
    report = compact_symbol_day(
        archive_at(tmp_path, TierPolicy()).core,
        batch,
        SymbolDayWrite(symbol="S", day=DAY, age_days=2),
    )
    assert report.compression_ratio > 5.0 and report.meets_compression_target
    stricter = compact_symbol_day(
        archive_at(tmp_path, TierPolicy()).core,
        batch,
        SymbolDayWrite(
            symbol="S",
            day=DAY,
            age_days=2,
            encoding=encoded(target_ratio=report.compression_ratio + 1),
        ),
    )
    assert stricter.meets_compression_target is False
    assert stricter.target_compression_ratio == report.compression_ratio + 1
    assert any("below the target" in note for note in stricter.notes)
    assert not any("below the target" in note for note in report.notes)


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"age_days": None}, ConfigError),
        ({"age_days": -1}, ConfigError),
        ({"raw_size_bytes": 0}, ConfigError),
        ({"raw_size_bytes": -10}, ConfigError),
        ({"raw_size_bytes": 10, "raw_size_basis": "guess"}, ConfigError),
        ({"policy": {"hot_max_age_days": 7}}, ConfigError),
        ({"target_ratio": 0}, ConfigError),
        ({"symbol": ""}, TickValidationError),
        ({"day": date(2026, 11, 21)}, TickValidationError),
    ],
)
def test_compact_symbol_day_when_argument_invalid_raises_and_writes_nothing(tmp_path, kwargs,
                                                                            error):  # fmt: skip
    arguments = {"symbol": "S", "day": DAY, "age_days": 1, "policy": TierPolicy(), **kwargs}
    with pytest.raises(error):
        archive = archive_at(tmp_path / "a", arguments.pop("policy"))
        size = [arguments.pop(name, None) for name in ("raw_size_bytes", "raw_size_basis")]
        target = arguments.pop("target_ratio", DEFAULT_TARGET_RATIO)
        compact_symbol_day(
            archive.core,
            day_batch(10),
            SymbolDayWrite(
                source=SourceFacts(*size), encoding=encoded(target_ratio=target), **arguments
            ),
        )
    assert file_listing(tmp_path / "a") == []


def test_compact_symbol_day_when_age_days_omitted_is_a_type_error(tmp_path):
    with pytest.raises(TypeError, match="age_days"):
        compact_symbol_day(
            archive_at(tmp_path, TierPolicy()).core,
            day_batch(3),
            SymbolDayWrite(symbol="S", day=DAY),  # type: ignore[call-arg]
        )


def test_compact_symbol_day_when_batch_unsorted_refuses_then_sort_counts(tmp_path):
    batch = make_batch([(DAY_NS + 5, 1, 1, 1), (DAY_NS + 2, 1, 1, 2), (DAY_NS + 2, 2, 1, 0)])
    with pytest.raises(TickValidationError, match="sort") as info:
        compact_symbol_day(
            archive_at(tmp_path, TierPolicy()).core,
            batch,
            SymbolDayWrite(symbol="S", day=DAY, age_days=1),
        )
    assert info.value.row == 1
    assert file_listing(tmp_path) == []
    ordered, moved = sort_batch(batch)
    assert ordered.ts_ns.to_pylist() == [DAY_NS + 2, DAY_NS + 2, DAY_NS + 5]
    assert ordered.price.to_pylist() == [1, 2, 1]
    assert moved == 3
    report = compact_symbol_day(
        archive_at(tmp_path, TierPolicy()).core,
        ordered,
        SymbolDayWrite(symbol="S", day=DAY, age_days=1, source=SourceFacts(reordered_ticks=moved)),
    )
    assert report.reordered_ticks == 3
    assert any("3 tick(s) moved" in note for note in report.notes)
    assert sort_batch(ordered) == (ordered, 0)


def test_compact_symbol_day_when_batch_empty_refuses(tmp_path):
    with pytest.raises(TickValidationError, match="empty"):
        compact_symbol_day(
            archive_at(tmp_path, TierPolicy()).core,
            make_batch([]),
            SymbolDayWrite(symbol="S", day=DAY, age_days=1),
        )


def test_compact_source_when_snapshot_fills_table_wrapped_compacts_per_market_day(tmp_path):
    fills = pa.table(
        {
            "market_id": ["KX-A", "KX-B", "KX-A"],
            "ts": pa.array([DAY_NS + 9, DAY_NS + 1, DAY_NS + 3], pa.timestamp("ns", "UTC")),
            "price": pa.array([Decimal("0.4037"), Decimal("0.99"), Decimal("0.01")],
                              pa.decimal128(8, 4)),
            "quantity": pa.array([10, 20, 30], pa.int64()),
            "taker_side": ["yes", "no", "no"],
        }
    )  # fmt: skip
    source = source_from_table(
        fills,
        side_map=KALSHI_TAKER_SIDES,
        columns={"timestamp_nanos": "ts", "side": "taker_side", "symbol": "market_id"},
    )
    reports = compact_source(
        archive_at(tmp_path).core, source, as_of=AS_OF, encoding=encoded(price_scale=4)
    )
    assert [(r.symbol, r.tick_count, r.reordered_ticks) for r in reports] == [
        ("KX-A", 2, 2), ("KX-B", 1, 0)
    ]  # fmt: skip
    assert {r.raw_size_basis for r in reports} == {RAW_SIZE_BASIS_CANONICAL_CSV}
    assert archive_rows(duckdb_archive(tmp_path)) == [
        ("KX-A", DAY_NS + 3, Decimal("0.0100"), 30, "SELL"),
        ("KX-A", DAY_NS + 9, Decimal("0.4037"), 10, "BUY"),
        ("KX-B", DAY_NS + 1, Decimal("0.9900"), 20, "SELL"),
    ]
    with pytest.raises(TickValidationError, match="taker_side"):
        source_from_table(fills.drop_columns(["taker_side"]), side_map=KALSHI_TAKER_SIDES,
                          columns={"timestamp_nanos": "ts", "side": "taker_side"})  # fmt: skip


def test_canonical_baseline_when_digit_widths_differ_is_not_per_row_constant(tmp_path):
    narrow = make_batch([(DAY_NS + i, 1, 1, 1) for i in range(100)])
    wide = make_batch([(DAY_NS + i, -7_123_456_789, 10**10, 0) for i in range(100)])
    archive = archive_at(tmp_path, TierPolicy())
    sizes = [
        compact_symbol_day(
            archive.core, b, SymbolDayWrite(symbol=s, day=DAY, age_days=1)
        ).raw_size_bytes
        for s, b in (("N", narrow), ("W", wide))
    ]
    assert sizes == [canonical_csv_size_bytes(narrow), canonical_csv_size_bytes(wide)]
    assert sizes[0] != sizes[1]


def test_compact_symbol_day_when_root_holds_other_scales_refuses_and_writes_nothing(tmp_path):
    first = compact_symbol_day(
        archive_at(tmp_path, TierPolicy()).core,
        day_batch(5),
        SymbolDayWrite(symbol="A", day=DAY, age_days=1),
    )
    marker = json.loads((tmp_path / "_skewtape_archive.json").read_text())
    assert (marker["price_scale"], marker["quantity_scale"]) == (4, 0)
    before = file_listing(tmp_path)
    with pytest.raises(ConfigError, match="price_scale 4"):
        compact_symbol_day(
            archive_at(tmp_path, TierPolicy()).core,
            day_batch(5, price_scale=2),
            SymbolDayWrite(symbol="B", day=DAY, age_days=1),
        )
    assert file_listing(tmp_path) == before
    again = compact_symbol_day(
        archive_at(tmp_path, TierPolicy()).core,
        day_batch(7),
        SymbolDayWrite(symbol="B", day=DAY, age_days=1),
    )
    assert Path(again.path).parent.parent.parent.parent.name == "symbol=B"
    assert Path(first.path).exists()
    table = duckdb_archive(tmp_path)
    assert table.num_rows == 12


def test_compact_symbol_day_when_another_writer_holds_the_archive_lock_waits_then_refuses(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(compact, "ARCHIVE_LOCK_WAIT_SECONDS", 0.1)
    with fsio.exclusive_lock(tmp_path / ARCHIVE_LOCK_FILE, what="re-tiering"):
        with pytest.raises(ArchiveBusyError, match=r"skewtape-archive\.lock is held by re-tiering"):
            compact_symbol_day(
                archive_at(tmp_path, TierPolicy(), lock_timeout=0.1).core,
                day_batch(5),
                SymbolDayWrite(symbol="S", day=DAY, age_days=2),
            )
        assert not list(tmp_path.rglob("*.parquet"))  # nothing published while it was held
    report = compact_symbol_day(
        archive_at(tmp_path, TierPolicy()).core,
        day_batch(5),
        SymbolDayWrite(symbol="S", day=DAY, age_days=2),
    )
    assert Path(report.path).is_file()


def test_compact_symbol_day_when_encoding_leaves_the_archive_lock_free_for_other_writers(
    tmp_path, monkeypatch
):
    import threading

    from skewtape_pipeline.ticks.encode import parquet_file

    encoding, proceed = threading.Event(), threading.Event()
    real_verify = parquet_file.verify_archive_file

    def slow_verify(path, batch, **kwargs):  # the encode-write-verify step, held open
        encoding.set()
        assert proceed.wait(30)
        return real_verify(path, batch, **kwargs)

    monkeypatch.setattr(parquet_file, "verify_archive_file", slow_verify)
    errors: list[BaseException] = []

    def compact() -> None:
        try:
            compact_symbol_day(
                archive_at(tmp_path, TierPolicy()).core,
                day_batch(5),
                SymbolDayWrite(symbol="S", day=DAY, age_days=2),
            )
        except BaseException as exc:
            errors.append(exc)

    writer = threading.Thread(target=compact)
    writer.start()
    try:
        assert encoding.wait(30)
        with fsio.exclusive_lock(tmp_path / ARCHIVE_LOCK_FILE, what="re-tiering"):  # not held
            assert not partition_file(tmp_path, "S", DAY).exists()  # published after, not yet
    finally:
        proceed.set()
        writer.join(30)
    assert errors == []
    assert read_archive_batch(partition_file(tmp_path, "S", DAY)).equals(day_batch(5))


# --- rewrites are audited -------------------------------------------------------------------------


def _records(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def test_compact_symbol_day_when_file_exists_audits_the_rewrite(tmp_path):
    out, log = tmp_path / "archive", tmp_path / "audit.jsonl"
    compact_symbol_day(
        archive_at(out, TierPolicy(), audit_log=log).core,
        day_batch(5),
        SymbolDayWrite(symbol="ES", day=DAY, age_days=0),
    )
    [written] = _records(log)  # a first write replaces nothing
    assert (written["event"], written["report"]["tick_count"]) == (EVENT_WRITE, 5)
    first = partition_file(out, "ES", DAY)
    old_sha, old_bytes = sha256_file(first), first.stat().st_size

    report = compact_symbol_day(
        archive_at(out, TierPolicy(), audit_log=log).core,
        day_batch(7),
        SymbolDayWrite(symbol="ES", day=DAY, age_days=0),
    )

    [_, record] = _records(log)
    assert record["event"] == EVENT_RECOMPACT
    assert (record["symbol"], record["date"], record["rows"]) == ("ES", DAY.isoformat(), 7)
    assert record["replaces"] == {"file": str(first.relative_to(out)), "sha256": old_sha,
                                  "bytes": old_bytes, "rows": 5}  # fmt: skip
    assert report.tick_count == 7 and verify_audit_log(log) == 2
    assert recompaction_notes(report) == [
        f"recompacted: replaced its hot file (5 ticks, {old_bytes} bytes, sha256 {old_sha[:16]})"
    ]


def test_compact_symbol_day_when_the_new_batch_holds_fewer_ticks_says_how_many_fewer(tmp_path):
    out = tmp_path / "archive"
    policy = TierPolicy()
    write = SymbolDayWrite(symbol="ES", day=DAY, age_days=0)
    compact_symbol_day(archive_at(out, policy).core, day_batch(5), write)
    hot = compact_symbol_day(archive_at(out, policy).core, day_batch(2), write)
    Archive(out, policy=policy).retier(as_of=date(2028, 1, 1))  # its cold copy: 2 ticks
    cold = compact_symbol_day(archive_at(out, policy).core, day_batch(1), write)

    [hot_note], [cold_note] = recompaction_notes(hot), recompaction_notes(cold)
    assert hot_note.endswith("; now 2 ticks, 3 fewer than it held")
    assert "COLD copy" in cold_note and cold_note.endswith("; now 1 ticks, 1 fewer than it held")


def recompaction_notes(report) -> list[str]:
    return [note for note in report.notes if note.startswith("recompacted: ")]


class _DiskFull(OSError):
    pass


def _fail_every_publish(temp: Path, target: Path) -> None:
    raise _DiskFull(f"{target}: no space left on device")


def test_compact_symbol_day_when_the_rewrite_fails_audits_nothing_and_keeps_the_file(tmp_path):
    out, log = tmp_path / "archive", tmp_path / "audit.jsonl"
    compact_symbol_day(
        archive_at(out, TierPolicy(), audit_log=log).core,
        day_batch(5),
        SymbolDayWrite(symbol="ES", day=DAY, age_days=0),
    )
    first = partition_file(out, "ES", DAY)
    old_sha, written = sha256_file(first), _records(log)
    previous = fsio.set_publish_hook(_fail_every_publish)
    try:
        with pytest.raises(_DiskFull):
            compact_symbol_day(
                archive_at(out, TierPolicy(), audit_log=log).core,
                day_batch(7),
                SymbolDayWrite(symbol="ES", day=DAY, age_days=0),
            )
    finally:
        fsio.set_publish_hook(previous)

    assert _records(log) == written  # no record of a rewrite that did not happen
    assert sha256_file(first) == old_sha


def test_compact_symbol_day_when_day_is_catalogued_audits_that_it_supersedes_the_copy(tmp_path):
    out, log = tmp_path / "archive", tmp_path / "audit.jsonl"
    policy = TierPolicy()
    compact_symbol_day(
        archive_at(out, policy, audit_log=log).core,
        day_batch(5),
        SymbolDayWrite(symbol="ES", day=DAY, age_days=0),
    )
    Archive(out, policy=policy, audit_log=log).retier(
        as_of=date(2028, 1, 1)
    )  # cold now; hot file gone
    before = len(_records(log))

    compact_symbol_day(
        archive_at(out, policy, audit_log=log).core,
        day_batch(6),
        SymbolDayWrite(symbol="ES", day=DAY, age_days=0),
    )

    [record] = _records(log)[before:]
    assert record["event"] == EVENT_RECOMPACT and record["rows"] == 6
    assert record["replaces"] is None
    [catalogued] = record["supersedes"]
    assert catalogued["tier"] == "COLD" and catalogued["rows"] == 5
    assert verify_audit_log(log) == len(_records(log))


def test_cli_compact_ticks_when_rerun_audits_every_changed_symbol_day_and_no_unchanged_one(
    tmp_path, capsys
):
    source = write_text(tmp_path / "t.csv", csv_text(ROWS))
    log = tmp_path / "custom.jsonl"
    argv = ["compact-ticks", str(source), "--out", str(tmp_path / "archive"), "--as-of",
            AS_OF.isoformat(), "--price-scale", "4", "--audit-log", str(log)]  # fmt: skip
    assert main(argv) == 0
    first = [r["event"] for r in _records(log)]
    assert first == [EVENT_WRITE] * (len(first) - 1) + [EVENT_VERSION]  # writes, one version
    assert main(argv) == 0, capsys.readouterr().err
    assert [r["event"] for r in _records(log)] == first  # the same ticks: nothing
    moved = [(ts + 1, *rest) for ts, *rest in ROWS]  # every tick 1 ns later
    write_text(source, csv_text(moved))
    assert main(argv) == 0, capsys.readouterr().err
    days = {(r["symbol"], r["date"]) for r in _records(log) if r["event"] == EVENT_RECOMPACT}
    reports = compact_ticks(
        archive_at(tmp_path / "other").core, source, as_of=AS_OF, encoding=encoded(price_scale=4)
    )
    assert days == {(r.symbol, r.date) for r in reports} and len(days) > 1


def test_cli_compact_ticks_when_ticks_of_one_timestamp_come_in_another_order_changes_nothing(
    tmp_path, capsys
):
    source = write_text(tmp_path / "t.csv", csv_text(ROWS))  # two ES ticks at DAY_NS + 100
    log = tmp_path / "audit.jsonl"
    archive = tmp_path / "archive"
    argv = ["compact-ticks", str(source), "--out", str(archive), "--as-of", AS_OF.isoformat(),
            "--price-scale", "4", "--audit-log", str(log)]  # fmt: skip
    assert main(argv) == 0
    before = (_records(log), Archive(archive).read())
    write_text(source, csv_text([ROWS[0], ROWS[2], ROWS[1], *ROWS[3:]]))  # the tie swapped
    capsys.readouterr()
    assert main(argv) == 0
    assert "0 symbol-days changed" in capsys.readouterr().out
    assert (_records(log), Archive(archive).read()) == before  # no write, no version


def test_retier_when_a_compaction_died_while_staging_removes_its_staged_file(tmp_path):
    import socket
    import subprocess
    import sys

    from skewtape_pipeline.ticks.archive.store.layout import staging_folder

    compact_symbol_day(
        archive_at(tmp_path, TierPolicy()).core,
        day_batch(5),
        SymbolDayWrite(symbol="S", day=DAY, age_days=0),
    )
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    host = socket.gethostname().replace(".", "_")
    orphan = staging_folder(tmp_path) / f".part-0.parquet.{host}.{dead}.7.0{fsio.TEMP_MARKER}"
    orphan.write_bytes(b"a compaction killed while encoding")
    spill = staging_folder(tmp_path) / f".spill.{host}.{dead}.7.1{fsio.TEMP_MARKER}"
    (spill / "S").mkdir(parents=True)  # a compaction killed while spilling a large input
    (spill / "S" / "chunk-0.arrow").write_bytes(b"spilled ticks")

    Archive(tmp_path, policy=TierPolicy()).retier(as_of=DAY)

    assert not orphan.exists() and not spill.exists()
    assert read_archive_batch(partition_file(tmp_path, "S", DAY)).equals(day_batch(5))


# --- the catalog check runs once, under the lock that publishes -----------------------------------


def test_compact_symbol_day_when_rewriting_checks_the_catalog_once_with_the_file_staged(
    tmp_path, monkeypatch
):
    out = tmp_path / "archive"
    compact_symbol_day(
        archive_at(out, TierPolicy()).core,
        day_batch(5),
        SymbolDayWrite(symbol="ES", day=DAY, age_days=0),
    )
    staged_at_survey: list[list[str]] = []
    listing = ArchiveTiers.listing

    def counted(tiers: ArchiveTiers):
        staged_at_survey.append(staged_files(out))
        return listing(tiers)

    monkeypatch.setattr(ArchiveTiers, "listing", counted)
    compact_symbol_day(
        archive_at(out, TierPolicy()).core,
        day_batch(7),
        SymbolDayWrite(symbol="ES", day=DAY, age_days=0),
    )

    [staged] = staged_at_survey  # one catalog check, with the new file encoded and waiting
    assert len(staged) == 1
    assert read_archive_batch(partition_file(out, "ES", DAY)).equals(day_batch(7))
    assert staged_files(out) == []


def staged_files(out: Path) -> list[str]:
    """The names of the files staged in ``out``'s staging folder."""
    return [path.name for path in staging_folder(out).rglob("*") if path.is_file()]


def test_compact_symbol_day_when_catalog_deleted_refuses_discarding_the_staged_file(tiered):
    (tiered / CATALOG_FILE).unlink()
    [hot, *_] = scan_hot_files(tiered)
    before = contents(tiered.parent)
    with pytest.raises(CatalogMismatchError, match="the catalog is missing") as refused:
        core, batch = archive_at(tiered, POLICY).core, day_ticks(hot.symbol, hot.day).slice(0, 1)
        compact_symbol_day(core, batch, SymbolDayWrite(symbol=hot.symbol, day=hot.day, age_days=1))
    assert "nothing was changed" in str(refused.value)
    assert contents(tiered.parent) == before  # no staged file left, nothing published or recorded


def contents(folder: Path) -> dict[Path, bytes]:
    """Every file below ``folder`` and its bytes, but the lock file's (its last holder)."""
    files = (path for path in folder.rglob("*") if path.is_file())
    return {path: path.read_bytes() for path in files if path.name != ARCHIVE_LOCK_FILE}
