"""The command line archives a mirror's fills as the tick archive asset does: for the same
venue-days of a mirror built from the sample publisher through ``sync``, ``compact-ticks`` of a
fills file and ``archive-month`` give the asset's ticks, symbols, sides and scales."""

from __future__ import annotations

import shutil
from datetime import date
from pathlib import Path

import dagster as dg
import duckdb
import pytest

from skewtape_pipeline.cli.app import main
from skewtape_pipeline.orchestration.definitions import build_definitions
from skewtape_pipeline.orchestration.shared.resources import SkewtapeHome
from skewtape_pipeline.orchestration.ticks.venues import register_applied_venues
from skewtape_pipeline_tests.orchestration.ticks.test_archive_asset import day_range_tags

FIRST, LAST = date(2026, 10, 1), date(2026, 10, 2)
"""The venue-days compared: every venue on these days."""


@pytest.fixture(scope="module")
def synced(published_sample: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A mirror of the sample publisher made by ``sync`` (every published month applied)."""
    root = tmp_path_factory.mktemp("synced") / "data"
    assert main(["sync", str(published_sample), "--root", str(root), "--json"]) == 0
    return root


def asset_archive(mirror: Path, tmp_path: Path) -> Path:
    """The archive the tick archive asset builds of FIRST..LAST over every venue (one run)."""
    root = tmp_path / "asset"
    shutil.copytree(mirror, root)
    defs = build_definitions(SkewtapeHome(root=str(root)))
    with dg.DagsterInstance.ephemeral() as instance:
        register_applied_venues(instance, root / "history")
        job = defs.resolve_job_def("archive_ticks")
        tags = day_range_tags(instance, FIRST.isoformat(), LAST.isoformat())
        assert job.execute_in_process(instance=instance, tags=tags).success
    return root / "archive"


def ticks_of(archive: Path, *, days: tuple[date, date] = (FIRST, LAST)) -> list[tuple]:
    """Every tick of ``archive`` on ``days`` as DuckDB reads it (symbol, ns, price and
    quantity as text with their scale's digits, side)."""
    return duckdb.sql(
        "SELECT symbol, epoch_ns(ts), price::VARCHAR, quantity::VARCHAR, side::VARCHAR "
        "FROM read_parquet($glob, hive_partitioning = true) "
        "WHERE date BETWEEN $first AND $last ORDER BY ALL",
        params={"glob": f"{archive}/symbol=*/**/*.parquet", "first": days[0], "last": days[1]},
    ).fetchall()


def test_archive_month_when_run_on_a_synced_mirror_archives_what_the_asset_archives(
    synced: Path, tmp_path: Path, capsys
):
    expected = ticks_of(asset_archive(synced, tmp_path))
    mirror = tmp_path / "cli"
    shutil.copytree(synced, mirror)
    argv = ["archive-month", "2026-10", "--root", str(mirror), "--as-of", "2026-10-03"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    venues = len({p.parent.name for p in (mirror / "history").glob("*/fills/*/2026-10.parquet")})
    assert f"2026-10: {2 * venues} venue-days" in out
    assert expected and ticks_of(mirror / "archive") == expected


def test_compact_ticks_when_given_a_fills_file_archives_what_the_asset_archives(
    synced: Path, tmp_path: Path, capsys
):
    expected = ticks_of(asset_archive(synced, tmp_path))
    out = tmp_path / "cli-archive"
    files = sorted((synced / "history").glob("*/fills/*/2026-10.parquet"))
    newest = {p.parent.name: p for p in files}
    for fills in newest.values():  # each venue's file from the newest snapshot holding it
        assert main(["compact-ticks", str(fills), "--out", str(out), "--as-of", "2026-12-06"]) == 0
    capsys.readouterr()
    assert expected and ticks_of(out) == expected
