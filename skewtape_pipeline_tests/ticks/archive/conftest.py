"""Archives the lifecycle tests share: one of hot files only, one spanning every tier."""

from __future__ import annotations

from pathlib import Path

import pytest

from skewtape_pipeline.ticks.archive.handle import Archive
from skewtape_pipeline_tests.ticks.archive_builders import POLICY, STAGE_1, build_archive


@pytest.fixture
def hot_only(tmp_path: Path, no_fsync) -> Path:
    """An archive of hot files only (:func:`build_archive` at STAGE_1, nothing re-tiered yet);
    returns its root."""
    return build_archive(tmp_path, as_of=STAGE_1)


@pytest.fixture
def tiered(hot_only: Path) -> Path:
    """An archive spanning hot, warm and cold (``hot_only`` re-tiered at STAGE_1 with
    :data:`POLICY`, audited beside the root); returns its root."""
    Archive(hot_only, policy=POLICY).retier(as_of=STAGE_1)
    return hot_only
