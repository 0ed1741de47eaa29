"""What a month's run decides to do from the data root."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from skewtape_pipeline.errors import ChainError
from skewtape_pipeline.mirror.months import plan_month


def plan(root: Path, month: str, previous: str):
    return plan_month(root / "history", root / "deltas", month, previous)


def test_plan_month_when_only_full_snapshot_exists_is_bootstrap(sample_root: Path):
    decided = plan(sample_root, "2026-09", "2026-08")
    assert decided.kind == "bootstrap"
    assert decided.snapshot == sample_root / "history" / "2026-09"


def test_plan_month_when_parent_and_delta_exist_is_apply(sample_root: Path):
    decided = plan(sample_root, "2026-10", "2026-09")
    assert (decided.kind, decided.parent, decided.delta) == (
        "apply",
        sample_root / "history" / "2026-09",
        sample_root / "deltas" / "2026-10",
    )


def test_plan_month_when_previous_month_never_applied_names_it(sample_root: Path):
    with pytest.raises(ChainError, match="materialize 2026-10 first"):
        plan(sample_root, "2026-11", "2026-10")


def test_plan_month_when_neither_delta_nor_snapshot_exists_refuses(sample_root: Path):
    shutil.rmtree(sample_root / "deltas" / "2026-10")
    with pytest.raises(ChainError, match="no delta"):
        plan(sample_root, "2026-10", "2026-09")
