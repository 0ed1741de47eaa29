"""Builders for the orchestration tests: a published sample chain copied into ``tmp_path``.

The sample is published once per session (small fills) and copied for each test that changes it.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import dagster as dg
import pytest

from skewtape_pipeline.definitions import build_definitions
from skewtape_pipeline.orchestration.resources import SkewtapeHome
from skewtape_pipeline.sample.publisher import publish_sample

SAMPLE_FIRST_MONTH = "2026-09"
SAMPLE_MONTHS = 4
SAMPLE_FILLS = 500
"""Fills per venue and month: small, so a session publishes in a second or two."""


@pytest.fixture(scope="session")
def published(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(data root with the first full snapshot and the deltas, every month's full snapshot)."""
    base = tmp_path_factory.mktemp("sample")
    root, full = base / "data", base / "full"
    publish_sample(
        root,
        first_month=SAMPLE_FIRST_MONTH,
        months=SAMPLE_MONTHS,
        fills_per_venue_month=SAMPLE_FILLS,
        snapshots_dir=full,
    )
    return root, full


@pytest.fixture(scope="session")
def published_sample(published: tuple[Path, Path]) -> Path:
    """The published data root (never modified; copy it with ``sample_root``)."""
    return published[0]


@pytest.fixture(scope="session")
def published_full_snapshots(published: tuple[Path, Path]) -> Path:
    """``<month>/``: every month's full snapshot as published (never modified)."""
    return published[1]


@pytest.fixture
def sample_root(published_sample: Path, tmp_path: Path) -> Path:
    """A private copy of the published sample that a test may change."""
    root = tmp_path / "data"
    shutil.copytree(published_sample, root, symlinks=True)
    return root


@pytest.fixture
def skewtape(sample_root: Path) -> SkewtapeHome:
    return SkewtapeHome(root=str(sample_root))


@pytest.fixture
def definitions(skewtape: SkewtapeHome) -> dg.Definitions:
    return build_definitions(skewtape)


def run_month(
    defs: dg.Definitions, month: str, instance: dg.DagsterInstance
) -> dg.ExecuteInProcessResult:
    """Run the ``apply_month`` job of ``defs`` for ``month`` in process; never raises on failure."""
    job = defs.resolve_job_def("apply_month")
    return job.execute_in_process(partition_key=month, instance=instance, raise_on_error=False)


@pytest.fixture(scope="session")
def applied_chain_once(
    published: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """A data root whose first three months are applied (history/2026-09..11), once a session."""
    root = tmp_path_factory.mktemp("applied") / "data"
    shutil.copytree(published[0], root, symlinks=True)
    defs = build_definitions(SkewtapeHome(root=str(root)))
    with dg.DagsterInstance.ephemeral() as instance:
        for month in ("2026-09", "2026-10", "2026-11"):
            assert run_month(defs, month, instance).success, month
    return root


@pytest.fixture
def applied_chain(applied_chain_once: Path, tmp_path: Path) -> Path:
    """A private copy of the applied chain (hard links kept as copies) that a test may change."""
    root = tmp_path / "applied"
    shutil.copytree(applied_chain_once, root, symlinks=True)
    return root
