"""Builders for the orchestration tests: definitions over a copy of the sample chain, and a
Dagster instance in memory.

The sample chain itself (``published_sample``, ``sample_root``, ...) comes from the package's
root conftest; here it is applied month by month through the ``apply_month`` job.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable, Iterator
from pathlib import Path

import dagster as dg
import pytest

from skewtape_pipeline.orchestration.definitions import build_definitions
from skewtape_pipeline.orchestration.shared.resources import SkewtapeHome
from skewtape_pipeline.orchestration.ticks.partitions import VENUES, venue_keys


@pytest.fixture
def skewtape(sample_root: Path) -> SkewtapeHome:
    return SkewtapeHome(root=str(sample_root))


@pytest.fixture
def instance() -> Iterator[dg.DagsterInstance]:
    """An ephemeral Dagster instance (runs, events and partitions in memory) for one test."""
    with dg.DagsterInstance.ephemeral() as ephemeral:
        yield ephemeral


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
def applied_chain_once(published_sample: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data root whose first three months are applied (history/2026-09..11), once a session."""
    root = tmp_path_factory.mktemp("applied") / "data"
    shutil.copytree(published_sample, root, symlinks=True)
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


def register_venues(instance: dg.DagsterInstance, symbols: Iterable[str]) -> list[str]:
    """Add the venue keys of ``symbols`` (``<venue>:<market>``) that ``instance`` does not know
    yet to the ``venues`` dimension, as the venues sensor's request would; returns them."""
    known = set(instance.get_dynamic_partitions(VENUES))
    new = [key for key in venue_keys(symbols) if key not in known]
    if new:
        instance.add_dynamic_partitions(VENUES, new)
    return new
