"""Small by default: the coarsest exact timestamp unit and the smallest exact scales are detected
from the data, within the archive's one schema (a finer later batch is refused, never rounded),
and explicit values override detection."""

from __future__ import annotations

from datetime import date
from decimal import Decimal
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skewtape_pipeline.cli.app import main
from skewtape_pipeline.errors import ArchiveSchemaError, ConfigError, TickValidationError
from skewtape_pipeline.ticks.archive.ops.compact import compact_source, compact_ticks
from skewtape_pipeline.ticks.archive.store.layout import read_archive_marker, recorded_schema
from skewtape_pipeline.ticks.archive.store.policy import TierPolicy
from skewtape_pipeline.ticks.encode import sources
from skewtape_pipeline.ticks.encode.decimals import FLOAT_NOISE, quantize
from skewtape_pipeline.ticks.encode.exact_columns import (
    coarsest_timestamp_unit,
    smallest_exact_scale,
)
from skewtape_pipeline.ticks.encode.model import SchemaRequest, TickBatch, TickSchema
from skewtape_pipeline.ticks.fills.snapshot_fills import archive_symbol_days, snapshot_fills_schema
from skewtape_pipeline_tests.ticks.conftest import (
    DAY_NS,
    KALSHI_FILE,
    LOBSTER_FILE,
    TARDIS_FILE,
    archive_at,
    archive_rows,
    duckdb_archive,
    encoded,
    write_text,
)

AS_OF = date(2026, 11, 29)
HEADER = "timestamp_nanos,price,quantity,side,symbol\n"


def csv_of(rows: list[tuple[int, str, str, str]], symbol: str = "X") -> str:
    return HEADER + "".join(f"{ts},{p},{q},{s},{symbol}\n" for ts, p, q, s in rows)


def decimals_of(text: str) -> int:
    """Oracle: the decimals of a decimal number once trailing zeros are dropped."""
    _, digits, exponent = Decimal(text).as_tuple()
    while exponent < 0 and digits and digits[-1] == 0:
        digits, exponent = digits[:-1], exponent + 1
    return max(0, -exponent)


def exact_or_noise(text: str, scale: int) -> bool:
    """Oracle: ``text`` at ``scale`` is exact or float noise, by the rule of decimals.quantize."""
    if decimals_of(text) <= scale:
        return True
    try:
        return quantize(text, scale)[1] == FLOAT_NOISE
    except TickValidationError:  # beyond int64 at that scale: far beyond float noise
        return False


def listing(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")) if root.exists() else []


# --- detection on raw columns -------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.decimals(
            min_value=Decimal("-1e9"), max_value=Decimal("1e9"), allow_nan=False, places=None
        ).filter(lambda d: decimals_of(str(d)) <= 18 and abs(d.as_tuple().exponent) < 30),
        min_size=1,
        max_size=20,
    )
)
def test_smallest_exact_scale_when_decimal_text_given_matches_the_scalar_rule(values):
    text = [str(v) for v in values]
    widest = max(decimals_of(t) for t in text)
    expected = next(
        scale for scale in range(widest + 1) if all(exact_or_noise(t, scale) for t in text)
    )
    assert smallest_exact_scale(pa.array(text), field="price") == expected


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        (pa.array(["1.50", "2.250", " 3 ", "100.00"]), 2),
        (pa.array(["1.5e-3", "2E2"]), 4),
        (pa.array([1, 20, 300], pa.int64()), 0),
        (pa.array([Decimal("220.5100"), Decimal("221.0000")], pa.decimal128(10, 4)), 2),
        (pa.array([150.15000000000003, 0.1 + 0.2]), 2),
        (pa.array([150.15000000000003, 150.2]), 2),
        (pa.array(["150.15000000000003", "150.2"]), 2),
        (pa.array(["712345.6789", "-37.63", "150.15000000000003", "0.30000000000000004"]), 4),
        (pa.array(["7.000000000000001", "5", "1.5000000000000002e-05"]), 6),
        (pa.array([1.23456]), 5),
        (pa.array(["1.23456"]), 5),
    ],
)
def test_smallest_exact_scale_when_column_type_varies_gives_fewest_exact_decimals(values, expected):
    assert smallest_exact_scale(values, field="price") == expected


@pytest.mark.parametrize(
    ("step", "unit"),
    [(1, "ns"), (1_000, "us"), (1_000_000, "ms"), (1_000_000_000, "s"), (7_000, "us")],
)
def test_coarsest_timestamp_unit_when_every_value_is_whole_gives_that_unit(step, unit):
    ts = pa.array([DAY_NS + step * i for i in range(1, 50)], pa.int64())
    assert coarsest_timestamp_unit(ts) == unit


def test_batch_at_schema_when_smaller_scale_drops_a_digit_refuses():
    batch = TickBatch.from_units([DAY_NS], [12_345], [1], [1], TickSchema(price_scale=4))
    assert batch.at_schema(TickSchema("ns", 6, 0)).price.to_pylist() == [1_234_500]
    with pytest.raises(Exception, match="more than 3 decimals"):
        batch.at_schema(TickSchema("ns", 3, 0))


# --- compaction defaults ------------------------------------------------------------------------


def read_amzn_sample(path):
    """The LOBSTER sample, renamed in ../shared: its symbol and session date given."""
    return sources.read_lobster_messages(path, symbol="AMZN", session_date=date(2012, 6, 21))


@pytest.mark.slow
@pytest.mark.parametrize(
    ("reader", "path", "expected"),
    [  # SOURCES.md: Kalshi µs times and cents; Binance whole-ms times, cents, BTC to 3
        # decimals; LOBSTER ns times, prices multiples of 0.001 (README), integer sizes.
        (sources.read_kalshi_trades, KALSHI_FILE, TickSchema("us", 2, 0)),
        (sources.read_tardis_trades, TARDIS_FILE, TickSchema("ms", 2, 3)),
        (read_amzn_sample, LOBSTER_FILE, TickSchema("ns", 3, 0)),
    ],
)
def test_compact_source_when_no_flags_given_stores_the_smallest_exact_schema(
    tmp_path, no_fsync, reader, path, expected
):
    source = reader(path)
    out = tmp_path / "archive"
    reports = compact_source(archive_at(out).core, source, as_of=AS_OF)
    assert recorded_schema(out) == expected
    assert {(r.timestamp_unit, r.price_scale, r.quantity_scale) for r in reports} == {
        (expected.timestamp_unit, expected.price_scale, expected.quantity_scale)
    }
    exact = source.to_batch(price_scale=expected.price_scale + 2, quantity_scale=6)
    mine = archive_rows(duckdb_archive(out))
    scale_p, scale_q = Decimal(10) ** -(expected.price_scale + 2), Decimal(10) ** -6
    theirs = sorted(
        zip(
            source.symbols.to_pylist(),
            exact.ts_ns.to_pylist(),
            [Decimal(u) * scale_p for u in exact.price.to_pylist()],
            [Decimal(u) * scale_q for u in exact.quantity.to_pylist()],
            exact.side_names().to_pylist(),
            strict=True,
        )
    )
    assert [(s, t, p, Decimal(q), d) for s, t, p, q, d in mine] == theirs


def test_compact_ticks_when_later_batch_is_coarser_stores_it_at_the_archive_schema(tmp_path):
    out = tmp_path / "archive"
    fine = write_text(tmp_path / "fine.csv", csv_of([(DAY_NS + 1_000, "1.255", "2", "BUY")]))
    coarse = write_text(
        tmp_path / "coarse.csv", csv_of([(DAY_NS + 3_000_000_000, "1.5", "3", "SELL")], "Y")
    )
    compact_ticks(archive_at(out).core, fine, as_of=AS_OF)
    (report,) = compact_ticks(archive_at(out).core, coarse, as_of=AS_OF)
    assert (report.timestamp_unit, report.price_scale, report.quantity_scale) == ("us", 3, 0)
    rows = duckdb.sql(
        f"SELECT epoch_ns(ts), price FROM read_parquet('{out}/**/*.parquet') ORDER BY 1"
    ).fetchall()
    assert rows == [(DAY_NS + 1_000, Decimal("1.255")), (DAY_NS + 3_000_000_000, Decimal("1.5"))]


@pytest.mark.parametrize(
    ("row", "field", "needed"),
    [
        ((DAY_NS + 5, "1.5", "1", "BUY"), "timestamp_unit", "ns"),
        ((DAY_NS + 5_000, "1.12345", "1", "BUY"), "price_scale", 5),
        ((DAY_NS + 5_000, "1.5", "0.5", "BUY"), "quantity_scale", 1),
    ],
)
def test_compact_ticks_when_later_batch_is_finer_refuses_naming_what_it_needs(
    tmp_path, row, field, needed
):
    out = tmp_path / "archive"
    first = write_text(tmp_path / "first.csv", csv_of([(DAY_NS + 1_000, "1.255", "2", "BUY")]))
    compact_ticks(archive_at(out).core, first, as_of=AS_OF)
    before = listing(out)
    finer = write_text(tmp_path / "finer.csv", csv_of([row, (DAY_NS + 90_000, "2", "1", "SELL")]))
    with pytest.raises(ArchiveSchemaError, match=f"need {field} {needed!r}") as caught:
        compact_ticks(archive_at(out).core, finer, as_of=AS_OF)
    assert (caught.value.field, caught.value.needed) == (field, needed)
    assert listing(out) == before


def test_compact_ticks_when_flags_given_override_detection(tmp_path):
    source = write_text(tmp_path / "t.csv", csv_of([(DAY_NS + 1_000_000, "1.5", "2", "BUY")]))
    out = tmp_path / "archive"
    (report,) = compact_ticks(
        archive_at(out).core,
        source,
        as_of=AS_OF,
        encoding=encoded(timestamp_unit="ns", price_scale=4, quantity_scale=1),
    )
    assert (report.timestamp_unit, report.price_scale, report.quantity_scale) == ("ns", 4, 1)
    assert pq.read_schema(report.path).field("ts").type.unit == "ns"
    with pytest.raises(ConfigError, match="price_scale"):
        compact_ticks(archive_at(out).core, source, as_of=AS_OF, encoding=encoded(price_scale=2))


def test_schema_request_when_field_fixed_keeps_it_over_the_archive():
    request = SchemaRequest(price_scale=6)
    needed = TickSchema("ms", 6, 0)
    assert request.resolve(needed, TickSchema("us", 4, 2)) == TickSchema("us", 6, 2)


def test_cli_compact_ticks_when_no_scale_given_detects_it(tmp_path, capsys):
    source = write_text(tmp_path / "t.csv", csv_of([(DAY_NS + 2_000_000, "9682.07", "0.001", "B")]))
    out = tmp_path / "archive"
    argv = ["compact-ticks", str(source), "--out", str(out), "--as-of", AS_OF.isoformat(),
            "--side-map", "B=BUY"]  # fmt: skip
    assert main(argv) == 0, capsys.readouterr().err
    marker = read_archive_marker(out)
    assert (marker["timestamp_unit"], marker["price_scale"], marker["quantity_scale"]) == (
        "ms",
        2,
        3,
    )


# --- through the fills of a snapshot ------------------------------------------------------------


def test_archive_symbol_days_when_archive_is_new_takes_the_snapshot_fills_schema(
    applied_chain: Path, tmp_path: Path
):
    history = applied_chain / "history"
    snapshot = history / "2026-11"
    files = [str(p) for p in sorted(snapshot.glob("fills/*/*.parquet"))]
    # Oracle: DuckDB over every fills file of the snapshot.
    [(micros, price_scale)] = duckdb.sql(
        "SELECT bool_and(epoch_ns(ts) % 1000 = 0), "
        "max(length(rtrim(split_part(price::VARCHAR, '.', 2), '0'))) "
        "FROM read_parquet($files)",
        params={"files": files},
    ).fetchall()
    assert micros, "the sample's trade times have microsecond resolution"
    expected = snapshot_fills_schema(snapshot)
    assert expected == TickSchema("us", price_scale, 0)
    fills = snapshot / "fills" / "kalshi" / "2026-10.parquet"
    [(symbol, day)] = duckdb.sql(
        "SELECT 'kalshi:' || market_id, (ts AT TIME ZONE 'UTC')::DATE FROM read_parquet($f) "
        "LIMIT 1",
        params={"f": str(fills)},
    ).fetchall()
    out = tmp_path / "archive"
    [result] = archive_symbol_days(
        archive_at(out, TierPolicy()), history, [(symbol, day)], as_of=AS_OF
    )
    assert recorded_schema(out) == expected
    assert pq.read_schema(result.report.path).field("ts").type.unit == "us"
