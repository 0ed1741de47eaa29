"""What a month's run decides to do from the data root, and which months it holds applied."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from skewtape_pipeline.cli.app import main
from skewtape_pipeline.errors import ChainError, UnreadableFileError, UnreadableFolderError
from skewtape_pipeline.mirror.catchup import catch_up
from skewtape_pipeline.mirror.format import MANIFEST
from skewtape_pipeline.mirror.months import applied_months, plan_month
from skewtape_pipeline_tests.test_unreadable_input import as_nobody, shared_folder


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


# --- the months applied: a folder that cannot be read is named, never taken for no month ------


def test_applied_months_when_folders_hold_manifests_lists_those_months_only(tmp_path: Path):
    history = tmp_path / "history"
    for month in ("2026-10", "2026-09", "2026-11"):
        (history / month).mkdir(parents=True)
    for month in ("2026-09", "2026-11"):
        (history / month / MANIFEST).write_text("{}")
    (history / "2026-12").write_text("a file, not a month folder")
    (history / ".2026-12.run.partial").mkdir()  # an apply's staging folder
    assert applied_months(history) == ["2026-09", "2026-11"]
    assert applied_months(tmp_path / "missing") == []
    assert applied_months(history / "2026-12") == []  # a file given for the folder of months


def test_applied_months_when_a_month_folder_cannot_be_read_raises_naming_it():
    """A month folder the pipeline's user may not enter was dropped (Python 3.14's
    ``Path.is_file`` hides every OS error) or failed as a bare PermissionError naming its
    manifest: an error of ours naming the folder and the reason, an OS error."""
    with shared_folder() as folder:
        history = folder / "history"
        for month in ("2026-09", "2026-10"):
            (history / month).mkdir(parents=True)
            (history / month / MANIFEST).write_text("{}")
        (history / "2026-10").chmod(0)
        with as_nobody(), pytest.raises(UnreadableFolderError) as raised:
            applied_months(history)
        (history / "2026-10").chmod(0o755)
    assert str(raised.value).startswith(
        f"{history / '2026-10'}: cannot be read (Permission denied)"
    )
    assert isinstance(raised.value, OSError)


def test_applied_months_when_the_history_folder_cannot_be_listed_raises_naming_it():
    with shared_folder() as folder:
        history = folder / "history"
        (history / "2026-09").mkdir(parents=True)
        history.chmod(0o311)  # entered, not listed
        with as_nobody(), pytest.raises(UnreadableFolderError, match="Permission denied") as raised:
            applied_months(history)
        history.chmod(0o755)
    assert str(raised.value).startswith(f"{history}: cannot be read")


def test_applied_months_when_a_month_folder_is_a_link_loop_raises_naming_it(tmp_path: Path):
    """Root reads every folder; a link loop fails to be read for any user (``ELOOP``, which
    ``Path.is_file`` hides on every Python version)."""
    history = tmp_path / "history"
    (history / "2026-09").mkdir(parents=True)
    (history / "2026-09" / MANIFEST).write_text("{}")
    (history / "2026-10").symlink_to("2026-10")
    with pytest.raises(UnreadableFolderError, match="Too many levels of symbolic links"):
        applied_months(history)


def test_applied_months_when_a_manifest_is_a_link_to_nothing_raises_naming_it(tmp_path: Path):
    """A dangling link in place of a month's manifest was taken for no manifest: the month
    for one not applied (a catch-up would apply its delta again over it)."""
    history = tmp_path / "history"
    for month in ("2026-09", "2026-10"):
        (history / month).mkdir(parents=True)
    (history / "2026-09" / MANIFEST).write_text("{}")
    (history / "2026-10" / MANIFEST).symlink_to("gone.json")
    said = rf"^{history / '2026-10' / MANIFEST}: cannot be read \(No such file or directory"
    with pytest.raises(UnreadableFileError, match=said):
        applied_months(history)


def test_catch_up_when_a_month_folder_is_a_link_loop_refuses_naming_it_applying_nothing(
    sample_root: Path, capsys
):
    """A month taken for one not applied would have its delta applied again (over the folder
    that cannot be read): the catch-up names the folder and applies nothing, exit 1."""
    history, deltas = sample_root / "history", sample_root / "deltas"
    (history / "2026-10").symlink_to("2026-10")
    before = sorted(p.name for p in history.iterdir())
    with pytest.raises(UnreadableFolderError, match=r"2026-10: cannot be read \(Too many levels"):
        catch_up(history, deltas)
    assert main(["catch-up", str(history), str(deltas)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: {history / '2026-10'}: cannot be read (Too many levels")
    assert sorted(p.name for p in history.iterdir()) == before


def test_catch_up_when_the_only_snapshot_cannot_be_read_names_it_not_a_bare_os_error(
    sample_root: Path,
):
    with shared_folder() as folder:
        root = folder / "data"
        shutil.copytree(sample_root, root, symlinks=True)
        snapshot = root / "history" / "2026-09"
        snapshot.chmod(0)
        with as_nobody(), pytest.raises(UnreadableFolderError) as raised:
            catch_up(root / "history", root / "deltas")
        snapshot.chmod(0o755)
    assert str(raised.value).startswith(f"{snapshot}: cannot be read (Permission denied)")
