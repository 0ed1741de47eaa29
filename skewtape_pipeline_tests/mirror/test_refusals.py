"""Every refusal of the delta applier: a typed error naming the entry, and nothing written."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pytest

from skewtape_pipeline.errors import (
    PATH_CHARS,
    ChangeFileError,
    ChecksumMismatchError,
    ManifestError,
    MissingPathError,
    SkewtapeError,
    SnapshotMismatchError,
    UnsafePathError,
)
from skewtape_pipeline.hashing import format_checksums, parse_checksums
from skewtape_pipeline.mirror.apply import apply_delta
from skewtape_pipeline.mirror.format import CHECKSUMS, MANIFEST
from skewtape_pipeline.mirror.staging import staging_folders
from skewtape_pipeline_tests.conftest import copy_snapshot, make_snapshot
from skewtape_pipeline_tests.mirror.apply_support import (
    ADDED,
    REPLACED,
    assert_same_snapshot,
    edit_manifest,
    entry_index,
    make_case,
    null_first_key,
    replace_file,
    reseal_delta,
    rewrite_change_file,
    tree_state,
)


@pytest.fixture
def case(tmp_path):
    return make_case(tmp_path)


def assert_refused(case, error: type[SkewtapeError], *names: str, versioned: bool = False):
    """Apply (in place on a copy, or versioned), expect ``error`` naming ``names``, and check
    that neither the snapshot nor the delta changed and no target folder appeared."""
    mirror = copy_snapshot(case.parent, case.root / "mirror")
    into = case.root / "history" / "2026-12" if versioned else None
    before, delta_before = tree_state(mirror), tree_state(case.delta)
    with pytest.raises(error) as info:
        apply_delta(mirror, case.delta, into=into)
    for name in names:
        assert name in str(info.value)
    assert tree_state(mirror) == before
    assert tree_state(case.delta) == delta_before
    if into is not None:
        assert not into.exists() and staging_folders(into) == []
    return info.value


def set_entry(case, rel: str, **fields):
    index = entry_index(case.delta, rel)

    def edit(data):
        data["files"][index].update(fields)

    edit_manifest(case.delta, edit)
    return f"files[{index}]"


@pytest.mark.parametrize(
    "bad_path", ["../escape.md", "/etc/passwd", "C:/evil.md", "fills\\kalshi.md", "fills//x.md"]
)
def test_apply_delta_when_path_unsafe_raises_unsafe_path_error(case, bad_path):
    field = set_entry(case, REPLACED, path=bad_path)
    assert_refused(case, UnsafePathError, field, repr(bad_path))


def test_apply_delta_when_source_path_unsafe_raises_unsafe_path_error(case):
    field = set_entry(case, REPLACED, source="../outside.md")
    assert_refused(case, UnsafePathError, f"{field}.source")


def test_apply_delta_when_delta_holds_symlink_raises_unsafe_path_error(case):
    source = case.delta / "snapshot" / REPLACED
    real = case.root / "elsewhere.md"
    real.write_bytes(source.read_bytes())
    source.unlink()
    source.symlink_to(real)
    assert_refused(case, UnsafePathError, "snapshot/README.md", "symbolic link")


def test_apply_delta_when_written_path_in_snapshot_is_symlink_raises_unsafe_path_error(case):
    mirror = copy_snapshot(case.parent, case.root / "mirror")
    outside = case.root / "outside-kalshi"
    (mirror / "fills" / "kalshi").rename(outside)
    (mirror / "fills" / "kalshi").symlink_to(outside, target_is_directory=True)
    before = tree_state(mirror), tree_state(outside)
    with pytest.raises(UnsafePathError) as info:
        apply_delta(mirror, case.delta)
    assert "fills/kalshi" in str(info.value) and "symbolic link" in str(info.value)
    assert (tree_state(mirror), tree_state(outside)) == before


def test_apply_delta_when_path_listed_twice_raises_manifest_error(case):
    def duplicate(data):
        data["files"].insert(0, dict(data["files"][entry_index(case.delta, REPLACED)]))

    edit_manifest(case.delta, duplicate)
    assert_refused(case, ManifestError, "appears twice", REPLACED)


def test_apply_delta_when_op_unknown_raises_manifest_error(case):
    field = set_entry(case, REPLACED, op="move")
    assert_refused(case, ManifestError, f"{field}.op", "'move'")


def test_apply_delta_when_change_of_table_without_key_raises_manifest_error(case):
    field = set_entry(case, ADDED[0], op="change")
    assert_refused(case, ManifestError, f"{field}.path", "no known key")


def test_apply_delta_when_tail_out_of_order_raises_manifest_error(case):
    def swap(data):
        data["files"][-2], data["files"][-1] = data["files"][-1], data["files"][-2]

    edit_manifest(case.delta, swap)
    assert_refused(case, ManifestError, "last two entries", CHECKSUMS, MANIFEST)


def test_apply_delta_when_change_file_lacks_op_column_raises_change_file_error(case):
    rewrite_change_file(case.delta, "markets.parquet", lambda t: t.rename_columns(["kind", "row"]))
    assert_refused(case, ChangeFileError, "changes/markets.parquet", "'op'")


def test_apply_delta_when_change_file_lacks_row_column_raises_change_file_error(case):
    rewrite_change_file(case.delta, "markets.parquet", lambda t: t.select(["op"]))
    assert_refused(case, ChangeFileError, "changes/markets.parquet", "'row'")


def test_apply_delta_when_change_op_unknown_raises_change_file_error(case):
    def bad_op(table: pa.Table) -> pa.Table:
        ops = table.column("op").to_pylist()
        ops[-1] = "merge"
        return table.set_column(0, "op", pa.array(ops))

    rewrite_change_file(case.delta, "markets.parquet", bad_op)
    assert_refused(case, ChangeFileError, "changes/markets.parquet", "'merge'")


def test_apply_delta_when_change_key_null_raises_change_file_error(case):
    rewrite_change_file(case.delta, "markets.parquet", lambda t: null_first_key(t, "market_id"))
    assert_refused(case, ChangeFileError, "changes/markets.parquet", "row 0", "null")


def test_apply_delta_when_change_row_lacks_key_column_raises_change_file_error(case):
    def drop_key(table: pa.Table) -> pa.Table:
        rows = table.column("row").combine_chunks()
        kept = [rows.type.field(i) for i in range(rows.type.num_fields)]
        kept = [f for f in kept if f.name != "market_id"]
        struct = pa.StructArray.from_arrays([rows.field(f.name) for f in kept], fields=kept)
        return table.set_column(1, "row", struct)

    rewrite_change_file(case.delta, "markets.parquet", drop_key)
    assert_refused(case, ChangeFileError, "changes/markets.parquet", "market_id")


def test_apply_delta_when_change_key_repeated_raises_change_file_error(case):
    rewrite_change_file(case.delta, "markets.parquet", lambda t: pa.concat_tables([t, t]))
    assert_refused(case, ChangeFileError, "changes/markets.parquet", "appears in rows")


def test_apply_delta_when_file_differs_from_checksums_raises_checksum_mismatch(case):
    source = case.delta / "snapshot" / REPLACED
    replace_file(source, b"tampered\n")
    set_entry(case, REPLACED, sha256="0" * 64)  # reseals CHECKSUMS with the tampered file...
    checksums = case.delta / CHECKSUMS
    listed = parse_checksums(checksums.read_bytes(), source=checksums)
    listed[f"snapshot/{REPLACED}"] = "1" * 64  # ...then its line is made to disagree
    replace_file(checksums, format_checksums(listed))
    assert_refused(case, ChecksumMismatchError, f"snapshot/{REPLACED}", CHECKSUMS)


def test_apply_delta_when_file_differs_from_manifest_raises_checksum_mismatch(case):
    field = set_entry(case, REPLACED, sha256="0" * 64)
    assert_refused(case, ChecksumMismatchError, f"{field}.sha256", "0" * 64)


def test_apply_delta_when_checksums_omit_manifest_raises_checksum_mismatch(case):
    checksums = case.delta / CHECKSUMS
    listed = parse_checksums(checksums.read_bytes(), source=checksums)
    del listed[MANIFEST]
    replace_file(checksums, format_checksums(listed))
    assert_refused(case, ChecksumMismatchError, "does not list", MANIFEST)


@pytest.mark.parametrize("rel", ["snapshot/" + "y" * 300, "snapshot/" + "/".join(["y" * 200] * 30)])
def test_apply_delta_when_checksums_list_a_path_no_file_system_holds_refuses_it(case, rel):
    checksums = case.delta / CHECKSUMS
    listed = parse_checksums(checksums.read_bytes(), source=checksums)
    listed[rel] = "0" * 64
    replace_file(checksums, format_checksums(listed))
    error = assert_refused(case, UnsafePathError, "refusing the path", "this file system allows")
    assert error.path == checksums


def test_apply_delta_when_manifest_edited_after_sealing_raises_checksum_mismatch(case):
    raw = (case.delta / MANIFEST).read_bytes()
    replace_file(
        case.delta / MANIFEST, raw.replace(b'"schema_break": false', b'"schema_break": true')
    )
    assert_refused(case, ChecksumMismatchError, MANIFEST, "hashes to")


def test_apply_delta_when_source_missing_raises_manifest_error(case):
    (case.delta / "snapshot" / ADDED[0]).unlink()
    index = entry_index(case.delta, ADDED[0])
    assert_refused(case, ManifestError, f"files[{index}].source", "does not exist")


def test_apply_delta_when_listed_file_missing_raises_manifest_error(case):
    extra = case.delta / "snapshot" / "NOTES.md"
    extra.write_text("listed, then lost")
    reseal_delta(case.delta)
    extra.unlink()
    assert_refused(case, ManifestError, "snapshot/NOTES.md", "does not exist")


def test_apply_delta_when_snapshot_holds_neither_raises_snapshot_mismatch(case):
    make_snapshot(case.root, month="2025-01", folder_name="unrelated")
    other = case.root / "unrelated"
    before = tree_state(other)
    with pytest.raises(SnapshotMismatchError) as info:
        apply_delta(other, case.delta)
    assert "skewtape-history-2026-11" in str(info.value)
    assert "skewtape-history-2026-12" in str(info.value)
    assert tree_state(other) == before


def test_apply_delta_when_refused_in_versioned_mode_creates_nothing(case):
    field = set_entry(case, REPLACED, sha256="0" * 64)
    assert_refused(case, ChecksumMismatchError, field, versioned=True)


def test_apply_delta_when_next_manifest_sha_disagrees_raises_manifest_error(case):
    def edit(data):
        data["next"]["manifest_sha256"] = "2" * 64

    edit_manifest(case.delta, edit)
    assert_refused(case, ManifestError, "next.manifest_sha256")


def test_apply_delta_when_delta_folder_missing_raises_missing_path_error(case, tmp_path):
    mirror = copy_snapshot(case.parent, case.root / "mirror")
    with pytest.raises(MissingPathError, match="nowhere: does not exist; expected a delta"):
        apply_delta(mirror, tmp_path / "nowhere")
    assert not os.path.exists(tmp_path / "nowhere")


def test_apply_delta_when_refused_leaves_no_local_state(case):
    field = set_entry(case, REPLACED, sha256="0" * 64)
    error = assert_refused(case, ChecksumMismatchError, field)
    assert isinstance(error.path, Path)
    assert not (case.root / "mirror" / ".skewtape").exists()


def with_row_fields(table: pa.Table, edit) -> pa.Table:
    """The change table with its ``row`` struct's {name: (field, array)} passed through ``edit``."""
    rows = table.column("row").combine_chunks()
    columns = {
        rows.type.field(i).name: (rows.type.field(i), rows.field(i))
        for i in range(rows.type.num_fields)
    }
    columns = edit(columns)
    struct = pa.StructArray.from_arrays(
        [array for _, array in columns.values()], fields=[f for f, _ in columns.values()]
    )
    return table.set_column(table.schema.get_field_index("row"), "row", struct)


def without_title(columns: dict) -> dict:
    return {name: value for name, value in columns.items() if name != "title"}


def with_rating(columns: dict) -> dict:
    n = len(next(iter(columns.values()))[1])
    return {**columns, "rating": (pa.field("rating", pa.int64()), pa.array(range(n), pa.int64()))}


def title_as_int64(columns: dict) -> dict:
    n = len(columns["title"][1])
    return {**columns, "title": (pa.field("title", pa.int64()), pa.array(range(n), pa.int64()))}


@pytest.mark.parametrize(
    ("edit", "column", "what"),
    [
        (without_title, "title", "lacks"),
        (with_rating, "rating", "has"),
        (title_as_int64, "title", "int64"),
    ],
    ids=["lacks_a_column", "one_column_more", "column_of_another_type"],
)
@pytest.mark.parametrize("versioned", [False, True], ids=["in_place", "versioned"])
def test_apply_delta_when_upsert_row_does_not_fit_the_table_raises_change_file_error(
    case, edit, column, what, versioned
):
    rewrite_change_file(case.delta, "markets.parquet", lambda t: with_row_fields(t, edit))
    error = assert_refused(
        case, ChangeFileError, "markets.parquet", repr(column), what, versioned=versioned
    )
    assert error.field == f"row.{column}"


def insert_delete(case, rel: str) -> str:
    """Put a delete of ``rel`` first in the delta's manifest; returns its field."""

    def edit(data):
        data["files"].insert(0, {"path": rel, "op": "delete"})

    edit_manifest(case.delta, edit)
    return "files[0].path"


UNUSABLE = {
    "lone surrogate": "x\ud800y.md",
    "name beyond the file system's limit": "a" * 300 + ".md",
    "path beyond the file system's limit": "/".join(["f" * 250] * 17) + ".md",
}


@pytest.mark.parametrize("versioned", [False, True])
@pytest.mark.parametrize("rel", UNUSABLE.values(), ids=UNUSABLE.keys())
def test_apply_delta_when_a_delete_path_is_unusable_here_refuses_before_the_commit(
    case, rel, versioned
):
    field = insert_delete(case, rel)
    assert_refused(case, UnsafePathError, field, "refusing the path", versioned=versioned)


@pytest.mark.parametrize("rel", UNUSABLE.values(), ids=UNUSABLE.keys())
def test_apply_delta_when_an_add_source_is_unusable_here_refuses_naming_it(case, rel):
    field = set_entry(case, ADDED[0], source=f"snapshot/{rel}")
    assert_refused(case, UnsafePathError, f"{field}.source", "refusing the path")


def test_apply_delta_when_a_delete_path_lies_below_a_file_finishes_and_so_does_a_rerun(case):
    """Nothing is there to delete (``README.md`` is a file): the apply and a rerun finish."""
    insert_delete(case, f"{REPLACED}/x")
    mirror = copy_snapshot(case.parent, case.root / "mirror")
    assert apply_delta(mirror, case.delta).files_deleted != []
    assert apply_delta(mirror, case.delta).already_applied
    assert_same_snapshot(mirror, case.expected)


HUGE_TEXT = "x" * 1_000_000
HUGE_LIST = list(range(200_000))


@pytest.mark.parametrize(
    ("fields", "quoted", "longest"),
    [  # a path is quoted whole up to the longest one a file system holds
        ({"path": HUGE_TEXT}, "(1000000 characters)", PATH_CHARS + 400),
        ({"source": "snapshot/" + HUGE_TEXT}, "(1000009 characters)", 2 * PATH_CHARS + 400),
        ({"op": HUGE_TEXT}, "(1000000 characters)", 400),
        ({"sha256": HUGE_TEXT}, "(1000000 characters)", 400),
        ({"sha256": HUGE_LIST}, "(a list of 200000 items)", 400),
    ],
    ids=["path", "source", "op", "sha256", "sha256-list"],
)
def test_apply_delta_when_a_field_is_megabytes_long_quotes_its_start_in_one_short_line(
    case, fields, quoted, longest
):
    field = set_entry(case, REPLACED, **fields)
    error = assert_refused(case, SkewtapeError, field, quoted)
    assert len(str(error)) < longest and "\n" not in str(error)


def test_apply_delta_when_an_entry_is_a_huge_list_quotes_its_start_in_one_short_line(case):
    index = entry_index(case.delta, REPLACED)
    edit_manifest(case.delta, lambda data: data["files"].__setitem__(index, HUGE_LIST))
    error = assert_refused(case, ManifestError, f"files[{index}]", "(a list of 200000 items)")
    assert len(str(error)) < 400
