"""The demo: publishes the sample when absent and materializes its months in process."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from datetime import date
from pathlib import Path

import dagster as dg
import pytest

from skewtape_pipeline.mirror.verify import verify_snapshot
from skewtape_pipeline.orchestration.demo import SYMBOL_WIDTH, fit, main, run_demo
from skewtape_pipeline.ticks.archive.store.layout import partition_file
from skewtape_pipeline.ticks.archive.store.placement import locate
from skewtape_pipeline.ticks.archive.store.tiers import ArchiveTiers
from skewtape_pipeline.ticks.fills.snapshot_fills import today_utc


def test_run_demo_when_root_is_empty_publishes_and_materializes_months_in_order(tmp_path: Path):
    root = tmp_path / "data"
    demo = run_demo(root, fills_per_venue_month=200)
    outcomes = demo.months
    months = [outcome.month for outcome in outcomes]
    assert months[:3] == ["2026-09", "2026-10", "2026-11"]
    assert months == sorted(months)
    assert all(outcome.success and outcome.checks_failed == 0 for outcome in outcomes)
    for outcome in outcomes:
        assert outcome.metadata["snapshot"] == f"$SKEWTAPE_HOME/history/{outcome.month}"
        snapshot = root / "history" / outcome.month
        assert verify_snapshot(snapshot).bundle_id == outcome.metadata["next_bundle_id"]


def test_demo_main_when_rerun_reports_applied_months_unchanged(
    sample_root: Path, capsys: pytest.CaptureFixture[str]
):
    assert main([str(sample_root)]) == 0
    first = capsys.readouterr().out
    assert main([str(sample_root)]) == 0
    second = capsys.readouterr().out
    line_of = {line.split()[0]: line for line in second.splitlines() if line[:4].isdigit()}
    assert "applied" in first
    assert "unchanged" in line_of["2026-10"]
    assert "bootstrap" in line_of["2026-09"]
    assert "hidden" not in first
    assert "hidden" not in second  # the same ticks again: no hot copy hides the consolidated one
    for out in (first, second):  # the ratio-below-1 sentence only over a ratio below 1
        assert ("(ratio below 1)" in out) == any(ratio < 1 for ratio in listed_ratios(out))


def listed_ratios(out: str) -> list[float]:
    """The ratio column of the demo's table of the busiest symbol-days."""
    listed = re.search(r"The (\d+) busiest of (\d+) symbol-days", out)
    assert listed
    rows = out.split(listed[0])[1].split("\n\n")[0].splitlines()[3:]
    return [float(row.split()[5]) for row in rows]


def test_demo_main_when_run_explains_what_it_shows_and_what_to_do_next(
    sample_root: Path, capsys: pytest.CaptureFixture[str]
):
    assert main([str(sample_root)]) == 0
    out = capsys.readouterr().out
    listed = re.search(r"The (\d+) busiest of (\d+) symbol-days", out)
    assert listed and int(listed[1]) <= int(listed[2])
    rows = out.split(listed[0])[1].split("\n\n")[0].splitlines()[3:]
    assert len(rows) == int(listed[1])
    assert all(len(row.split()[0]) <= SYMBOL_WIDTH for row in rows)
    cut = [row.split()[0] for row in rows if row.split()[0].endswith("…")]
    assert all(len(symbol) == SYMBOL_WIDTH for symbol in cut)
    assert "missed" not in out
    assert "archive-warm/" in out and "archive-cold/" in out
    assert "came whole" in out  # the sample's schema-break month
    next_steps = out.split("\nNext:\n")[1]
    assert f"make ui SKEWTAPE_HOME={sample_root}" in next_steps
    assert f"--archive {sample_root / 'archive'}" in next_steps and " query " in next_steps


def test_fit_when_text_is_longer_cuts_it_with_an_ellipsis():
    assert fit("kalshi:ABC", 20) == "kalshi:ABC"
    assert fit("x" * 45, 40) == "x" * 39 + "…"


def test_run_demo_when_months_applied_archives_a_day_each_then_moves_it_hot_warm_cold(
    sample_root: Path,
):
    demo = run_demo(sample_root)
    assert demo.archive_ok and demo.tiers_ok
    archived_months = [day[:7] for day in demo.days]
    with_a_complete_day = [  # the current month has one once its first day is over (UTC)
        o.month for o in demo.months if date.fromisoformat(f"{o.month}-01") < today_utc()
    ]
    assert archived_months == with_a_complete_day  # one day of each, in month order
    assert len(demo.days) >= 2
    assert demo.reports
    archive = sample_root / "archive"
    for report in demo.reports:
        symbol, day = str(report["symbol"]), date.fromisoformat(str(report["date"]))
        assert report["date"] in demo.days
        assert Path(str(report["path"])) == partition_file(archive, symbol, day)
        assert report["round_trip_verified"] is True
        location = locate(
            ArchiveTiers.of(archive), symbol, day
        )  # the hot file's rows moved on to the cold tier
        assert location.tier == "COLD" and location.path.is_file()
        assert location.rows == report["tick_count"]
    archived, warm, cold = demo.stages
    assert [stage.name for stage in demo.stages] == ["archived", "hot -> warm", "warm -> cold"]
    assert set(archived.view) == {"HOT"}
    assert "WARM" in warm.view and "HOT" not in warm.view
    assert set(cold.view) == {"COLD"}
    ticks = sum(int(report["tick_count"]) for report in demo.reports)
    for stage in demo.stages:
        assert sum(t for t, _ in stage.view.values()) == ticks == stage.stats["total_ticks"]
        assert sum(c for _, c in stage.view.values()) == sum(c for _, c in archived.view.values())
        assert sum(int(row["ticks"]) for row in stage.answer) == max(
            int(report["tick_count"]) for report in demo.reports
        )
    assert warm.moved == len(demo.reports)  # every archived day left the hot tier
    # the warm ones moved on to cold (a day already past the warm limit went straight to cold)
    assert cold.moved == warm.stats["warm_symbol_days"] > 0
    assert cold.stats["cold_symbol_days"] == len(demo.reports)


def test_run_demo_records_its_runs_and_materializations_in_the_instance_make_ui_opens(
    sample_root: Path,
):
    demo = run_demo(sample_root)
    home = sample_root / "dagster_home"
    with dg.DagsterInstance.from_config(str(home)) as instance:
        runs = instance.get_runs()
        materialized = instance.get_materialized_partitions(dg.AssetKey("history_snapshot"))
        archived = instance.get_materialized_partitions(dg.AssetKey("tick_archive"))
        venues = instance.get_dynamic_partitions("venues")
    assert {outcome.month for outcome in demo.months} <= materialized
    assert len(archived) >= len(demo.days) and venues
    assert {run.job_name for run in runs} == {"apply_month", "archive_ticks", "retier_ticks"}
    assert all(run.status == dg.DagsterRunStatus.SUCCESS for run in runs)


REPO = Path(__file__).resolve().parents[2]
HOME_SECRET = "Pw7sEcReT4q"
HOME_URL = f"s3://KEY:{HOME_SECRET}@bucket/x"


def test_demo_main_when_the_root_is_a_url_exits_2_in_one_line_creating_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    monkeypatch.chdir(tmp_path)
    assert main([HOME_URL]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == (
        "error: root 's3://***@bucket/x': s3:// locations are not supported here; expected a "
        "local folder (the data root)\n"
    )
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("target", ["instance", "demo"])
def test_make_when_skewtape_home_is_a_url_refuses_naming_it_creating_nothing(
    tmp_path: Path, target: str
):
    make = shutil.which("make")
    assert make, "make is needed to run the Makefile's targets"
    venv = Path(sys.executable).parent.parent
    completed = subprocess.run(
        [make, "-s", "-f", str(REPO / "Makefile"), "-o", f"{venv}/.installed", target,
         f"VENV={venv}", f"SKEWTAPE_HOME={HOME_URL}"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert completed.returncode != 0
    first = completed.stderr.splitlines()[0]
    assert first == (
        "error: SKEWTAPE_HOME is a URL (scheme://...); expected a local folder (the data root)"
    )
    assert HOME_SECRET not in completed.stdout + completed.stderr
    assert list(tmp_path.iterdir()) == []  # no folder named after the scheme
