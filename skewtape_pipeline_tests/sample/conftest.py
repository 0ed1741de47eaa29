"""A small sample chain published once per test session (with its oracle snapshots)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from skewtape_pipeline.sample.publisher import SampleSummary, publish_sample

SMALL_FILLS = 1_500
"""Trades per venue-month of the shared sample: enough to show the shapes, fast to build."""


@dataclass(frozen=True)
class Published:
    root: Path
    oracle: Path
    summary: SampleSummary


@pytest.fixture(scope="session")
def published(tmp_path_factory: pytest.TempPathFactory) -> Published:
    base = tmp_path_factory.mktemp("published-sample")
    root, oracle = base / "root", base / "oracle"
    summary = publish_sample(root, fills_per_venue_month=SMALL_FILLS, snapshots_dir=oracle)
    return Published(root=root, oracle=oracle, summary=summary)
