"""A refusal names what is wrong: ``remove-days`` on an archive whose catalog is gone blames
the catalog (and names the repair), not the day; a query's refused statement is named as it
was written (INSTALL is not "a LOAD statement")."""

from __future__ import annotations

import pytest

from skewtape_pipeline.cli.app import main
from skewtape_pipeline.ticks.archive.store.layout import CATALOG_FILE
from skewtape_pipeline_tests.ticks.archive_builders import write_four_day_csv


def run(capsys, *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    return code, capsys.readouterr().err


@pytest.fixture
def retiered(tmp_path, capsys):
    """An archive whose four days are consolidated in its warm tier (a catalog to lose)."""
    source = write_four_day_csv(tmp_path / "ticks.csv")
    archive = tmp_path / "archive"
    assert run(capsys, "compact-ticks", str(source), "--out", str(archive), "--as-of",
               "2025-12-30", "--price-scale", "2")[0] == 0  # fmt: skip
    assert run(capsys, "retier", str(archive), "--as-of", "2025-12-30")[0] == 0
    return archive


def test_remove_days_when_the_catalog_is_gone_blames_the_catalog_not_the_day(retiered, capsys):
    (retiered / CATALOG_FILE).unlink()
    code, err = run(capsys, "remove-days", str(retiered), "--day", "KX-0", "2025-12-01")

    assert code == 2
    assert f"{CATALOG_FILE}: the catalog is missing" in err and "rebuild-catalog" in err
    assert "not in the archive" not in err


def test_remove_days_when_the_day_is_unknown_still_names_the_day(retiered, capsys):
    code, err = run(capsys, "remove-days", str(retiered), "--day", "KX-0", "2025-12-09")
    assert code == 2 and "KX-0 2025-12-09: not in the archive" in err


@pytest.mark.parametrize(
    ("sql", "named"),
    [("INSTALL httpfs", "an INSTALL statement"),
     ("force install httpfs", "a FORCE INSTALL statement"),
     ("LOAD httpfs", "a LOAD statement"),
     ("ATTACH 'other.db'", "an ATTACH statement")],
)  # fmt: skip
def test_query_when_a_statement_is_refused_names_it_as_written(retiered, capsys, sql, named):
    code, err = run(capsys, "query", sql, "--archive", str(retiered))
    assert code == 2 and f"{named}; expected a SELECT" in err
