"""What the UI shows names paths under the data root as ``$SKEWTAPE_HOME/...``
(``SkewtapeHome.shown``, ``locations.home_relative``): never the machine's folders, the root
matched whole, a path outside it kept."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from skewtape_pipeline.errors import ConfigError, StorageError
from skewtape_pipeline.locations import home_relative
from skewtape_pipeline.orchestration.shared.refusals import refusal_as_failure
from skewtape_pipeline.orchestration.shared.resources import SkewtapeHome


def test_home_relative_when_a_text_names_paths_under_the_root_names_them_from_it():
    text = (
        "/mnt/a/history/2026-12/fills/k/2026-12.parquet: cannot be read; "
        "no delta '/mnt/a/deltas/2026-12' and no full snapshot /mnt/a. (see /mnt/a)"
    )
    assert home_relative(text, "/mnt/a") == (
        "$SKEWTAPE_HOME/history/2026-12/fills/k/2026-12.parquet: cannot be read; "
        "no delta '$SKEWTAPE_HOME/deltas/2026-12' and no full snapshot $SKEWTAPE_HOME. "
        "(see $SKEWTAPE_HOME)"
    )


def test_home_relative_when_a_path_only_starts_like_the_root_keeps_it_whole():
    kept = "/mnt/ab/x: gone; /mnt/a.bak/y; /srv/mnt/a/z; /mnt/abc; mnt/a/q; /tmp/other"
    assert home_relative(kept, "/mnt/a") == kept
    assert home_relative(kept, "/") == kept  # an empty root names nothing


def test_skewtape_home_shown_when_the_root_is_a_link_names_both_spellings(tmp_path: Path):
    real = tmp_path / "disk" / "data"
    real.mkdir(parents=True)
    (tmp_path / "data").symlink_to(real)
    skewtape = SkewtapeHome(root=str(tmp_path / "data"))
    text = f"{tmp_path}/data/history/2026-10: x; {real}/deltas/2026-11: y; {tmp_path}/disk/z"
    assert skewtape.shown(text) == (
        f"$SKEWTAPE_HOME/history/2026-10: x; $SKEWTAPE_HOME/deltas/2026-11: y; {tmp_path}/disk/z"
    )


def test_skewtape_home_shown_when_the_root_is_invalid_keeps_the_text():
    text = "SkewtapeHome.root (SKEWTAPE_HOME) 's3://***@bucket/x': not supported"
    assert SkewtapeHome(root="s3://key:secret@bucket/x").shown(text) == text
    assert SkewtapeHome(root=" ").shown(text) == text


def test_refusal_as_failure_when_an_error_names_paths_fails_naming_them_from_the_data_root(
    tmp_path: Path,
):
    """The failure the UI shows names paths under the data root from it and keeps one outside
    it whole (nothing lost); the reason in the metadata says the same."""
    root, elsewhere = tmp_path / "data", tmp_path / "elsewhere"
    skewtape = SkewtapeHome(root=str(root))
    with pytest.raises(dg.Failure) as raised, refusal_as_failure("op", skewtape):
        raise ConfigError(f"{root}/history/2026-10: holds {elsewhere}/x, expected {root}")
    said = f"$SKEWTAPE_HOME/history/2026-10: holds {elsewhere}/x, expected $SKEWTAPE_HOME"
    assert raised.value.description == f"op refused (ConfigError): {said}"
    assert raised.value.metadata["reason"].value == said
    assert raised.value.metadata["refused_by"].value == "ConfigError"
    assert not raised.value.allow_retries and raised.value.__cause__ is None


def test_refusal_as_failure_when_an_os_error_of_ours_fails_naming_paths_from_the_data_root(
    tmp_path: Path,
):
    """A full disk or the network (an OS error of ours) fails the op as retryable as the error
    itself, its text naming paths from the data root too."""
    skewtape = SkewtapeHome(root=str(tmp_path / "data"))
    with pytest.raises(dg.Failure) as raised, refusal_as_failure("op", skewtape):
        raise StorageError(f"{tmp_path}/data/archive/x.parquet: No space left on device")
    said = "$SKEWTAPE_HOME/archive/x.parquet: No space left on device"
    assert raised.value.description == f"op failed (StorageError): {said}"
    assert raised.value.metadata["failed_by"].value == "StorageError"
    assert raised.value.allow_retries


def test_refusal_as_failure_when_another_error_is_raised_lets_it_pass(tmp_path: Path):
    with pytest.raises(KeyError), refusal_as_failure("op", SkewtapeHome(root=str(tmp_path))):
        raise KeyError(str(tmp_path))
