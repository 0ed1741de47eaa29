"""The demo: publishes the sample when absent and materializes its months in process."""

from __future__ import annotations

from pathlib import Path

import pytest

from skewtape_pipeline.demo import main, run_demo
from skewtape_pipeline.mirror.verify import verify_snapshot


def test_run_demo_when_root_is_empty_publishes_and_materializes_months_in_order(tmp_path: Path):
    root = tmp_path / "data"
    demo = run_demo(root, fills_per_venue_month=200)
    outcomes = demo.months
    months = [outcome.month for outcome in outcomes]
    assert months[:3] == ["2026-09", "2026-10", "2026-11"]
    assert months == sorted(months)
    assert all(outcome.success and outcome.checks_failed == 0 for outcome in outcomes)
    for outcome in outcomes:
        snapshot = Path(str(outcome.metadata["snapshot"]))
        assert snapshot == root.absolute() / "history" / outcome.month
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


def test_run_demo_when_months_applied_archives_one_day_per_month_with_reports(
    sample_root: Path,
):
    demo = run_demo(sample_root)
    assert demo.archive_ok
    assert [day[:7] for day in demo.days] == ["2026-09", "2026-10", "2026-11"][: len(demo.days)]
    assert len(demo.days) >= 2
    assert demo.reports
    for report in demo.reports:
        assert report["date"] in demo.days
        assert Path(str(report["path"])).is_file()
        assert report["round_trip_verified"] is True
