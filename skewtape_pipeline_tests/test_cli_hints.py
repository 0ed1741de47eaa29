"""What ``compact-ticks`` and ``retier`` tell a new user: the input format a raw file's columns
match, both labels a renamed LOBSTER file lacks, the re-tiering to run, what a recompaction
replaced, the bytes a re-tiering moved, and a re-tiering with nothing to move leaving the
catalog's generation alone."""

from __future__ import annotations

import shutil

import pytest

from skewtape_pipeline.cli.app import main
from skewtape_pipeline.ticks.archive.store.catalog import (
    CatalogStore,
)
from skewtape_pipeline_tests.ticks.archive_builders import write_four_day_csv
from skewtape_pipeline_tests.ticks.conftest import KALSHI_FILE, LOBSTER_FILE, TARDIS_FILE


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    ("source", "suggested"),
    [
        (KALSHI_FILE, "kalshi-trades"),
        (TARDIS_FILE, "tardis-trades"),
        (LOBSTER_FILE, "lobster-messages"),
    ],
    ids=["kalshi", "tardis", "lobster"],
)
def test_compact_ticks_when_raw_file_without_input_format_suggests_the_matching_one(
    tmp_path, capsys, source, suggested
):
    out = tmp_path / "archive"
    code, _, err = run(capsys, "compact-ticks", str(source), "--out", str(out),
                       "--as-of", "2026-11-29")  # fmt: skip
    assert code == 2
    assert err.startswith("error: ") and err.count("\n") == 1
    assert f"pass --input-format {suggested}" in err and "missing column" in err
    assert not out.exists()


def test_compact_ticks_when_lobster_file_renamed_asks_for_symbol_and_session_date_at_once(
    tmp_path, capsys
):
    renamed = shutil.copy(LOBSTER_FILE, tmp_path / "messages.csv")
    code, _, err = run(capsys, "compact-ticks", str(renamed), "--out", str(tmp_path / "a"),
                       "--as-of", "2026-11-29", "--input-format", "lobster-messages")  # fmt: skip
    assert code == 2
    assert "no symbol and no session date" in err
    assert "pass --symbol and --session-date" in err


def test_compact_ticks_when_days_are_old_enough_hints_at_retier_with_its_arguments(
    tmp_path, capsys
):
    source, archive = write_four_day_csv(tmp_path / "ticks.csv"), tmp_path / "archive"
    code, out, err = run(capsys, "compact-ticks", str(source), "--out", str(archive),
                         "--as-of", "2026-01-01", "--price-scale", "2")  # fmt: skip
    assert code == 0, err
    assert out.splitlines()[-1] == (
        "4 symbol-days are old enough for a colder tier (4 WARM) and stay hot until "
        f"re-tiering: skewtape-pipeline retier {archive} --as-of 2026-01-01"
    )
    header = next(line for line in out.splitlines() if line.startswith("symbol "))
    assert header.split()[-2:] == ["written", "with"]  # WARM's codec, not where the day lives
    first = next(line for line in out.splitlines() if line.startswith("KX-"))
    assert first.endswith("(warm)")
    code, out, _ = run(capsys, "compact-ticks", str(source), "--out", str(archive),
                       "--as-of", "2025-12-05", "--price-scale", "2")  # fmt: skip
    assert code == 0 and "stay hot until re-tiering" not in out


def test_compact_ticks_when_the_old_days_were_re_tiered_already_gives_no_retier_hint(
    tmp_path, capsys
):
    source, archive = write_four_day_csv(tmp_path / "ticks.csv"), tmp_path / "archive"
    args = ("compact-ticks", str(source), "--out", str(archive), "--as-of", "2026-01-01",
            "--price-scale", "2")  # fmt: skip
    assert run(capsys, *args)[0] == 0
    assert run(capsys, "retier", str(archive), "--as-of", "2026-01-01")[0] == 0
    code, out, err = run(capsys, *args)  # the same ticks: all four held in their warm copy
    assert code == 0, err
    assert "0 symbol-days changed; 4 already held" in out
    assert "stay hot until re-tiering" not in out


def test_compact_ticks_when_recompacting_says_what_it_replaced(tmp_path, capsys):
    source, archive = write_four_day_csv(tmp_path / "ticks.csv"), tmp_path / "archive"
    args = ("compact-ticks", str(source), "--out", str(archive), "--price-scale", "2")
    code, first, _ = run(capsys, *args, "--as-of", "2025-12-05")
    assert code == 0 and "recompacted" not in first
    assert run(capsys, "retier", str(archive), "--as-of", "2027-01-01")[0] == 0
    corrected(source, "0.50", "0.49")  # every day's first tick
    code, out, err = run(capsys, *args, "--as-of", "2025-12-05")
    assert code == 0, err
    lines = out.splitlines()
    start = lines.index("recompacted 4 symbol-days the archive already held (audited):")
    (cold,) = CatalogStore(archive).read().files
    assert lines[start + 1].startswith("  KX-0 2025-12-01: supersedes its COLD copy in ")
    assert cold in lines[start + 1]
    corrected(source, "0.49", "0.48")
    code, out, _ = run(capsys, *args, "--as-of", "2025-12-05")
    assert "  KX-0 2025-12-01: replaced its hot file (" in out and "sha256 " in out


def test_compact_ticks_when_an_input_holds_part_of_an_archived_day_says_it_replaced_it_whole(
    tmp_path, capsys
):
    source, archive = write_four_day_csv(tmp_path / "ticks.csv"), tmp_path / "archive"
    args = ("compact-ticks", "--out", str(archive), "--price-scale", "2", "--as-of", "2025-12-05")
    assert run(capsys, *args[:1], str(source), *args[1:])[0] == 0
    lines = source.read_text().splitlines()
    next_day = tmp_path / "next.csv"  # 2025-12-04's ticks and one stray tick of 2025-12-03
    next_day.write_text("\n".join([lines[0], lines[7], *lines[10:]]) + "\n")
    code, out, err = run(capsys, *args[:1], str(next_day), *args[1:])
    assert code == 0, err
    summary = out.splitlines()
    start = summary.index("recompacted 1 symbol-days the archive already held (audited):")
    assert summary[start + 1].startswith("  1 of them now hold fewer ticks than before: each ")
    assert "an input holding part of a day replaces the whole day" in summary[start + 1]
    assert summary[start + 2].startswith("  KX-0 2025-12-03: replaced its hot file (3 ticks, ")
    assert summary[start + 2].endswith("; now 1 ticks, 2 fewer than it held")


def corrected(source, old: str, new: str) -> None:
    """``source`` with every price ``old`` replaced by ``new``."""
    source.write_text(source.read_text().replace(f",{old},", f",{new},"))


def test_retier_when_moving_reports_bytes_before_and_after(tmp_path, capsys):
    source, archive = write_four_day_csv(tmp_path / "ticks.csv"), tmp_path / "archive"
    run(capsys, "compact-ticks", str(source), "--out", str(archive), "--as-of", "2025-12-05",
        "--price-scale", "2")  # fmt: skip
    hot_bytes = sum(p.stat().st_size for p in archive.rglob("part-0.parquet"))
    code, out, err = run(capsys, "retier", str(archive), "--as-of", "2027-01-01")
    assert code == 0, err
    (cold,) = CatalogStore(archive).read().files.values()
    assert f"(12 ticks; {hot_bytes} -> {cold.bytes} bytes, " in out
    assert "x smaller); files written 1, removed 4; catalog generation 1" in out


def test_retier_when_nothing_to_move_keeps_the_catalog_generation(tmp_path, capsys):
    source, archive = write_four_day_csv(tmp_path / "ticks.csv"), tmp_path / "archive"
    args = ("compact-ticks", str(source), "--out", str(archive), "--price-scale", "2")
    run(capsys, *args, "--as-of", "2025-12-05")
    run(capsys, "retier", str(archive), "--as-of", "2027-01-01")
    generation = CatalogStore(archive).read().generation
    run(capsys, *args, "--as-of", "2025-12-05")  # the same ticks again: nothing to move
    for _ in range(2):
        code, out, err = run(capsys, "retier", str(archive), "--as-of", "2027-01-01")
        assert code == 0, err
        assert "moved 0 symbol-days" in out
        assert CatalogStore(archive).read().generation == generation
        assert f"catalog generation {generation}" in out
