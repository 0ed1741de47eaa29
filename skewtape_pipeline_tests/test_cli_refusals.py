"""Refused commands write nothing and say so in one line; OS errors exit 1 naming the file."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest

from skewtape_pipeline.cli.app import main
from skewtape_pipeline.mirror import merge, staging
from skewtape_pipeline.ticks.archive.store import consolidate, layout
from skewtape_pipeline.ticks.encode import parquet_file
from skewtape_pipeline_tests.conftest import SAMPLE_FIRST_MONTH
from skewtape_pipeline_tests.scale_out.servers import free_port
from skewtape_pipeline_tests.ticks.archive_builders import write_four_day_csv

NEXT_MONTH = "2026-10"


def _listing(folder: Path) -> list[str]:
    """Every path below ``folder`` (hidden ones included), and ``folder``'s own existence."""
    if not folder.exists():
        return ["<absent>"]
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _assert_one_error_line(err: str, *named: object) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    for name in named:
        assert str(name) in lines[0], (name, err)


def test_cli_catch_up_when_the_folder_holds_no_history_exits_2_and_writes_nothing(
    sample_root, capsys
):
    empty = sample_root / "not-a-history"
    empty.mkdir()
    code, _, err = run(capsys, "catch-up", str(empty), str(sample_root / "deltas"), "--no-audit")
    assert code == 2
    _assert_one_error_line(err, empty)
    assert _listing(empty) == []


def test_cli_catch_up_when_a_month_folder_is_not_a_snapshot_exits_2_and_writes_nothing(
    sample_root, capsys
):
    history = sample_root / "elsewhere"
    (history / SAMPLE_FIRST_MONTH).mkdir(parents=True)
    code, _, err = run(capsys, "catch-up", str(history), str(sample_root / "deltas"))
    assert code == 2
    _assert_one_error_line(err, history)
    assert _listing(history) == [SAMPLE_FIRST_MONTH]
    assert not (sample_root / "audit.jsonl").exists()


@pytest.mark.parametrize("in_place", [False, True])
def test_cli_catch_up_when_the_deltas_folder_is_missing_exits_2_naming_it_and_writes_nothing(
    sample_root, capsys, in_place
):
    history, nowhere = sample_root / "history", sample_root / "nowhere"
    before = _listing(sample_root)
    argv = ["catch-up", str(history), str(nowhere), *(["--in-place"] if in_place else [])]
    code, out, err = run(capsys, *argv)
    assert (code, out) == (2, "")
    _assert_one_error_line(err, nowhere)
    assert _listing(sample_root) == before


def test_cli_catch_up_when_the_history_folder_is_missing_exits_2_and_creates_nothing(
    sample_root, capsys
):
    missing = sample_root / "gone" / "history"
    code, _, err = run(capsys, "catch-up", str(missing), str(sample_root / "deltas"))
    assert code == 2
    _assert_one_error_line(err, missing)
    assert not (sample_root / "gone").exists()


def test_cli_apply_delta_when_the_snapshot_is_missing_exits_2_and_creates_nothing(
    sample_root, capsys
):
    missing = sample_root / "gone" / SAMPLE_FIRST_MONTH
    delta = sample_root / "deltas" / NEXT_MONTH
    code, _, err = run(capsys, "apply-delta", str(missing), str(delta))
    assert code == 2
    _assert_one_error_line(err, missing)
    assert not (sample_root / "gone").exists()


def test_cli_apply_delta_when_the_delta_is_missing_exits_2_and_writes_nothing(sample_root, capsys):
    snapshot = sample_root / "history" / SAMPLE_FIRST_MONTH
    missing = sample_root / "deltas" / "2027-01"
    before = _listing(sample_root)
    for into in ([], ["--into", str(sample_root / "history" / NEXT_MONTH)]):
        code, _, err = run(capsys, "apply-delta", str(snapshot), str(missing), *into)
        assert code == 2
        _assert_one_error_line(err, missing)
    assert _listing(sample_root) == before


@pytest.mark.parametrize(
    "argv",
    [
        ("verify", "{missing}"),
        ("diff", "{missing}", "{history}/" + SAMPLE_FIRST_MONTH, "{root}/out"),
        ("diff", "{history}/" + SAMPLE_FIRST_MONTH, "{missing}", "{root}/out"),
        ("audit-verify", "{missing}"),
    ],
)
def test_cli_mirror_command_when_a_path_is_missing_exits_2_naming_it_and_writes_nothing(
    sample_root, capsys, argv
):
    names = {"missing": sample_root / "gone", "history": sample_root / "history"}
    names["root"] = sample_root
    before = _listing(sample_root)
    code, _, err = run(capsys, *(arg.format(**names) for arg in argv))
    assert code == 2
    _assert_one_error_line(err, names["missing"])
    assert _listing(sample_root) == before


def _full(*args, **kwargs):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_cli_apply_delta_when_copying_hits_a_full_disk_exits_1_naming_the_file(
    sample_root, capsys, monkeypatch
):
    snapshot = sample_root / "history" / SAMPLE_FIRST_MONTH
    monkeypatch.setattr(staging, "copy_hashing", _full)  # the copy that hashes as it writes
    delta = str(sample_root / "deltas" / NEXT_MONTH)
    code, _, err = run(capsys, "apply-delta", str(snapshot), delta, "--copy", "--no-audit")
    assert code == 1
    _assert_one_error_line(err, "no space left on the device while applying", snapshot)


def test_cli_apply_delta_when_duckdb_cannot_write_the_merged_table_exits_1_naming_it(
    sample_root, capsys, monkeypatch
):
    snapshot = sample_root / "history" / SAMPLE_FIRST_MONTH
    query = merge.merge_query

    def unwritable(table, changes, out, keys, **kwargs):  # DuckDB's own IO error, as on ENOSPC
        return query(table, changes, sample_root / "no-such-dir" / out.name, keys, **kwargs)

    monkeypatch.setattr(merge, "merge_query", unwritable)
    delta = str(sample_root / "deltas" / NEXT_MONTH)
    code, _, err = run(capsys, "apply-delta", str(snapshot), delta, "--no-audit")
    assert code == 1
    _assert_one_error_line(err, snapshot, ".parquet", "IO Error")


SECRET = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYzEXAMPLEKEY"


@pytest.mark.parametrize(
    "root",
    [
        f"s3://AKIAEXAMPLE:{SECRET}@tiers/warm",
        f"s3://{SECRET}@tiers/warm",
        f"s3://tiers/warm?endpoint_override=AKIAEXAMPLE:{SECRET}@127.0.0.1:9",
        f"s3://tiers/warm?secret_key={SECRET}",
        f"s3://tiers/warm#{SECRET}",
    ],
)
def test_cli_when_an_s3_root_carries_a_secret_every_archive_command_exits_2_never_showing_it(
    tmp_path, capsys, caplog, root
):
    source = write_four_day_csv(tmp_path / "ticks.csv")
    archive = tmp_path / "archive"
    assert run(capsys, "compact-ticks", str(source), "--out", str(archive),
               "--as-of", "2025-12-05", "--price-scale", "2")[0] == 0  # fmt: skip
    policy = tmp_path / "tiers.toml"
    policy.write_text(f'[warm]\nroot = "{root}"\n', encoding="utf-8")
    before = _listing(tmp_path)
    commands = [
        ["compact-ticks", str(source), "--out", str(archive), "--as-of", "2025-12-05"],
        ["retier", str(archive), "--as-of", "2027-01-01"],
        ["remove-days", str(archive), "--day", "KX-0", "2025-12-01"],
        ["query", "SELECT count(*) FROM ticks", "--archive", str(archive)],
        ["verify-archive", str(archive), "--full"],
        ["rebuild-catalog", str(archive)],
    ]
    for argv in commands:
        code, out, err = run(capsys, *argv, "--tier-policy", str(policy), "--json")
        assert code == 2, (argv, err)
        _assert_one_error_line(err, policy, "[warm]")
        assert SECRET not in out + err + caplog.text, argv
    assert _listing(tmp_path) == before
    written = [p for p in tmp_path.rglob("*") if p.is_file() and p != policy]
    assert not [p for p in written if SECRET.encode() in p.read_bytes()]


def _pyarrow_full(*args, **kwargs):
    """What pyarrow raises when the disk fills under a Parquet writer: errno 28, no file."""
    raise OSError(errno.ENOSPC, "Error writing bytes to file. Detail: [errno 28] No space left")


def _empty_folders(root: Path) -> list[str]:
    return sorted(str(p) for p in root.rglob("*") if p.is_dir() and not any(p.iterdir()))


def test_cli_compact_ticks_when_the_disk_fills_exits_1_naming_the_file_leaving_no_staging(
    tmp_path, capsys, monkeypatch
):
    source = write_four_day_csv(tmp_path / "ticks.csv")
    archive = tmp_path / "archive"
    monkeypatch.setattr(parquet_file, "_write_parquet", _pyarrow_full)
    argv = ["compact-ticks", str(source), "--out", str(archive), "--as-of", "2025-12-05"]
    code, _, err = run(capsys, *argv, "--price-scale", "2")
    assert code == 1
    _assert_one_error_line(
        err,
        "no space left on the device while compacting",
        archive / "symbol=KX-0",
        "part-0.parquet",
    )
    assert not (archive / layout.STAGING_FOLDER).exists()
    assert _empty_folders(tmp_path) == []


def test_cli_retier_when_the_disk_fills_exits_1_naming_the_file_leaving_no_empty_folder(
    tmp_path, capsys, monkeypatch
):
    source = write_four_day_csv(tmp_path / "ticks.csv")
    archive = tmp_path / "archive"
    argv = ["compact-ticks", str(source), "--out", str(archive), "--as-of", "2025-12-05"]
    assert run(capsys, *argv, "--price-scale", "2")[0] == 0
    monkeypatch.setattr(consolidate.ConsolidatedWriter, "write", _pyarrow_full)
    code, _, err = run(capsys, "retier", str(archive), "--as-of", "2027-01-01")
    assert code == 1
    _assert_one_error_line(
        err, f"{archive}: no space left on the device while re-tiering it, writing",
        tmp_path / "archive-cold" / "year=2025", "run the command again",
    )  # fmt: skip
    assert _empty_folders(tmp_path) == [str(archive / layout.STAGING_FOLDER)]


# --- the obvious mistakes: each refused naming the real mistake, nothing written ------------


def _refused(capsys, root: Path, *argv: str) -> str:
    """Run ``argv`` in ``root``; assert exit 2, one error line and nothing written; the line."""
    before = _listing(root)
    cwd = Path.cwd()
    os.chdir(root)
    try:
        code, out, err = run(capsys, *argv)
    finally:
        os.chdir(cwd)
    assert code == 2 and out == "", (code, out, err)
    _assert_one_error_line(err)
    assert _listing(root) == before
    return err.strip()


def test_cli_catch_up_when_the_folders_are_swapped_says_so(sample_root, capsys):
    err = _refused(capsys, sample_root, "catch-up", "deltas", "history")
    assert err == (
        "error: deltas is a folder of <YYYY-MM>/ deltas and history is a history folder of "
        "<YYYY-MM>/ snapshots: the two are swapped (the history folder comes first)"
    )


def test_cli_catch_up_when_given_one_months_delta_names_the_deltas_folder(sample_root, capsys):
    err = _refused(capsys, sample_root, "catch-up", "history", f"deltas/{NEXT_MONTH}")
    assert err == (
        f"error: deltas/{NEXT_MONTH} is a delta (its manifest.json names a parent and a next "
        "snapshot), not a deltas folder; give the folder that holds it, deltas"
    )


def test_cli_catch_up_when_given_the_history_twice_says_so(sample_root, capsys):
    err = _refused(capsys, sample_root, "catch-up", "history", "history")
    assert err.startswith("error: history is given as both the history and the deltas folder;")


def test_cli_verify_when_given_a_delta_says_it_is_not_a_snapshot(sample_root, capsys):
    err = _refused(capsys, sample_root, "verify", f"deltas/{NEXT_MONTH}")
    assert err == (
        f"error: deltas/{NEXT_MONTH} is a delta (its manifest.json names a parent and a next "
        "snapshot), not a snapshot"
    )


def test_cli_verify_when_given_the_history_folder_names_a_month_in_it(sample_root, capsys):
    err = _refused(capsys, sample_root, "verify", "history")
    assert err == (
        "error: history is a history folder of <YYYY-MM>/ snapshots, not a snapshot; name one "
        f"month's folder in it, e.g. history/{SAMPLE_FIRST_MONTH}"
    )


@pytest.mark.parametrize("delta_as", ["NEXT", "PARENT"])
def test_cli_diff_when_given_a_delta_says_it_is_not_a_snapshot_creating_no_out(
    sample_root, capsys, delta_as
):
    month, delta = f"history/{SAMPLE_FIRST_MONTH}", f"deltas/{NEXT_MONTH}"
    folders = [month, delta] if delta_as == "NEXT" else [delta, month]
    err = _refused(capsys, sample_root, "diff", *folders, "out")
    assert err == (
        f"error: deltas/{NEXT_MONTH} is a delta (its manifest.json names a parent and a next "
        "snapshot), not a snapshot"
    )


def test_cli_diff_when_given_the_history_folder_names_a_month_in_it(sample_root, capsys):
    err = _refused(capsys, sample_root, "diff", "history", f"history/{SAMPLE_FIRST_MONTH}", "out")
    assert err == (
        "error: history is a history folder of <YYYY-MM>/ snapshots, not a snapshot; name one "
        f"month's folder in it, e.g. history/{SAMPLE_FIRST_MONTH}"
    )


@pytest.mark.parametrize("holds", [[], ["notes.txt"]])
def test_cli_verify_when_given_a_folder_that_is_no_snapshot_writes_nothing_into_it(
    sample_root, capsys, holds
):
    (sample_root / "mistyped").mkdir()
    for name in holds:
        (sample_root / "mistyped" / name).write_text("not a snapshot")
    err = _refused(capsys, sample_root, "verify", "mistyped")
    assert err == (
        "error: mistyped does not verify: it holds neither manifest.json nor CHECKSUMS.sha256, "
        "so it is no snapshot; expected a snapshot folder, one month's folder of a history "
        "folder (history/<YYYY-MM>)"
    )


def test_cli_audit_verify_when_given_a_folder_names_the_log_in_it(sample_root, capsys):
    (sample_root / "audit.jsonl").write_bytes(b"")
    err = _refused(capsys, sample_root, "audit-verify", ".")
    assert err == "error: .: is a folder; expected the audit log file, e.g. audit.jsonl"


def test_cli_apply_delta_when_given_the_history_folder_names_a_month_in_it(sample_root, capsys):
    argv = ("apply-delta", "history", f"deltas/{NEXT_MONTH}", "--into", "X")
    err = _refused(capsys, sample_root, *argv)
    assert err == (
        "error: history is a history folder of <YYYY-MM>/ snapshots, not a snapshot; name one "
        f"month's folder in it, e.g. history/{SAMPLE_FIRST_MONTH}"
    )


def test_cli_apply_delta_when_the_arguments_are_swapped_says_so(sample_root, capsys):
    argv = ("apply-delta", f"deltas/{NEXT_MONTH}", f"history/{SAMPLE_FIRST_MONTH}")
    err = _refused(capsys, sample_root, *argv, "--into", "X")
    assert err == (
        f"error: deltas/{NEXT_MONTH} is a delta (its manifest.json names a parent and a next "
        f"snapshot) and history/{SAMPLE_FIRST_MONTH} is a snapshot: the snapshot and the delta "
        "are swapped (the snapshot comes first)"
    )


def test_cli_apply_delta_when_given_the_deltas_folder_names_a_month_in_it(sample_root, capsys):
    argv = ("apply-delta", f"history/{SAMPLE_FIRST_MONTH}", "deltas", "--into", "X")
    err = _refused(capsys, sample_root, *argv)
    assert err == (
        "error: deltas is a folder of <YYYY-MM>/ deltas, not a delta; name one month's folder "
        f"in it, e.g. deltas/{NEXT_MONTH}"
    )


def test_cli_apply_delta_when_into_is_below_missing_folders_creates_nothing(sample_root, capsys):
    argv = ("apply-delta", f"history/{SAMPLE_FIRST_MONTH}", f"deltas/{NEXT_MONTH}")
    err = _refused(capsys, sample_root, *argv, "--into", "a/b/c")
    assert err.startswith("error: into=a/b/c: its folder a/b does not exist; a versioned apply ")
    assert "never the folders above it" in err


@pytest.mark.parametrize("command", ["apply-delta", "catch-up", "retier", "diff"])
def test_cli_when_the_output_is_below_missing_folders_creates_nothing(sample_root, capsys, command):
    month, delta = f"history/{SAMPLE_FIRST_MONTH}", f"deltas/{NEXT_MONTH}"
    argv = {
        "apply-delta": ["apply-delta", month, delta, "--audit-log", "a/b/audit.jsonl"],
        "catch-up": ["catch-up", "history", "deltas", "--audit-log", "a/b/audit.jsonl"],
        "retier": ["retier", "archive", "--as-of", "2026-12-01", "--audit-log", "a/b/x.jsonl"],
        "diff": ["diff", month, month, "a/b/delta"],
    }[command]
    err = _refused(capsys, sample_root, *argv)
    assert "a/b" in err and "does not exist" in err


def test_cli_sample_when_the_roots_folder_is_missing_creates_nothing(tmp_path, capsys):
    missing = tmp_path / "nonexistent" / "dir"
    code, _, err = run(capsys, "sample", str(missing))
    assert code == 2
    _assert_one_error_line(err, f"{missing}: its folder {missing.parent} does not exist")
    assert not missing.parent.exists()


def test_cli_sample_when_keep_snapshots_folder_is_missing_creates_nothing(tmp_path, capsys):
    missing, root = tmp_path / "nonexistent" / "snapshots", tmp_path / "publisher"
    code, _, err = run(capsys, "sample", str(root), "--keep-snapshots", str(missing))
    assert code == 2
    _assert_one_error_line(err, f"--keep-snapshots {missing}: its folder {missing.parent}")
    assert not missing.parent.exists() and not root.exists()


def test_cli_sync_when_the_roots_folder_is_missing_creates_nothing(
    published_sample, tmp_path, capsys
):
    missing = tmp_path / "nonexistent" / "dir"
    code, _, err = run(capsys, "sync", str(published_sample), "--root", str(missing))
    assert code == 2
    _assert_one_error_line(err, f"--root {missing}: its folder {missing.parent} does not exist")
    assert not missing.parent.exists()


def test_cli_fetch_dry_run_when_the_root_is_empty_says_which_command_starts_it(
    published_sample, tmp_path, capsys
):
    root = tmp_path / "root"
    code, _, err = run(capsys, "fetch", str(published_sample), "--root", str(root), "--dry-run")
    assert code == 2 and f"`skewtape-pipeline sync SOURCE --root {root}`" in err
    assert "fetch_snapshot" not in err


MISTYPED = {
    "verify": (["verify", "snap", "--fulll"], "--fulll"),
    "retier": (["retier", "A", "--as-of", "2026-11-01", "--tier-polcy", "p.toml"], "p.toml"),
}


@pytest.mark.parametrize("command", sorted(MISTYPED))
def test_cli_when_an_option_is_mistyped_answers_with_the_subcommands_usage(command, capsys):
    argv, unknown = MISTYPED[command]
    with pytest.raises(SystemExit) as exited:
        main(argv)
    err = capsys.readouterr().err
    assert exited.value.code == 2
    assert err.startswith(f"usage: skewtape-pipeline {command} ")
    assert f"skewtape-pipeline {command}: error: unrecognized arguments: " in err
    assert unknown in err


@pytest.mark.parametrize("command", ["verify", "diff", "audit-verify"])
def test_cli_help_when_a_command_takes_positional_arguments_explains_each(command, capsys):
    with pytest.raises(SystemExit):
        main([command, "--help"])
    section = capsys.readouterr().out.split("positional arguments:\n")[1].split("\n\n")[0]
    assert section and all(len(line.split(maxsplit=1)) == 2 for line in section.splitlines())


@pytest.mark.parametrize(
    "made",
    ["missing", "a file", "a folder of other files", "an empty folder", "dot files only",
     "an empty staging folder only"],
)  # fmt: skip
def test_cli_verify_archive_when_the_folder_is_no_archive_exits_2_naming_it(tmp_path, capsys, made):
    root = tmp_path / "archiv"
    if made == "a file":
        root.write_text("not an archive")
    elif made == "a folder of other files":
        root.mkdir()
        (root / "notes.txt").write_text("hello")
    elif made != "missing":
        root.mkdir()
        if made == "dot files only":
            (root / ".hidden").write_text("")
        if made == "an empty staging folder only":
            (root / layout.STAGING_FOLDER).mkdir()
    before = _listing(tmp_path)
    for full in ([], ["--full"]):
        code, out, err = run(capsys, "verify-archive", str(root), *full)
        assert code == 2, (made, out, err)
        assert str(root) in err and "expected a tick archive root" in err
        assert "verified 0 files" not in out
    assert _listing(tmp_path) == before


def _compacted(tmp_path: Path, capsys) -> Path:
    """An archive of four days (``compact-ticks``), its warm tier made by re-tiering."""
    root = tmp_path / "archive"
    csv = write_four_day_csv(tmp_path / "ticks.csv")
    assert main(["compact-ticks", str(csv), "--out", str(root), "--as-of", "2025-12-05",
                 "--price-scale", "2"]) == 0  # fmt: skip
    assert main(["retier", str(root), "--as-of", "2026-01-20"]) == 0
    capsys.readouterr()
    return root


@pytest.mark.parametrize("where", ["the archive", "its warm tier", "the data root", "missing"])
def test_cli_rebuild_catalog_when_not_given_an_archive_root_exits_2_changing_nothing(
    tmp_path, capsys, where
):
    root = _compacted(tmp_path, capsys)
    given = {
        "the archive": root / "symbol=KX-0",
        "its warm tier": tmp_path / "archive-warm",
        "the data root": tmp_path,
        "missing": tmp_path / "nosuch",
    }[where]
    before = _listing(tmp_path)
    code, _, err = run(capsys, "rebuild-catalog", str(given))
    assert code == 2
    _assert_one_error_line(err, given)
    assert _listing(tmp_path) == before


@pytest.mark.parametrize("where", ["warm tier", "folder of other files", "mirror history"])
def test_cli_compact_ticks_when_out_is_no_archive_root_exits_2_changing_nothing(
    tmp_path, capsys, where
):
    root = _compacted(tmp_path, capsys)
    for folder in ("notes", "history/2025-12"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "todo.txt").write_text("x")
    out = {
        "warm tier": tmp_path / "archive-warm",
        "folder of other files": tmp_path / "notes",
        "mirror history": tmp_path / "history",
    }[where]
    before = _listing(tmp_path)
    csv = write_four_day_csv(root.parent / "ticks.csv")
    code, _, err = run(capsys, "compact-ticks", str(csv), "--out", str(out),
                       "--as-of", "2025-12-05", "--price-scale", "2")  # fmt: skip
    assert code == 2
    _assert_one_error_line(err, out)
    assert _listing(tmp_path) == before


@pytest.mark.parametrize(
    ("where", "inside"),
    [
        ("a new folder in its warm tier", "the WARM tier root"),
        ("an empty folder in its warm tier", "the WARM tier root"),
        ("its cold tier root, not made yet", "the COLD tier root"),
        ("a new folder in the archive root", "an archive root"),
    ],
)
def test_cli_compact_ticks_when_out_lies_inside_another_archive_exits_2_changing_nothing(
    tmp_path, capsys, where, inside
):
    root = _compacted(tmp_path, capsys)
    (tmp_path / "archive-warm" / "empty").mkdir()
    out = {
        "a new folder in its warm tier": tmp_path / "archive-warm" / "x",
        "an empty folder in its warm tier": tmp_path / "archive-warm" / "empty",
        "its cold tier root, not made yet": tmp_path / "archive-cold" / "y" / "z",
        "a new folder in the archive root": root / "x",
    }[where]
    before = _listing(tmp_path)
    csv = write_four_day_csv(tmp_path / "ticks.csv")
    code, _, err = run(capsys, "compact-ticks", str(csv), "--out", str(out),
                       "--as-of", "2025-12-05", "--price-scale", "2")  # fmt: skip
    assert code == 2
    _assert_one_error_line(err, out, inside)
    assert _listing(tmp_path) == before
    for argv in (["query", "SELECT count(*) FROM ticks", "--archive", str(root)],
                 ["retier", str(root), "--as-of", "2026-01-20"],
                 ["rebuild-catalog", str(root)]):  # fmt: skip
        assert run(capsys, *argv)[0] == 0, argv


def test_cli_compact_ticks_when_out_lies_inside_a_policys_warm_root_holding_files_exits_2(
    tmp_path, capsys
):
    policy = tmp_path / "policy.toml"
    policy.write_text('[warm]\nroot = "store/warm"\n')
    root, csv = tmp_path / "archive", write_four_day_csv(tmp_path / "ticks.csv")
    assert main(["compact-ticks", str(csv), "--out", str(root), "--as-of", "2025-12-05",
                 "--price-scale", "2", "--tier-policy", str(policy)]) == 0  # fmt: skip
    assert main(["retier", str(root), "--as-of", "2026-01-20"]) == 0
    out = tmp_path / "store" / "warm" / "x"
    before = _listing(tmp_path)
    code, _, err = run(capsys, "compact-ticks", str(csv), "--out", str(out),
                       "--as-of", "2025-12-05", "--price-scale", "2")  # fmt: skip
    assert code == 2
    _assert_one_error_line(err, out, tmp_path / "store" / "warm")
    assert _listing(tmp_path) == before


def test_cli_compact_ticks_when_out_is_an_empty_folder_or_a_new_one_makes_an_archive(
    tmp_path, capsys
):
    csv = write_four_day_csv(tmp_path / "ticks.csv")
    (tmp_path / "empty").mkdir()
    (tmp_path / "left" / layout.STAGING_FOLDER).mkdir(parents=True)  # a refused run's
    for out in (
        tmp_path / "empty",
        tmp_path / "left",
        tmp_path / "new",
        tmp_path / "data" / "archive",
    ):
        argv = ["--out", str(out), "--as-of", "2025-12-05", "--price-scale", "2", "--wait", "5"]
        code, _, err = run(capsys, "compact-ticks", str(csv), *argv)
        assert code == 0, err
        assert (out / "_skewtape_archive.json").is_file()


@pytest.mark.parametrize(
    "argv",
    [
        ["compact-ticks", "{csv}", "--out", "{tmp}/a", "--as-of", "20251205"],
        ["compact-ticks", "{csv}", "--out", "{tmp}/a", "--as-of", "2025-12-05",
         "--memory-limit", "inf"],
        ["compact-ticks", "{csv}", "--out", "{tmp}/a", "--as-of", "2025-12-05",
         "--memory-limit", "1e999G"],
        ["compact-ticks", "{csv}", "--out", "{tmp}/a", "--as-of", "2025-12-05",
         "--memory-limit", "nanG"],
        ["compact-ticks", "{csv}", "--out", "{tmp}/a\udcff", "--as-of", "2025-12-05"],
        ["archive-month", "2026-13", "--root", "{tmp}", "--as-of", "2027-01-01"],
    ],
)  # fmt: skip
def test_cli_when_a_value_is_malformed_exits_2_with_one_line_changing_nothing(
    tmp_path, capsys, argv
):
    csv = write_four_day_csv(tmp_path / "ticks.csv")
    given = [a.format(csv=csv, tmp=tmp_path) for a in argv]
    before = _listing(tmp_path)
    code, _, err = run(capsys, *given)
    assert code == 2
    _assert_one_error_line(err)
    assert "Traceback" not in err
    assert _listing(tmp_path) == before


@pytest.mark.parametrize("broken", ["missing bucket", "unreachable endpoint"])
def test_cli_archive_month_when_a_tier_on_s3_cannot_be_used_exits_2_leaving_no_archive(
    sample_root, capsys, s3_env, broken
):
    if broken == "missing bucket":
        warm = s3_env.uri("warm", bucket="no-such-bucket")
    else:
        warm = s3_env.uri("warm", port=free_port())
    policy = sample_root.parent / "tiers.toml"
    policy.write_text(f'[warm]\nroot = "{warm}"\n')
    before = _listing(sample_root)
    code, _, err = run(capsys, "archive-month", SAMPLE_FIRST_MONTH, "--root", str(sample_root),
                       "--as-of", "2027-01-01", "--tier-policy", str(policy))  # fmt: skip
    assert code == 2
    _assert_one_error_line(err, warm.partition("?")[0])
    assert _listing(sample_root) == before  # no archive folder, no staging folder
    archive = sample_root / "archive"
    code, _, err = run(capsys, "query", "SELECT count(*) FROM ticks", "--archive", str(archive))
    assert code == 2
    _assert_one_error_line(err, archive, "expected a tick archive root")


@pytest.mark.parametrize(
    "home", [f"s3://AKIAEXAMPLE:{SECRET}@bucket/x", "http://host/x"], ids=["s3", "http"]
)
@pytest.mark.parametrize(
    "argv",
    [["archive-month", "2026-12"], ["fetch", "{tmp}/publisher", "--snapshot", "2026-09"],
     ["sync", "{tmp}/publisher"]],
    ids=["archive-month", "fetch", "sync"],
)  # fmt: skip
def test_cli_when_skewtape_home_is_a_url_exits_2_naming_the_variable_creating_nothing(
    tmp_path, capsys, monkeypatch, home, argv
):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SKEWTAPE_HOME", home)
    code, out, err = run(capsys, *[a.format(tmp=tmp_path) for a in argv])
    assert (code, out) == (2, "")
    scheme = home.partition(":")[0]
    _assert_one_error_line(
        err, f"SKEWTAPE_HOME '{scheme}://", "expected a local folder (the data root)"
    )
    assert SECRET not in err
    assert _listing(tmp_path) == []  # no folder named after the scheme


def test_cli_archive_month_when_the_month_is_malformed_names_its_argument(tmp_path, capsys):
    code, _, err = run(capsys, "archive-month", "2026-13", "--root", str(tmp_path))
    assert code == 2 and "MONTH '2026-13'" in err and "--snapshot" not in err


WAITING = {
    "retier": ["retier", "a", "--as-of", "2025-12-05"],
    "compact-ticks": ["compact-ticks", "t.csv", "--out", "a", "--as-of", "2025-12-05"],
    "apply-delta": ["apply-delta", "snapshot", "delta"],
}


@pytest.mark.parametrize("seconds", ["nan", "inf", "-1", "soon"])
@pytest.mark.parametrize("command", sorted(WAITING))
def test_cli_wait_when_not_a_finite_number_of_seconds_is_a_usage_error(capsys, command, seconds):
    with pytest.raises(SystemExit) as exited:
        main([*WAITING[command], f"--wait={seconds}"])
    assert exited.value.code == 2
    assert f"--wait: '{seconds}'" in capsys.readouterr().err


def test_cli_verify_archive_when_files_are_damaged_lists_every_finding(tmp_path, capsys):
    root, csv = tmp_path / "archive", tmp_path / "ticks.csv"
    day_ns, start = 86_400 * 10**9, 1_764_547_200 * 10**9  # 2025-12-01
    rows = [f"{start + d * day_ns + i},0.5{i},1,BUY,KX" for d in range(8) for i in range(3)]
    csv.write_text("timestamp_nanos,price,quantity,side,symbol\n" + "\n".join(rows) + "\n")
    assert main(["compact-ticks", str(csv), "--out", str(root), "--as-of", "2025-12-09",
                 "--price-scale", "2"]) == 0  # fmt: skip
    damaged = sorted(root.rglob("part-*.parquet"))
    assert len(damaged) == 8  # more than the error line shows
    for path in damaged:
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0xFF
        path.write_bytes(bytes(data))
    capsys.readouterr()
    code, out, err = run(capsys, "verify-archive", str(root))
    assert code == 2
    findings = out.splitlines()
    _assert_one_error_line(err, f"(+{len(findings) - 5} more)")
    for path in damaged:  # the error line names five findings; the output lists every one
        assert any(str(path) in line for line in findings), (path, findings)
    code, out, err = run(capsys, "verify-archive", str(root), "--json")
    assert code == 2
    assert sorted(json.loads(out)["problems"]) == sorted(findings)


@pytest.mark.parametrize(
    ("column", "value"), [("quantity", str(2**64 + 1)), ("price", str(2**128 + 5) + ".5")]
)
def test_cli_compact_ticks_when_a_value_is_wider_than_18_digits_exits_2_and_writes_nothing(
    tmp_path, capsys, column, value
):
    """Arrow's casts wrap such text (2**64 + 1 became 1, 2**128 + 5 became 5): never stored."""
    row = {"price": "1.5", "quantity": "10"} | {column: value}
    source = tmp_path / "wide.csv"
    source.write_text(
        "timestamp_nanos,price,quantity,side,symbol\n"
        f"1700000000000000000,1.5,10,BUY,AAA\n"
        f"1700000000000000001,{row['price']},{row['quantity']},SELL,AAA\n"
    )
    archive = tmp_path / "archive"
    argv = ["compact-ticks", str(source), "--out", str(archive), "--as-of", "2025-12-05"]
    code, _, err = run(capsys, *argv)
    assert code == 2
    _assert_one_error_line(err, "row 1", f"field {column}", value[:20], "needs more than 18 digits")
    assert _listing(archive) == ["<absent>"]


@pytest.mark.parametrize("log", ["the input file", "a folder"])
def test_cli_compact_ticks_when_the_audit_log_is_none_exits_2_before_publishing_a_day(
    tmp_path, capsys, log
):
    source = tmp_path / "two.csv"
    source.write_text(
        "timestamp_nanos,price,quantity,side,symbol\n"
        "1700000000000000000,1.5,10,BUY,AAA\n1700100000000000000,1.5,10,BUY,BBB\n"
    )
    audit = source if log == "the input file" else tmp_path / "logs"
    if log == "a folder":
        audit.mkdir()
    archive = tmp_path / "archive"
    argv = ["compact-ticks", str(source), "--out", str(archive), "--as-of", "2025-12-05"]
    code, _, err = run(capsys, *argv, "--audit-log", str(audit))
    assert code == 2
    _assert_one_error_line(err, audit)
    assert _listing(archive) == ["<absent>"]


def _control_free(text: str) -> bool:
    """Whether ``text`` holds no control character (C0, DEL, C1) a terminal would obey."""
    return not [c for c in text if ord(c) < 32 or 127 <= ord(c) < 160]


def test_cli_compact_ticks_when_a_csv_line_holds_terminal_controls_prints_them_escaped(
    tmp_path, capsys
):
    source = tmp_path / "esc.csv"
    source.write_bytes(
        b"timestamp_nanos,price,quantity,side,symbol\n"
        b"1700000000000000000,1.5,10,BUY,\x1b]0;pwned\x07\x1b[2J,extra\n"
    )
    code, out, err = run(capsys, "compact-ticks", str(source), "--out", str(tmp_path / "a"),
                         "--as-of", "2025-07-01")  # fmt: skip
    assert (code, out) == (2, "")
    _assert_one_error_line(err, source, "BUY,\\x1b]0;pwned\\x07\\x1b[2J,extra")
    assert _control_free(err.rstrip("\n"))
    assert _listing(tmp_path) == ["esc.csv"]


def test_cli_compact_ticks_when_lobster_messages_is_given_parquet_prints_no_raw_bytes(
    tmp_path, capsys
):
    import pyarrow as pa
    import pyarrow.parquet as pq

    source = tmp_path / "AMZN_2012-06-21_34200000_57600000_message_1.parquet"
    pq.write_table(pa.table({"time": ["\x1b[2J\x07"] * 3, "type": [4, 4, 4]}), source)
    code, out, err = run(capsys, "compact-ticks", str(source), "--out", str(tmp_path / "a"),
                         "--as-of", "2025-07-01", "--input-format", "lobster-messages",
                         "--symbol", "AMZN", "--session-date", "2012-06-21")  # fmt: skip
    assert (code, out) == (2, "")
    _assert_one_error_line(err, source, "cannot read as CSV", "PAR1\\x15")
    assert _control_free(err.rstrip("\n"))
    assert _listing(tmp_path) == [source.name]
