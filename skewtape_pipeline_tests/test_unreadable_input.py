"""An input that exists but cannot be read (a permission refused: the command runs as an
unprivileged user) is an OS error, exit 1, one line naming the file; a missing input stays a
refusal, exit 2."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
import pytest

from skewtape_pipeline.cli.app import main
from skewtape_pipeline_tests.ticks.archive_builders import write_four_day_csv

NOBODY = 65534


@contextlib.contextmanager
def shared_folder() -> Iterator[Path]:
    """A folder every user may enter and write (the test's own folder is root's alone; the
    tests run as root, as CI does, and act as another user for the one command)."""
    folder = Path(tempfile.mkdtemp())
    folder.chmod(0o777)
    try:
        yield folder
    finally:
        shutil.rmtree(folder)


@contextlib.contextmanager
def as_nobody() -> Iterator[None]:
    os.seteuid(NOBODY)
    try:
        yield
    finally:
        os.seteuid(0)


def compact(source: Path, out: Path) -> list[str]:
    return ["compact-ticks", str(source), "--out", str(out), "--as-of", "2025-12-05",
            "--price-scale", "2"]  # fmt: skip


@pytest.mark.parametrize("kind", ["csv", "parquet"])
def test_compact_ticks_when_the_input_cannot_be_read_exits_1_naming_it(kind, capsys):
    with shared_folder() as folder:
        readable = write_four_day_csv(folder / "ticks.csv")
        if kind == "parquet":
            pq.write_table(pa_csv.read_csv(readable), folder / "ticks.parquet")
            readable = folder / "ticks.parquet"
        assert main(compact(readable, folder / "warm-up")) == 0  # every module imported
        locked = folder / f"locked.{kind}"
        shutil.copyfile(readable, locked)
        locked.chmod(0)
        capsys.readouterr()
        with as_nobody():
            code = main(compact(locked, folder / "archive"))
        _, err = capsys.readouterr()
        assert code == 1, err
        assert err.startswith("error: [Errno 13] cannot read the input") and str(locked) in err
        assert err.count("\n") == 1
        assert main(compact(folder / "missing.csv", folder / "archive")) == 2
