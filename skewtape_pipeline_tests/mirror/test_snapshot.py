"""Tests of sealing and reading snapshot folders."""

from __future__ import annotations

import hashlib
import json
import os

import pyarrow as pa
import pytest

from skewtape_pipeline.errors import (
    ManifestError,
    SnapshotError,
    UnsafePathError,
    VerificationError,
)
from skewtape_pipeline.hashing import parse_checksums
from skewtape_pipeline.mirror.format import CHECKSUMS, MANIFEST, TABLE_KEYS
from skewtape_pipeline.mirror.snapshot import read_snapshot, seal_snapshot
from skewtape_pipeline.mirror.tables import table_columns
from skewtape_pipeline_tests.conftest import (
    fees_table,
    make_snapshot,
    markets_table,
    write_parquet,
)


def _files_below(folder):
    return sorted(
        p.relative_to(folder).as_posix()
        for p in folder.rglob("*")
        if p.is_file() and p.name not in (MANIFEST, CHECKSUMS) and ".skewtape" not in p.parts
    )


def test_seal_snapshot_when_folder_built_lists_every_file_with_its_sha256(tmp_path):
    folder = make_snapshot(tmp_path)
    manifest, checksums, manifest_sha = read_snapshot(folder)
    paths = [entry.path for entry in manifest.files]
    assert paths == _files_below(folder)
    for entry in manifest.files:
        data = (folder / entry.path).read_bytes()
        assert entry.sha256 == hashlib.sha256(data).hexdigest()
        assert entry.bytes == len(data)
        assert checksums[entry.path] == entry.sha256
    assert checksums[MANIFEST] == manifest_sha
    assert manifest_sha == hashlib.sha256((folder / MANIFEST).read_bytes()).hexdigest()
    assert set(checksums) == {*paths, MANIFEST}


def test_seal_snapshot_when_parquet_records_rows_and_columns_for_tables_only(tmp_path):
    folder = make_snapshot(tmp_path)
    manifest, _, _ = read_snapshot(folder)
    by_path = manifest.by_path()
    assert by_path["markets.parquet"].rows == markets_table(manifest.venues).num_rows
    assert by_path["markets.parquet"].columns == tuple(
        (f.name, str(f.type)) for f in markets_table(manifest.venues).schema
    )
    assert by_path["fills/kalshi/2026-11.parquet"].rows == 4
    assert by_path["fills/kalshi/2026-11.parquet"].columns is None
    assert by_path["README.md"].rows is None
    assert set(TABLE_KEYS) <= set(by_path)


def test_seal_snapshot_when_sealed_again_writes_the_same_bytes(tmp_path):
    folder = make_snapshot(tmp_path)
    before = ((folder / MANIFEST).read_bytes(), (folder / CHECKSUMS).read_bytes())
    (folder / ".skewtape").mkdir()
    (folder / ".skewtape" / "hashes.json").write_text("{}")
    seal_snapshot(
        folder,
        bundle_id="skewtape-history-2026-11",
        month="2026-11",
        venues=("kalshi", "polymarket"),
    )
    assert ((folder / MANIFEST).read_bytes(), (folder / CHECKSUMS).read_bytes()) == before


def test_seal_snapshot_when_symlink_present_refuses_and_writes_nothing(tmp_path):
    folder = make_snapshot(tmp_path)
    before = (folder / MANIFEST).read_bytes()
    os.symlink(folder / "README.md", folder / "link.md")
    with pytest.raises(UnsafePathError, match=r"link\.md"):
        seal_snapshot(folder, bundle_id="b", month="2026-11", venues=["kalshi"])
    assert (folder / MANIFEST).read_bytes() == before


def test_seal_snapshot_when_temp_leftover_present_refuses(tmp_path):
    folder = make_snapshot(tmp_path)
    (folder / "fills" / ".x.parquet.123.skewtape-tmp").write_bytes(b"half")
    with pytest.raises(UnsafePathError, match="skewtape-tmp"):
        seal_snapshot(folder, bundle_id="b", month="2026-11", venues=["kalshi"])


def test_seal_snapshot_when_table_has_duplicate_keys_raises_naming_it(tmp_path):
    folder = make_snapshot(tmp_path)
    before = (folder / MANIFEST).read_bytes()
    markets = markets_table(["kalshi"])
    write_parquet(folder / "markets.parquet", pa.concat_tables([markets, markets.slice(0, 1)]))
    with pytest.raises(VerificationError) as caught:
        seal_snapshot(folder, bundle_id="b", month="2026-11", venues=["kalshi"])
    assert any("markets.parquet" in p and "more than once" in p for p in caught.value.problems)
    assert (folder / MANIFEST).read_bytes() == before


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"month": "2026-13"}, "month"),
        ({"bundle_id": ""}, "bundle_id"),
        ({"venues": "kalshi"}, "venues"),
        ({"omitted_venues": ["kalshi"]}, "omitted_venues"),
    ],
)
def test_seal_snapshot_when_option_invalid_raises_manifest_error_naming_field(
    tmp_path, options, field
):
    folder = make_snapshot(tmp_path)
    kwargs = {"bundle_id": "b", "month": "2026-11", "venues": ["kalshi"], **options}
    with pytest.raises(ManifestError) as caught:
        seal_snapshot(folder, **kwargs)
    assert caught.value.field == field


def test_seal_snapshot_when_parquet_unreadable_raises_snapshot_error(tmp_path):
    folder = make_snapshot(tmp_path)
    (folder / "fills" / "kalshi" / "2026-11.parquet").write_bytes(b"not parquet")
    with pytest.raises(SnapshotError, match=r"2026-11\.parquet"):
        seal_snapshot(folder, bundle_id="b", month="2026-11", venues=["kalshi"])


def test_read_snapshot_when_manifest_missing_raises_naming_the_file(tmp_path):
    folder = make_snapshot(tmp_path)
    (folder / MANIFEST).unlink()
    with pytest.raises(ManifestError, match=r"manifest\.json"):
        read_snapshot(folder)


def test_read_snapshot_when_checksums_malformed_raises_naming_the_line(tmp_path):
    folder = make_snapshot(tmp_path)
    with open(folder / CHECKSUMS, "a") as handle:
        handle.write("not-a-hash  README.md\n")
    with pytest.raises(ManifestError, match=r"CHECKSUMS.sha256.*line"):
        read_snapshot(folder)


def test_read_snapshot_when_checksums_list_an_unsafe_path_names_the_file_line_and_path(
    tmp_path,
):
    folder = make_snapshot(tmp_path)
    lines = (folder / CHECKSUMS).read_text().splitlines()
    (folder / CHECKSUMS).write_text("\n".join([*lines, f"{'0' * 64}  ../outside.md"]) + "\n")
    with pytest.raises(UnsafePathError) as raised:
        read_snapshot(folder)
    assert str(raised.value) == (
        f"{folder / CHECKSUMS}: line {len(lines) + 1}: refusing the path '../outside.md': "
        "empty, '.' and '..' parts are not allowed"
    )


@pytest.mark.parametrize(
    "raw",
    [b"{", b"[1, 2]", b'{"schema": 3, "tables": {"markets": "x"}}', b"[" * 100_000],
    ids=["not-json", "not-an-object", "unknown-fields-only", "deeply-nested"],
)
def test_read_snapshot_when_manifest_tells_nothing_lists_files_from_checksums(tmp_path, raw):
    # The published format names a snapshot by its manifest's sha256 and nothing more.
    folder = make_snapshot(tmp_path)
    listed = parse_checksums((folder / CHECKSUMS).read_bytes(), source=folder / CHECKSUMS)
    (folder / MANIFEST).write_bytes(raw)
    manifest, checksums, manifest_sha = read_snapshot(folder)
    assert (manifest.bundle_id, manifest.month, manifest.schema_version) == (None, None, None)
    assert {e.path: e.sha256 for e in manifest.files} == {
        rel: sha for rel, sha in listed.items() if rel != MANIFEST
    }
    assert manifest_sha == hashlib.sha256(raw).hexdigest() and checksums == listed


def test_table_columns_when_parquet_returns_names_and_arrow_types(tmp_path):
    table = pa.table({"a": pa.array([1], pa.int32()), "b": pa.array(["x"])})
    path = write_parquet(tmp_path / "t.parquet", table)
    assert table_columns(path) == (("a", "int32"), ("b", "string"))


def test_seal_snapshot_when_sealed_checksums_parse_as_sha256sum_format(tmp_path):
    folder = make_snapshot(tmp_path)
    text = (folder / CHECKSUMS).read_bytes()
    listed = parse_checksums(text, source=folder / CHECKSUMS)
    lines = text.decode().splitlines()
    assert lines == sorted(lines, key=lambda line: line.split("  ", 1)[1])
    manifest = json.loads((folder / MANIFEST).read_bytes())
    assert [f["path"] for f in manifest["files"]] == sorted(f["path"] for f in manifest["files"])
    assert len(listed) == len(manifest["files"]) + 1


def test_seal_snapshot_when_table_lacks_a_key_column_raises_naming_it(tmp_path):
    folder = make_snapshot(tmp_path)
    write_parquet(folder / "markets.parquet", markets_table(["kalshi"]).drop_columns(["venue"]))
    with pytest.raises(VerificationError) as caught:
        seal_snapshot(folder, bundle_id="b", month="2026-11", venues=["kalshi"])
    assert caught.value.problems == [
        "markets.parquet: has no key column(s) ['venue']; expected key ['venue', 'market_id']"
    ]


def test_seal_snapshot_when_duplicate_key_has_a_nanosecond_timestamp_names_it(tmp_path):
    folder = make_snapshot(tmp_path)
    fees = fees_table(["kalshi"])
    write_parquet(folder / "fees.parquet", pa.concat_tables([fees, fees.slice(0, 1)]))
    with pytest.raises(VerificationError) as caught:
        seal_snapshot(folder, bundle_id="b", month="2026-11", venues=["kalshi"])
    (problem,) = caught.value.problems
    assert "fees.parquet" in problem and "'category': 'default'" in problem
    assert "2026-01-01 00:00:00.000000000Z" in problem
