"""Compaction of inputs of any size: read in chunks, symbol-days routed and spilled to the
staging folder beyond a memory budget, the archive the same bytes as an unbounded run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from datetime import date
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
import pytest

from skewtape_pipeline.cli.app import main
from skewtape_pipeline.cli.tick_commands import ReadingRate, parse_bytes
from skewtape_pipeline.errors import ConfigError, TickValidationError
from skewtape_pipeline.progress import ProgressLine
from skewtape_pipeline.ticks.archive.ops.compact import compact_source, compact_ticks
from skewtape_pipeline.ticks.archive.ops.compact_plan import CompactionRun
from skewtape_pipeline.ticks.archive.store.catalog import (
    CatalogStore,
)
from skewtape_pipeline.ticks.archive.store.hot_index import index_path
from skewtape_pipeline.ticks.archive.store.layout import staging_folder
from skewtape_pipeline.ticks.archive.store.spill import SymbolDayRouter
from skewtape_pipeline.ticks.archive.store.version_files import VERSIONS_DIR
from skewtape_pipeline.ticks.archive.store.versions import VersionLog
from skewtape_pipeline.ticks.encode import sources
from skewtape_pipeline_tests.ticks.conftest import archive_at

REPO = Path(__file__).resolve().parents[3]
DAY_NS = 86_400 * 10**9
START_NS = 1_710_460_800 * 10**9  # 2024-03-15 00:00 UTC
AS_OF = date(2024, 3, 20)
UNBOUNDED = 2**40
MIB = 2**20


def _remainder(values: pa.Array, modulo: int) -> pa.Array:
    return pc.subtract(values, pc.multiply(pc.divide(values, modulo), modulo))


def _mixed(index: pa.Array, salt: int, modulo: int) -> pa.Array:
    """Reproducible pseudo-random ints in 0 .. modulo - 1."""
    mixed = pc.multiply(pc.add(index, salt), 2_654_435_761)
    mixed = pc.bit_wise_and(pc.bit_wise_xor(mixed, pc.shift_right(mixed, 15)), 2**31 - 1)
    return _remainder(mixed, modulo)


def generated_ticks(count: int, *, symbols: int = 40, days: int = 2) -> pa.Table:
    """``count`` ticks over ``symbols`` symbols and ``days`` UTC days in time order with every
    50th tick a little late (the sort moves it); prices on a 0.01 grid for the first half of
    the rows and a 0.0001 grid after (the scale grows mid-file), integer sizes."""
    index = pa.array(range(count), pa.int64())
    step = days * DAY_NS // (count + 1)
    late = pc.multiply(pc.cast(pc.equal(_mixed(index, 7, 50), 0), pa.int64()), 3 * step)
    cents = pc.add(pc.multiply(_mixed(index, 1, symbols), 100), _mixed(index, 2, 90))
    fine = pc.greater_equal(index, count // 2)
    units = pc.add(pc.multiply(cents, 100), pc.if_else(fine, _mixed(index, 5, 100), 0))
    return pa.table(
        {
            "timestamp_nanos": pc.subtract(pc.add(pc.multiply(index, step), START_NS), late),
            "price": sources.units_as_decimal(units, 4),
            "quantity": pc.add(_mixed(index, 3, 400), 1),
            "side": pc.take(pa.array(["BUY", "SELL", "UNKNOWN"]), _mixed(index, 4, 3)),
            "symbol": pc.take(
                pa.array([f"S{i:02d}" for i in range(symbols)]), _mixed(index, 1, symbols)
            ),
        }
    )


def write_csv(table: pa.Table, path: Path, *, header: bool = True) -> Path:
    pa_csv.write_csv(table, path, pa_csv.WriteOptions(include_header=header, quoting_style="none"))
    return path


def canonical_csv(tmp_path: Path, count: int) -> Path:
    return write_csv(generated_ticks(count), tmp_path / "ticks.csv")


def canonical_parquet(tmp_path: Path, count: int) -> Path:
    path = tmp_path / "ticks.parquet"
    pq.write_table(generated_ticks(count), path, row_group_size=50_000)
    return path


def kalshi_csv(tmp_path: Path, count: int) -> Path:
    ticks = generated_ticks(count)
    micros = pc.cast(pc.divide(ticks["timestamp_nanos"], 1000), pa.timestamp("us", "UTC"))
    yes = pc.add(_mixed(pa.array(range(count), pa.int64()), 9, 98), 1)
    table = pa.table(
        {
            "trade_id": pa.array(range(count)),
            "ticker": ticks["symbol"],
            "count": ticks["quantity"],
            "created_time": pc.binary_join_element_wise(
                pc.strftime(micros, format="%Y-%m-%dT%H:%M:%S"), "Z", ""
            ),
            "yes_price": yes,
            "no_price": pc.subtract(100, yes),
            "taker_side": pc.if_else(pc.equal(ticks["side"], "BUY"), "yes", "no"),
        }
    )
    return write_csv(table, tmp_path / "kalshi.csv")


def tardis_csv(tmp_path: Path, count: int) -> Path:
    ticks = generated_ticks(count)
    micros = pc.divide(ticks["timestamp_nanos"], 1000)
    table = pa.table(
        {
            "exchange": pa.repeat(pa.scalar("binance"), count),
            "symbol": ticks["symbol"],
            "timestamp": micros,
            "local_timestamp": pc.add(micros, 5),
            "id": pa.array(range(count)),
            "side": pc.if_else(pc.equal(ticks["side"], "BUY"), "buy", "sell"),
            "price": ticks["price"],
            "amount": ticks["quantity"],
        }
    )
    return write_csv(table, tmp_path / "tardis.csv")


def lobster_csv(tmp_path: Path, count: int) -> Path:
    index = pa.array(range(count), pa.int64())
    nanos = pc.add(pc.multiply(index, 20_000 * 10**9 // count), 34_200 * 10**9)  # in the session
    seconds = pc.binary_join_element_wise(
        pc.cast(pc.divide(nanos, 10**9), pa.string()),
        pc.utf8_lpad(pc.cast(_remainder(nanos, 10**9), pa.string()), 9, "0"),
        ".",
    )
    table = pa.table(
        {
            "time": seconds,
            "type": pc.take(pa.array([1, 4, 5, 3, 6]), _mixed(index, 1, 5)),
            "order_id": index,
            "size": pc.add(_mixed(index, 2, 300), 1),
            "price": pc.add(pc.multiply(_mixed(index, 3, 500), 100), 2_230_000),
            "direction": pc.take(pa.array([-1, 1]), _mixed(index, 4, 2)),
        }
    )
    return write_csv(table, tmp_path / "AMZN_2012-06-21_34200000_57600000_message_1.csv",
                     header=False)  # fmt: skip


FORMATS = {
    "canonical-csv": (canonical_csv, sources.open_canonical, 1_000_000, 4 * MIB),
    "canonical-parquet": (canonical_parquet, sources.open_canonical, 200_000, 1 * MIB),
    "kalshi-trades": (kalshi_csv, sources.open_kalshi_trades, 150_000, 1 * MIB),
    "tardis-trades": (tardis_csv, sources.open_tardis_trades, 150_000, 1 * MIB),
    "lobster-messages": (lobster_csv, sources.open_lobster_messages, 150_000, 1 * MIB),
}


def archive_bytes(out: Path) -> dict[str, object]:
    """Every file of the archive (staging and lock file aside) by relative path; the hot file
    records (an append log, in the order files were published) as their latest record by path.
    """
    files: dict[str, object] = {
        path.relative_to(out).as_posix(): path.read_bytes()
        for path in sorted(out.rglob("*"))
        if path.is_file()
        and ".skewtape-staging" not in path.parts
        and VERSIONS_DIR not in path.parts
        and not path.name.endswith(".lock")
        and path not in (CatalogStore(out).hot_records_path, index_path(out))
    }
    if (out / VERSIONS_DIR).exists():
        files["versions"] = version_records_without_times(out)
    if CatalogStore(out).hot_records_path.exists():
        files["hot file records"] = CatalogStore(out).hot_records()
    return files


def version_records_without_times(out: Path) -> list[dict]:
    """The archive's version records as committed, less the times they were committed at (the
    only part of a version that two runs over the same input do not share)."""
    records = sorted((out / VERSIONS_DIR).rglob("records/*.json"))
    untimed = [json.loads(path.read_bytes()) for path in records]
    # the hot index's mark names its log's inode; the record's sha256 covers its times
    skipped = ("time", "time_ns", "hot_index", "sha256")
    return [{k: v for k, v in r.items() if k not in skipped} for r in untimed]


def report_facts(reports) -> list[dict]:
    return [{k: v for k, v in r.to_dict().items() if k not in ("seconds", "path")} for r in reports]


def staged_files(out: Path) -> list[Path]:
    staging = staging_folder(out)
    return sorted(staging.rglob("*")) if staging.exists() else []


@pytest.mark.parametrize("name", list(FORMATS))
def test_compaction_when_over_its_memory_budget_spills_and_writes_the_same_archive(
    tmp_path, monkeypatch, name
):
    make, opener, count, budget = FORMATS[name]
    path = make(tmp_path, count)
    spills = []
    original = SymbolDayRouter.spill

    def counted(self):
        spills.append(self.held_bytes)
        original(self)

    monkeypatch.setattr(SymbolDayRouter, "spill", counted)
    archives = {}
    for label, limit in (("bounded", budget), ("unbounded", UNBOUNDED)):
        out = tmp_path / label
        stream = opener(path, block_bytes=64 * 1024 if label == "bounded" else 64 * MIB)
        reports = compact_source(
            archive_at(out).core,
            stream,
            as_of=date(2024, 3, 20),
            run=CompactionRun(memory_limit=limit),
        )
        archives[label] = (archive_bytes(out), report_facts(reports))
        assert staged_files(out) == []
        if label == "bounded":
            assert len(spills) >= 2
            spills.clear()
    assert spills == []
    assert archives["bounded"] == archives["unbounded"]
    facts = archives["bounded"][1]
    assert sum(f["tick_count"] for f in facts) > count // 3
    if name.startswith("canonical"):
        assert sum(f["reordered_ticks"] for f in facts) > 0
        assert {f["price_scale"] for f in facts} == {4}


def test_compaction_when_read_in_chunks_measures_each_symbol_days_lines(tmp_path):
    path = canonical_csv(tmp_path, 50_000)
    reports = compact_source(
        archive_at(tmp_path / "a").core,
        sources.open_canonical(path, block_bytes=64 * 1024),
        as_of=AS_OF,
    )
    lines = path.read_bytes().splitlines(keepends=True)[1:]
    assert sum(r.raw_size_bytes for r in reports) == sum(len(line) for line in lines)
    assert {r.raw_size_basis for r in reports} == {"source_file_rows"}


def test_compaction_when_a_later_chunk_is_bad_names_its_file_row_and_writes_nothing(tmp_path):
    ticks = generated_ticks(40_000)
    quantities = ticks["quantity"].to_pylist()
    quantities[31_234] = -5
    ticks = ticks.set_column(2, "quantity", pa.array(quantities, pa.int64()))
    path = write_csv(ticks, tmp_path / "ticks.csv")
    out = tmp_path / "a"
    with pytest.raises(TickValidationError) as info:
        compact_source(
            archive_at(out).core,
            sources.open_canonical(path, block_bytes=64 * 1024),
            as_of=AS_OF,
            run=CompactionRun(memory_limit=1 * MIB),
        )
    assert (info.value.row, info.value.field) == (31_234, "quantity")
    assert str(path) in str(info.value)
    assert archive_bytes(out) == {}
    assert staged_files(out) == []


def test_compaction_when_a_late_chunk_needs_a_larger_scale_refuses_a_value_it_overflows(
    tmp_path,
):
    lines = ["timestamp_nanos,price,quantity,side,symbol"]
    lines += [f"{START_NS + i},{10**15 + i if i < 100 else 5},1,BUY,X" for i in range(20_000)]
    lines += [f"{START_NS + 20_000},1.0001,1,BUY,X"]
    path = tmp_path / "ticks.csv"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(TickValidationError) as info:
        compact_source(
            archive_at(tmp_path / "a").core,
            sources.open_canonical(path, block_bytes=64 * 1024),
            as_of=AS_OF,
        )
    assert (info.value.row, info.value.field) == (0, "price")


# --- a line without a newline (issue 16, point 9) ---------------------------------------------


def test_csv_when_the_header_line_has_no_newline_for_50_mb_is_a_typed_error(tmp_path, capsys):
    path = tmp_path / "ticks.csv"
    path.write_bytes(b"timestamp_nanos," + b"x" * 50 * MIB)
    code = main(["compact-ticks", str(path), "--out", str(tmp_path / "a"), "--as-of",
                 "2024-03-20"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2
    assert str(path) in err and "header line" in err
    assert "Traceback" not in err and "_csv.Error" not in err


def test_csv_when_a_data_line_is_longer_than_a_block_names_its_row(tmp_path, capsys):
    path = tmp_path / "ticks.csv"
    with path.open("wb") as handle:
        handle.write(b"timestamp_nanos,price,quantity,side\n")
        handle.write(f"{START_NS},1.5,1,BUY\n".encode() * 3)
        handle.write(f"{START_NS},1.5,1,".encode() + b"B" * 50 * MIB)
    code = main(["compact-ticks", str(path), "--out", str(tmp_path / "a"), "--as-of",
                 "2024-03-20", "--symbol", "X"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2
    assert str(path) in err and "row 3" in err and "longer than" in err
    assert "Traceback" not in err
    assert not (tmp_path / "a").exists() or archive_bytes(tmp_path / "a") == {}


def test_csv_when_a_line_is_longer_than_the_reader_block_via_the_library_is_typed(tmp_path):
    path = tmp_path / "ticks.csv"
    path.write_bytes(b"timestamp_nanos,price,quantity,side\n1,1,1," + b"B" * 3 * MIB + b"\n")
    stream = sources.open_canonical(path, block_bytes=1 * MIB)
    with pytest.raises(TickValidationError) as info:
        stream.read_all()
    assert info.value.row == 0


@pytest.mark.parametrize(
    ("bad", "quoted"), [(5, False), (70_000, False), (70_000, True)],
    ids=["first-block", "later-block", "after-a-quoted-newline"],
)  # fmt: skip
def test_csv_when_a_row_has_fewer_fields_names_its_row(tmp_path, bad, quoted):
    rows = [f"{START_NS + i},1.5,1,BUY" for i in range(100_000)]
    rows[bad] = rows[bad].rsplit(",", 1)[0]  # its side left out
    if quoted:
        rows[3] = f'{START_NS + 3},1.5,1,"BU\nY"'  # a quoted newline: rows and lines part ways
    path = tmp_path / "ticks.csv"
    path.write_text("timestamp_nanos,price,quantity,side\n" + "\n".join(rows) + "\n")
    stream = sources.open_canonical(path, block_bytes=1 * MIB)
    with pytest.raises(TickValidationError) as info:
        stream.read_all()
    assert info.value.row == bad
    assert str(info.value).startswith(f"row {bad}: {path}: cannot read as CSV: ")
    assert "Expected 4 columns, got 3" in str(info.value)


# --- the memory budget ------------------------------------------------------------------------


def test_memory_limit_when_given_as_text_is_parsed_and_refused_when_too_small(tmp_path):
    assert parse_bytes("2G") == 2 * 2**30
    assert parse_bytes("512MiB") == 512 * MIB
    assert parse_bytes("1048576") == MIB
    with pytest.raises(ConfigError):
        parse_bytes("lots")
    with pytest.raises(ConfigError, match="memory_limit"):
        compact_ticks(
            archive_at(tmp_path / "a").core,
            canonical_csv(tmp_path, 10),
            as_of=AS_OF,
            run=CompactionRun(memory_limit=1000),
        )


def test_compact_ticks_when_memory_limit_is_not_bytes_refuses_in_one_line(tmp_path, capsys):
    path = canonical_csv(tmp_path, 10)
    code = main(["compact-ticks", str(path), "--out", str(tmp_path / "a"), "--as-of",
                 "2024-03-20", "--memory-limit", "lots"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("error: --memory-limit 'lots'") and "Traceback" not in err
    assert not (tmp_path / "a").exists()


MEASURE = """
import resource, subprocess, sys
done = subprocess.run(sys.argv[1:], capture_output=True)
assert done.returncode == 0, done.stderr.decode()
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024)
"""
BUDGET = 8 * MIB
FIXED_OVERHEAD = 320 * MIB
"""The interpreter and the project's imports (about 105 MiB), the streaming CSV reader's
read-ahead, two chunks being converted and routed, one small symbol-day being encoded and what
the allocators keep: what a compaction needs besides its budget, the same for any input size
(measured 165-220 MiB here, 255-260 MiB with transparent huge pages always on; before the
command chose jemalloc, mimalloc's per-thread heaps kept 270 MiB here and 330 MiB on one CI
machine; the whole-file reader needed about 430 bytes per tick: over 1 GiB for the larger
input)."""
GROWTH_ALLOWANCE = 96 * MIB
"""Run-to-run spread of the peak (thread timing, allocator caches), far below the ~1 GiB the
tenfold input would add if memory grew with it."""


def peak_rss(path: Path, out: Path) -> int:
    """Max RSS (bytes) of ``compact-ticks`` run in a child process (getrusage of a wrapper)."""
    command = [sys.executable, "-m", "skewtape_pipeline.cli", "compact-ticks", str(path), "--out",
               str(out), "--as-of", "2024-03-20", "--memory-limit", str(BUDGET)]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, *command], env=env, capture_output=True, check=True
    )
    return int(done.stdout)


def test_peak_memory_when_input_grows_tenfold_stays_under_the_budget_plus_fixed_overhead(
    tmp_path,
):
    small = write_csv(generated_ticks(250_000, symbols=200), tmp_path / "small.csv")
    large = write_csv(generated_ticks(2_500_000, symbols=200), tmp_path / "large.csv")
    small_rss = peak_rss(small, tmp_path / "a")
    large_rss = peak_rss(large, tmp_path / "b")
    assert small_rss < BUDGET + FIXED_OVERHEAD
    assert large_rss < BUDGET + FIXED_OVERHEAD
    assert large_rss - small_rss < GROWTH_ALLOWANCE


# --- crashes ----------------------------------------------------------------------------------

KILLED = """
import os, signal, sys
from datetime import date
from pathlib import Path
from skewtape_pipeline.ticks.archive.ops import compact, compact_plan
from skewtape_pipeline.ticks.archive.store import spill
from skewtape_pipeline.ticks.archive.handle import Archive
from skewtape_pipeline.ticks.encode import parquet_file

where, path, out = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
seen = []


def kill_at(count):
    seen.append(None)
    if len(seen) == count:
        os.kill(os.getpid(), signal.SIGKILL)


if where == "spilling":
    merged = spill._merged
    def dying_merged(pieces):
        for piece in merged(pieces):
            yield piece
            kill_at(30)
    spill._merged = dying_merged
else:
    write = parquet_file._write_parquet
    def dying_write(*args, **kwargs):
        write(*args, **kwargs)
        kill_at(5)
    parquet_file._write_parquet = dying_write
compact.compact_ticks(Archive(out, audit_log=None).core, path, as_of=date(2024, 3, 20),
                      run=compact_plan.CompactionRun(memory_limit=4 * 2**20))
"""


@pytest.mark.parametrize("where", ["spilling", "encoding"])
def test_compaction_when_killed_then_rerun_gives_the_exact_archive_and_no_staging_left(
    tmp_path, where
):
    path = write_csv(generated_ticks(300_000), tmp_path / "ticks.csv")
    expected = tmp_path / "expected"
    compact_ticks(archive_at(expected).core, path, as_of=AS_OF)
    out = tmp_path / "archive"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(KILLED), where, str(path), str(out)], env=env
    )
    assert done.returncode == -signal.SIGKILL
    assert staged_files(out) != []
    published = any(out.glob("symbol=*/*/*/*/*.parquet"))  # symbol-days published before
    compact_ticks(archive_at(out).core, path, as_of=AS_OF, run=CompactionRun(memory_limit=4 * MIB))
    got, wanted = archive_bytes(out), archive_bytes(expected)
    versions, [version] = got.pop("versions"), wanted.pop("versions")
    assert got == wanted
    if published:  # recorded first, as a version apart
        operations = [v["operation"] for v in versions]
        assert operations == ["unrecorded changes (found by compact)", "compact"]
        assert sorted(d for v in versions for d in v["changed"]) == version["changed"]
        log, clean = VersionLog(out), VersionLog(expected)
        assert log.read_manifest(log.read(2)) == clean.read_manifest(clean.read(1))
    else:
        assert versions == [version]
    assert staged_files(out) == []


# --- progress ---------------------------------------------------------------------------------


class FakeStream:
    def __init__(self, tty: bool) -> None:
        self.tty, self.text = tty, ""

    def isatty(self) -> bool:
        return self.tty

    def write(self, text: str) -> None:
        self.text += text

    def flush(self) -> None:
        pass


def test_reading_rate_when_not_a_terminal_prints_bytes_read_of_the_size_and_ticks_per_second():
    stream, now = FakeStream(tty=False), [0.0]
    rate = ReadingRate(ProgressLine(stream, "bytes", interval=0.0), clock=lambda: now[0])
    now[0] = 2.0
    rate.update(100 * 10**6, 400 * 10**6, 2_000_000)
    rate.line.finish()
    assert stream.text == (
        "reading, 2,000,000 ticks at 1,000,000 ticks/s: 100.0 MB of 400.0 MB (25%)\n"
    )


def test_reading_rate_when_a_terminal_redraws_one_line_and_ends_it(monkeypatch):
    monkeypatch.setenv("COLUMNS", "120")  # a narrower one cuts the stage (test_cli_progress)
    stream, now = FakeStream(tty=True), [0.0]
    rate = ReadingRate(ProgressLine(stream, "bytes"), clock=lambda: now[0])
    now[0] = 1.0
    rate.update(100 * 10**6, 200 * 10**6, 10)
    rate.update(150 * 10**6, 200 * 10**6, 20)
    rate.line.finish()
    assert stream.text.count("\r") == 2 and stream.text.endswith("\n")
    assert "reading, 20 ticks at 20 ticks/s: 150.0 MB of 200.0 MB" in stream.text


def test_compact_ticks_when_run_in_a_pipe_reports_reading_progress(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("skewtape_pipeline.progress.LINE_INTERVAL", 0.0)
    path = canonical_csv(tmp_path, 1_000)
    code = main(["compact-ticks", str(path), "--out", str(tmp_path / "a"), "--as-of",
                 "2024-03-20"])  # fmt: skip
    captured = capsys.readouterr()
    assert code == 0
    assert "compact-ticks: reading, 1,000 ticks at " in captured.err
    assert "ticks/s: " in captured.err and "(100%)" in captured.err
    assert captured.out.startswith("compacted 1000 ticks")


def test_compaction_when_float_noise_spans_chunks_counts_it_as_the_whole_file_does(tmp_path):
    lines = ["timestamp_nanos,price,quantity,side,symbol"]
    lines += [
        f"{START_NS + i},{'150.15000000000003' if i % 7 == 0 else '150.25'},1,BUY,S{i % 3}"
        for i in range(40_000)
    ]
    path = tmp_path / "ticks.csv"
    path.write_text("\n".join(lines) + "\n")
    facts = {}
    for label, block, limit in (("chunked", 64 * 1024, 1 * MIB), ("whole", 64 * MIB, UNBOUNDED)):
        reports = compact_source(
            archive_at(tmp_path / label).core,
            sources.open_canonical(path, block_bytes=block),
            as_of=AS_OF,
            run=CompactionRun(memory_limit=limit),
        )
        facts[label] = report_facts(reports)
    assert facts["chunked"] == facts["whole"]
    assert sum(f["price_float_noise_normalized"] for f in facts["chunked"]) == len(
        range(0, 40_000, 7)
    )
    assert {f["price_scale"] for f in facts["chunked"]} == {2}
