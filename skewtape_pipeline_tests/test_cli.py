"""The command line end to end: the whole sample chain in both modes, refusals, ticks."""

from __future__ import annotations

import hashlib
import io
import itertools
import json
import shutil
from pathlib import Path

import duckdb
import pytest

from skewtape_pipeline.audit import verify_audit_log
from skewtape_pipeline.cli.app import main
from skewtape_pipeline.cli.tick_commands import parse_side_map
from skewtape_pipeline.errors import ConfigError
from skewtape_pipeline.sample.publisher import publish_sample
from skewtape_pipeline_tests.mirror.apply_support import assert_same_snapshot, tree_state
from skewtape_pipeline_tests.ticks.archive_builders import write_four_day_csv

FILLS = 1_200


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, list[str]]:
    """A published sample (root with history/ and deltas/) and its oracle snapshots."""
    base = tmp_path_factory.mktemp("cli-sample")
    summary = publish_sample(
        base / "root", fills_per_venue_month=FILLS, snapshots_dir=base / "oracle"
    )
    return base / "root", base / "oracle", summary.months


@pytest.fixture()
def root(published, tmp_path: Path) -> Path:
    """A private copy of the published root (history/ and deltas/)."""
    copy = tmp_path / "data"
    shutil.copytree(published[0], copy)
    return copy


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_apply_delta_when_in_place_over_whole_chain_reaches_each_published_month(
    published, root, capsys
):
    _, oracle, months = published
    snapshot = root / "history" / months[0]
    for month in months[1:]:
        code, out, err = run(capsys, "apply-delta", str(snapshot), str(root / "deltas" / month))
        assert code == 0, err
        assert f"skewtape-history-{month}" in out
        assert_same_snapshot(snapshot, oracle / month)
    assert (root / "audit.jsonl").exists()
    code, out, _ = run(capsys, "audit-verify", str(root / "audit.jsonl"), "--json")
    checked = json.loads(out)
    assert code == 0 and checked["records"] > 0 and checked["head_status"] == "current"


def test_cli_apply_delta_when_versioned_keeps_every_month_readable(published, root, capsys):
    _, oracle, months = published
    history = root / "history"
    for parent, month in itertools.pairwise(months):
        code, out, err = run(
            capsys,
            "apply-delta",
            str(history / parent),
            str(root / "deltas" / month),
            "--into",
            str(history / month),
            "--json",
        )
        assert code == 0, err
        result = json.loads(out)
        assert result["mode"] == "versioned" and result["already_applied"] is False
    for month in months:
        assert_same_snapshot(history / month, oracle / month)


def test_cli_catch_up_when_versioned_applies_chain_then_reports_current(published, root, capsys):
    _, oracle, months = published
    code, out, err = run(capsys, "catch-up", str(root / "history"), str(root / "deltas"), "--json")
    assert code == 0, err
    assert [r["next_bundle_id"] for r in json.loads(out)] == [
        f"skewtape-history-{m}" for m in months[1:]
    ]
    assert_same_snapshot(root / "history" / months[-1], oracle / months[-1])
    code, out, _ = run(capsys, "catch-up", str(root / "history"), str(root / "deltas"))
    assert code == 0 and "already current" in out


def test_cli_apply_delta_when_delta_tampered_exits_2_with_one_line_and_changes_nothing(
    published, root, capsys
):
    months = published[2]
    snapshot, delta = root / "history" / months[0], root / "deltas" / months[1]
    victim = next((delta / "snapshot" / "fills").rglob("*.parquet"))
    victim.chmod(0o644)
    victim.write_bytes(victim.read_bytes()[:-1] + b"\x00")
    before = tree_state(snapshot)
    code, out, err = run(capsys, "apply-delta", str(snapshot), str(delta))
    assert code == 2 and out == ""
    assert err.startswith("error: ") and err.count("\n") == 1
    assert victim.name in err
    assert tree_state(snapshot) == before
    assert sorted(p.name for p in (root / "history").iterdir()) == [months[0]]  # no lock file


def test_cli_verify_when_file_changed_exits_2_naming_it(published, root, capsys):
    snapshot = root / "history" / published[2][0]
    code, out, _ = run(capsys, "verify", str(snapshot), "--full")
    assert code == 0 and "verified" in out
    readme = snapshot / "README.md"
    readme.chmod(0o644)
    readme.write_text("edited locally\n")
    code, _, err = run(capsys, "verify", str(snapshot))
    assert code == 2 and "README.md" in err


def test_cli_verify_when_manifest_has_no_bundle_id_prints_no_none(published, root, capsys):
    """A snapshot manifest's ``bundle_id`` is not required (docs/mirror/format.md): without
    one, the summary names the folder alone, never "None"."""
    snapshot = root / "history" / published[2][0]
    manifest = json.loads((snapshot / "manifest.json").read_text())
    del manifest["bundle_id"]
    raw = (json.dumps(manifest, indent=2) + "\n").encode()
    checksums = (snapshot / "CHECKSUMS.sha256").read_text().splitlines()
    line = f"{hashlib.sha256(raw).hexdigest()}  manifest.json"
    sealed = [line if row.endswith("  manifest.json") else row for row in checksums]
    for name, data in (("manifest.json", raw), ("CHECKSUMS.sha256", "\n".join(sealed) + "\n")):
        (snapshot / name).chmod(0o644)
        (snapshot / name).write_bytes(data if isinstance(data, bytes) else data.encode())
    code, out, err = run(capsys, "verify", str(snapshot))
    assert code == 0, err
    assert out.startswith(f"{snapshot}: verified (") and "None" not in out


def test_cli_diff_when_applied_reproduces_next_snapshot(published, tmp_path, capsys):
    _, oracle, months = published
    delta = tmp_path / "delta"
    code, out, err = run(
        capsys, "diff", str(oracle / months[0]), str(oracle / months[1]), str(delta)
    )
    assert code == 0, err
    assert "change" in out
    snapshot = tmp_path / "snap"
    shutil.copytree(oracle / months[0], snapshot)
    code, _, err = run(capsys, "apply-delta", str(snapshot), str(delta), "--no-audit")
    assert code == 0, err
    assert_same_snapshot(snapshot, oracle / months[1])


def test_cli_compact_ticks_when_canonical_csv_archives_exact_ticks(tmp_path, capsys):
    source = tmp_path / "ticks.csv"
    source.write_text(
        "timestamp_nanos,price,quantity,side,symbol\n"
        "1764547200000000000,0.55,10,yes,KX-A\n"
        "1764547200000000000,0.56,3,no,KX-A\n"
        "1764547260123456000,0.54,700,yes,KX-B\n"
    )
    out = tmp_path / "archive"
    code, stdout, err = run(
        capsys, "compact-ticks", str(source), "--out", str(out), "--as-of", "2025-12-31",
        "--price-scale", "2", "--side-map", "yes=BUY,no=SELL", "--json",
    )  # fmt: skip
    assert code == 0, err
    reports = [json.loads(line) for line in stdout.splitlines()]
    assert sorted(r["symbol"] for r in reports) == ["KX-A", "KX-B"]
    assert all(r["round_trip_verified"] for r in reports)
    rows = duckdb.sql(
        f"SELECT symbol, price::VARCHAR, quantity::VARCHAR, side FROM read_parquet("
        f"'{out}/**/*.parquet', hive_partitioning=true) ORDER BY symbol, ts, price"
    ).fetchall()
    assert rows == [
        ("KX-A", "0.55", "10", "BUY"),
        ("KX-A", "0.56", "3", "SELL"),
        ("KX-B", "0.54", "700", "BUY"),
    ]


def test_cli_compact_ticks_when_side_unmapped_exits_2_and_writes_nothing(tmp_path, capsys):
    source = tmp_path / "ticks.csv"
    source.write_text("timestamp_nanos,price,quantity,side\n1764547200000000000,0.55,10,maybe\n")
    out = tmp_path / "archive"
    code, _, err = run(
        capsys, "compact-ticks", str(source), "--out", str(out), "--as-of", "2025-12-31",
        "--price-scale", "2", "--symbol", "KX-A", "--side-map", "yes=BUY,no=SELL",
    )  # fmt: skip
    assert code == 2 and "maybe" in err and "side" in err
    assert not out.exists() or not list(out.rglob("*.parquet"))


def test_parse_side_map_when_side_not_canonical_raises_config_error():
    assert parse_side_map("yes=BUY,no=SELL") == {"yes": "BUY", "no": "SELL"}
    with pytest.raises(ConfigError, match="expected RAW=BUY"):
        parse_side_map("yes=LONG")


def test_cli_retier_then_query_when_days_age_answers_same_rows_from_cold_tier(tmp_path, capsys):
    source = write_four_day_csv(tmp_path / "ticks.csv")
    archive = tmp_path / "data" / "archive"
    code, _, err = run(
        capsys, "compact-ticks", str(source), "--out", str(archive), "--as-of", "2025-12-05",
        "--price-scale", "2",
    )  # fmt: skip
    assert code == 0, err
    count = "SELECT tier, count(*) AS n, sum(quantity) AS q FROM ticks GROUP BY tier"
    code, before, err = run(capsys, "query", count, "--archive", str(archive), "--json")
    assert code == 0, err
    assert [(r["tier"], r["n"]) for r in json.loads(before)] == [("HOT", 12)]
    code, out, err = run(capsys, "retier", str(archive), "--as-of", "2027-01-01")
    assert code == 0, err
    assert "moved 4 symbol-days" in out
    code, after, _ = run(capsys, "query", count, "--archive", str(archive), "--json")
    assert [(r["tier"], r["n"], r["q"]) for r in json.loads(after)] == [
        ("COLD", 12, json.loads(before)[0]["q"])
    ]
    assert verify_audit_log(tmp_path / "data" / "audit.jsonl") > 0
    code, _, err = run(capsys, "query", "SELECT nope FROM ticks", "--archive", str(archive))
    assert code == 2 and "nope" in err


def test_cli_remove_days_when_a_cold_day_is_corrected_away_query_no_longer_sees_it(
    tmp_path, capsys
):
    day_ns, start = 86_400 * 10**9, 1_764_547_200 * 10**9  # 2025-12-01
    lines = ["timestamp_nanos,price,quantity,side,symbol"]
    lines += [f"{start + d * day_ns + i},0.{50 + i},1,BUY,KX" for d in range(2) for i in range(3)]
    source = tmp_path / "ticks.csv"
    source.write_text("\n".join(lines) + "\n")
    archive = tmp_path / "data" / "archive"
    compact = ["compact-ticks", str(source), "--out", str(archive), "--price-scale", "2"]
    assert run(capsys, *compact, "--as-of", "2025-12-02")[0] == 0
    assert run(capsys, "retier", str(archive), "--as-of", "2027-01-01")[0] == 0

    code, out, err = run(capsys, "remove-days", str(archive), "--day", "KX", "2025-12-01", "--json")

    assert code == 0, err
    assert json.loads(out) == [
        {"symbol": "KX", "date": "2025-12-01", "removed_file": False, "withdrawn": True}
    ]
    count = "SELECT date, count(*) AS n FROM ticks GROUP BY date"
    code, out, _ = run(capsys, "query", count, "--archive", str(archive), "--json")
    assert json.loads(out) == [{"date": "2025-12-02", "n": 3}]
    code, _, err = run(capsys, "remove-days", str(archive), "--day", "KX", "Monday")
    assert code == 2 and "--day is 'Monday'" in err


def test_cli_compact_ticks_when_timestamp_finer_than_unit_exits_2_naming_the_row(tmp_path, capsys):
    source = tmp_path / "ticks.csv"
    source.write_text(
        "timestamp_nanos,price,quantity,side\n"
        "1764547200000000000,0.55,10,BUY\n"
        "1764547200000000500,0.56,3,SELL\n"
    )
    out = tmp_path / "archive"
    args = ["compact-ticks", str(source), "--out", str(out), "--as-of", "2025-12-31",
            "--price-scale", "2", "--symbol", "KX-A"]  # fmt: skip
    code, _, err = run(capsys, *args, "--timestamp-unit", "us")
    assert code == 2 and "row" in err
    assert not out.exists() or not list(out.rglob("*.parquet"))
    code, _, err = run(capsys, *args, "--timestamp-unit", "ns")
    assert code == 0, err


def _ns_ticks_csv(folder: Path) -> tuple[Path, list[str]]:
    """A canonical CSV of ticks with true nanosecond timestamps, and their ``ts`` as text."""
    start = 1_340_236_800 * 10**9  # 2012-06-21 00:00 UTC
    offsets = (34_200_017_459_617, 34_200_017_459_618, 57_599_959_000_001)
    lines = ["timestamp_nanos,price,quantity,side,symbol"]
    lines += [f"{start + o},220.51,{i + 1},BUY,AMZN" for i, o in enumerate(offsets)]
    source = folder / "ns.csv"
    source.write_text("\n".join(lines) + "\n")
    texts = []
    for offset in offsets:
        seconds, nanos = divmod(offset, 10**9)
        hours, rest = divmod(seconds, 3600)
        texts.append(f"2012-06-21 {hours:02d}:{rest // 60:02d}:{rest % 60:02d}.{nanos:09d}+00")
    return source, texts


def test_cli_query_when_timestamps_have_nanoseconds_prints_them_exactly(tmp_path, capsys):
    source, expected = _ns_ticks_csv(tmp_path)
    archive = tmp_path / "archive"
    args = ["compact-ticks", str(source), "--out", str(archive), "--as-of", "2012-06-22"]
    assert run(capsys, *args, "--price-scale", "2")[0] == 0
    sql = "SELECT ts, price, NULL AS none, 'a\tb\\c' AS text FROM ticks ORDER BY ts"

    code, out, err = run(capsys, "query", sql, "--archive", str(archive))

    assert code == 0, err
    header, *lines = out.splitlines()
    assert header.split("\t") == ["ts", "price", "none", "text"]
    assert [line.split("\t") for line in lines] == [
        [ts, "220.51", "\\N", "a\\tb\\\\c"] for ts in expected
    ]
    code, out, err = run(capsys, "query", sql, "--archive", str(archive), "--json")
    assert code == 0, err
    rows = json.loads(out)
    assert [r["ts"] for r in rows] == expected and rows[0]["none"] is None
    assert rows[0]["text"] == "a\tb\\c"


def test_cli_when_a_symbol_holds_terminal_controls_prints_them_escaped(tmp_path, capsys):
    source = tmp_path / "ctl.csv"
    source.write_text("timestamp_nanos,price,quantity,side,symbol\n"
                      "1700000000000000000,1.5,10,BUY,A\x1b[2J\x07B\n")  # fmt: skip
    archive = tmp_path / "archive"
    code, out, err = run(capsys, "compact-ticks", str(source), "--out", str(archive),
                         "--as-of", "2023-11-20")  # fmt: skip
    assert code == 0, err
    assert "A\\x1b[2J\\x07B  2023-11-14" in out and "\x1b" not in out
    sql = "SELECT symbol, 'tab\there' AS t FROM ticks"
    code, out, err = run(capsys, "query", sql, "--archive", str(archive))
    assert code == 0, err
    assert out.splitlines()[1].split("\t") == ["A\\x1b[2J\\x07B", "tab\\there"]


def _cold_archive(folder: Path, capsys) -> Path:
    """An archive of two KX days at 2025-12-01/02, re-tiered so both are cold."""
    day_ns, start = 86_400 * 10**9, 1_764_547_200 * 10**9  # 2025-12-01
    lines = ["timestamp_nanos,price,quantity,side,symbol"]
    lines += [f"{start + d * day_ns + i},0.{50 + i},1,BUY,KX" for d in range(2) for i in range(3)]
    source = folder / "ticks.csv"
    source.write_text("\n".join(lines) + "\n")
    archive = folder / "data" / "archive"
    compact = ["compact-ticks", str(source), "--out", str(archive), "--price-scale", "2"]
    assert run(capsys, *compact, "--as-of", "2025-12-02")[0] == 0
    assert run(capsys, "retier", str(archive), "--as-of", "2027-01-01")[0] == 0
    return archive


@pytest.mark.parametrize("command", ["retier", "remove-days"])
def test_cli_archive_writer_when_path_mistyped_exits_2_creating_nothing(tmp_path, capsys, command):
    extra = ["--as-of", "2027-01-01"] if command == "retier" else ["--day", "KX", "2025-12-01"]
    nowhere, empty, other = tmp_path / "nowhere", tmp_path / "empty", tmp_path / "other"
    empty.mkdir()
    other.mkdir()
    (other / "notes.txt").write_text("not an archive\n")
    for path in (nowhere, empty, other):
        before = sorted(tmp_path.rglob("*"))
        code, out, err = run(capsys, command, str(path), *extra)
        assert code == 2 and err.startswith(f"error: {path}") and not out
        assert sorted(tmp_path.rglob("*")) == before  # no lock file, no folder


def test_cli_query_when_archive_is_a_tier_folder_exits_2_naming_it(tmp_path, capsys):
    archive = _cold_archive(tmp_path, capsys)
    cold = archive.with_name("archive-cold")
    assert cold.is_dir()
    code, _, err = run(capsys, "query", "SELECT count(*) FROM ticks", "--archive", str(cold))
    assert code == 2 and str(cold) in err and str(archive) in err
    code, _, err = run(capsys, "retier", str(cold), "--as-of", "2027-01-01")
    assert code == 2 and str(cold) in err
    assert not (cold / ".skewtape-archive.lock").exists()


def test_cli_remove_days_when_symbol_day_not_in_archive_exits_2_naming_it(tmp_path, capsys):
    archive = _cold_archive(tmp_path, capsys)
    catalog = (archive / "_skewtape_catalog.parquet").read_bytes()
    code, out, err = run(
        capsys, "remove-days", str(archive), "--day", "KX", "2025-12-01", "--day", "KX",
        "2025-12-09",
    )  # fmt: skip
    assert code == 2 and "KX 2025-12-09" in err and not out
    assert (archive / "_skewtape_catalog.parquet").read_bytes() == catalog  # nothing withdrawn
    code, out, err = run(capsys, "remove-days", str(archive), "--day", "KX", "2025-12-01")
    assert code == 0, err


def _many_symbol_days_csv(folder: Path, symbols: int = 12, days: int = 2) -> Path:
    start = 1_764_547_200 * 10**9  # 2025-12-01
    lines = ["timestamp_nanos,price,quantity,side,symbol"]
    lines += [f"{start + d * 86_400 * 10**9 + i},0.{10 + s},{i + 1},BUY,S{s:02d}"
              for s in range(symbols) for d in range(days) for i in range(3)]  # fmt: skip
    source = folder / "many.csv"
    source.write_text("\n".join(lines) + "\n")
    return source


def test_cli_compact_ticks_when_default_prints_a_short_summary_not_the_reports(tmp_path, capsys):
    source = _many_symbol_days_csv(tmp_path)
    archive = tmp_path / "archive"
    argv = ["compact-ticks", str(source), "--out", str(archive), "--as-of", "2025-12-05",
            "--price-scale", "2"]  # fmt: skip

    code, out, err = run(capsys, *argv)

    assert code == 0, err
    lines = out.splitlines()
    assert len(lines) <= 15 and not any(line.startswith("{") for line in lines)
    assert "24 symbol-days" in lines[0] and "72 ticks" in lines[0]
    assert "14 more symbol-days not shown" in lines[-1] and "--json" in lines[-1]
    assert err == ""  # no progress bar: stderr is not a terminal
    code, again, err = run(capsys, *argv, "--json")
    reports = [json.loads(line) for line in again.splitlines()]
    assert code == 0 and len(reports) == 24
    assert sum(r["tick_count"] for r in reports) == 72
    raw, packed = (sum(r[k] for r in reports) for k in ("raw_size_bytes", "compacted_size_bytes"))
    assert f"{raw} -> {packed} bytes" in lines[0]
    shown = [r for r in reports if any(line.startswith(f"{r['symbol']} ") for line in lines)]
    assert len(shown) == 10
    header = next(line for line in lines if line.startswith("symbol "))
    assert header.split()[-2:] == ["written", "with"]
    first = next(line for line in lines if line.startswith(f"{shown[0]['symbol']} "))
    codec = f"{shown[0]['codec']}-{shown[0]['compression_level']}"  # the file's own footer
    assert first.endswith(f"  {codec} ({shown[0]['tier'].lower()})")


def test_cli_compact_ticks_when_stderr_is_a_terminal_draws_progress_there(
    tmp_path, capsys, monkeypatch
):
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    terminal = Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    source = _many_symbol_days_csv(tmp_path)
    argv = ["compact-ticks", str(source), "--out", str(tmp_path / "a"), "--as-of", "2025-12-05",
            "--price-scale", "2"]  # fmt: skip
    assert main(argv) == 0
    drawn = terminal.getvalue()
    assert drawn.count("\r") >= 2 and "24/24 symbol-days" in drawn and drawn.endswith("\n")
    assert "\r" not in capsys.readouterr().out
