"""Tests of building a delta between two snapshots."""

from __future__ import annotations

from decimal import Decimal

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from skewtape_pipeline.errors import DeltaBuildError, VerificationError, WrongFolderError
from skewtape_pipeline.hashing import parse_checksums, sha256_file
from skewtape_pipeline.mirror.diff import build_delta
from skewtape_pipeline.mirror.format import CHECKSUMS, MANIFEST, TABLE_KEYS, DeltaManifest
from skewtape_pipeline.mirror.snapshot import read_snapshot
from skewtape_pipeline.mirror.tables import same_rows
from skewtape_pipeline.mirror.verify import record_merged_table
from skewtape_pipeline_tests.conftest import (
    VENUES,
    candles_table,
    copy_snapshot,
    fills_table,
    make_snapshot,
    reseal,
    write_parquet,
)
from skewtape_pipeline_tests.mirror.reference_apply import apply_delta as reference_apply_delta

# --- helpers ------------------------------------------------------------------------------------


@pytest.fixture
def parent(tmp_path):
    return make_snapshot(tmp_path, month="2026-11")


def _next_from(parent, tmp_path, month="2026-12"):
    return copy_snapshot(parent, tmp_path / "history" / month)


def _entries(manifest: DeltaManifest) -> list[tuple[str, str]]:
    return [(entry.op, entry.path) for entry in manifest.files]


def _update_table(folder, rel, change):
    table = pq.read_table(folder / rel)
    write_parquet(folder / rel, change(table))


def _assert_applies_to_next(parent, nxt, delta, tmp_path):
    """The reference applier takes a copy of parent to next: bytes equal, tables by rows."""
    mirror = copy_snapshot(parent, tmp_path / "mirror")
    reference_apply_delta(mirror, delta)
    next_manifest, _, next_sha = read_snapshot(nxt)
    assert sha256_file(mirror / MANIFEST) == next_sha
    assert (mirror / CHECKSUMS).read_bytes() == (nxt / CHECKSUMS).read_bytes()
    on_disk = sorted(p.relative_to(mirror).as_posix() for p in mirror.rglob("*") if p.is_file())
    assert on_disk == sorted([e.path for e in next_manifest.files] + [MANIFEST, CHECKSUMS])
    for entry in next_manifest.files:
        if entry.path in TABLE_KEYS:
            keys = TABLE_KEYS[entry.path]
            merged, published = pq.read_table(mirror / entry.path), pq.read_table(nxt / entry.path)
            assert same_rows(merged, published, keys), entry.path
        else:
            assert sha256_file(mirror / entry.path) == entry.sha256, entry.path


# --- tests ----------------------------------------------------------------------------------------


def test_build_delta_when_files_added_replaced_deleted_orders_ops_and_ships_them(parent, tmp_path):
    nxt = _next_from(parent, tmp_path)
    for venue in VENUES:
        write_parquet(nxt / "fills" / venue / "2026-12.parquet", fills_table(venue, "2026-12"))
    write_parquet(
        nxt / "candles/kalshi/2026-11.parquet", candles_table("kalshi", "2026-11", rows=5)
    )
    (nxt / "fills/polymarket/2026-10.parquet").unlink()
    (nxt / "NOTES.md").write_text("new file\n")
    reseal(nxt, month="2026-12")

    manifest = build_delta(parent, nxt, tmp_path / "deltas" / "2026-12")

    assert _entries(manifest) == [
        ("delete", "fills/polymarket/2026-10.parquet"),
        ("add", "NOTES.md"),
        ("add", "fills/kalshi/2026-12.parquet"),
        ("add", "fills/polymarket/2026-12.parquet"),
        ("replace", "candles/kalshi/2026-11.parquet"),
        ("replace", CHECKSUMS),
        ("replace", MANIFEST),
    ]
    delta = tmp_path / "deltas" / "2026-12"
    for entry in manifest.files:
        if entry.source:
            assert entry.source == f"snapshot/{entry.path}"
            assert (delta / entry.source).read_bytes() == (nxt / entry.path).read_bytes()
            assert sha256_file(delta / entry.source) == entry.sha256
    _assert_applies_to_next(parent, nxt, delta, tmp_path)


def test_build_delta_when_built_names_both_snapshots_and_checksums_every_file(parent, tmp_path):
    nxt = _next_from(parent, tmp_path)
    (nxt / "README.md").write_text("December.\n")
    reseal(nxt, month="2026-12")
    delta = tmp_path / "delta"
    manifest = build_delta(parent, nxt, delta)

    _, _, parent_sha = read_snapshot(parent)
    next_manifest, _, next_sha = read_snapshot(nxt)
    assert manifest.parent.manifest_sha256 == parent_sha
    assert manifest.parent.bundle_id == "skewtape-history-2026-11"
    assert (manifest.next.bundle_id, manifest.next.manifest_sha256) == (
        next_manifest.bundle_id,
        next_sha,
    )
    assert manifest.next.venues == next_manifest.venues
    raw = (delta / MANIFEST).read_bytes()
    assert DeltaManifest.parse(raw, source=delta / MANIFEST) == manifest
    listed = parse_checksums((delta / CHECKSUMS).read_bytes(), source=delta / CHECKSUMS)
    files = sorted(p.relative_to(delta).as_posix() for p in delta.rglob("*") if p.is_file())
    assert sorted([*listed, CHECKSUMS]) == files
    for rel, digest in listed.items():
        assert sha256_file(delta / rel) == digest


def test_build_delta_when_table_rows_change_ships_a_change_file_the_seed_query_applies(
    parent, tmp_path
):
    nxt = _next_from(parent, tmp_path)

    def close_one_and_drop_one(table):
        status = pc.if_else(pc.equal(table["market_id"], "KA-M1"), "closed", table["status"])
        kept = table.set_column(table.schema.get_field_index("status"), "status", status)
        return kept.filter(pc.not_equal(kept["market_id"], "PO-M2"))

    _update_table(nxt, "markets.parquet", close_one_and_drop_one)
    _update_table(
        nxt, "resolutions.parquet",
        lambda t: pa.concat_tables([t, t.slice(0, 1).set_column(2, "seq", pa.array([3]))]),
    )  # fmt: skip
    reseal(nxt, month="2026-12")
    delta = tmp_path / "delta"
    manifest = build_delta(parent, nxt, delta)

    assert _entries(manifest) == [
        ("change", "markets.parquet"),
        ("change", "resolutions.parquet"),
        ("replace", CHECKSUMS),
        ("replace", MANIFEST),
    ]
    change = pq.read_table(delta / "changes" / "markets.parquet")
    rows = change["row"].combine_chunks()
    assert list(
        zip(change["op"].to_pylist(), rows.field("market_id").to_pylist(), strict=True)
    ) == [
        ("delete", "PO-M2"),
        ("upsert", "KA-M1"),
    ]
    assert rows.field("venue").to_pylist() == ["polymarket", "kalshi"]
    for name in ("title", "status", "tick_size", "opened_at"):
        assert rows.field(name).is_null().to_pylist() == [True, False], name
    assert rows.field("status").to_pylist()[1] == "closed"
    resolutions = pq.read_table(delta / "changes" / "resolutions.parquet")
    assert resolutions.num_rows == 1  # rows holding nulls that did not change are not shipped
    _assert_applies_to_next(parent, nxt, delta, tmp_path)


def test_build_delta_when_only_a_nanosecond_or_last_decimal_changes_detects_it(parent, tmp_path):
    nxt = _next_from(parent, tmp_path)

    def nudge(table):
        opened = table["opened_at"].cast(pa.int64()).to_pylist()
        opened[0] += 1  # one nanosecond
        tick = table["tick_size"].to_pylist()
        tick[1] = tick[1] + Decimal("0.0001")
        table = table.set_column(
            5, "opened_at", pa.array(opened, pa.int64()).cast(table.schema.field(5).type)
        )
        return table.set_column(4, "tick_size", pa.array(tick, table.schema.field(4).type))

    _update_table(nxt, "markets.parquet", nudge)
    reseal(nxt, month="2026-12")
    delta = tmp_path / "delta"
    build_delta(parent, nxt, delta)
    change = pq.read_table(delta / "changes" / "markets.parquet")
    assert change["op"].to_pylist() == ["upsert", "upsert"]
    _assert_applies_to_next(parent, nxt, delta, tmp_path)


def test_build_delta_when_tables_unchanged_gives_them_no_entry(parent, tmp_path):
    nxt = _next_from(parent, tmp_path)
    reseal(nxt, month="2026-12")
    manifest = build_delta(parent, nxt, tmp_path / "delta")
    assert _entries(manifest) == [("replace", CHECKSUMS), ("replace", MANIFEST)]
    assert not (tmp_path / "delta" / "changes").exists()


def test_build_delta_when_table_reencoded_with_same_rows_replaces_it_whole(parent, tmp_path):
    nxt = _next_from(parent, tmp_path)
    table = pq.read_table(nxt / "fees.parquet")
    pq.write_table(table, nxt / "fees.parquet", compression="zstd")
    reseal(nxt, month="2026-12")
    delta = tmp_path / "delta"
    manifest = build_delta(parent, nxt, delta)
    assert ("replace", "fees.parquet") in _entries(manifest)
    assert (delta / "snapshot" / "fees.parquet").read_bytes() == (nxt / "fees.parquet").read_bytes()


def test_build_delta_when_venue_omitted_deletes_its_files_and_rows(parent, tmp_path):
    nxt = make_snapshot(
        tmp_path / "next", month="2026-12", venues=("kalshi",), omitted_venues=("polymarket",),
        months=("2026-10", "2026-11"),
    )  # fmt: skip
    delta = tmp_path / "delta"
    manifest = build_delta(parent, nxt, delta)

    assert manifest.next.omitted_venues == ("polymarket",)
    assert manifest.next.venues == ("kalshi",)
    deleted = [path for op, path in _entries(manifest) if op == "delete"]
    assert deleted == sorted(
        f"{kind}/polymarket/{month}.parquet"
        for kind in ("candles", "fills")
        for month in ("2026-10", "2026-11")
    )
    markets = pq.read_table(delta / "changes" / "markets.parquet")
    assert set(markets["op"].to_pylist()) == {"delete"}
    assert set(markets["row"].combine_chunks().field("venue").to_pylist()) == {"polymarket"}
    _assert_applies_to_next(parent, nxt, delta, tmp_path)


def test_build_delta_when_a_table_schema_changes_ships_all_four_tables_whole(parent, tmp_path):
    nxt = _next_from(parent, tmp_path)
    _update_table(
        nxt, "fees.parquet", lambda t: t.append_column("note", pa.array(["x"] * t.num_rows))
    )
    _update_table(nxt, "markets.parquet", lambda t: t.slice(1))
    reseal(nxt, month="2026-12")
    delta = tmp_path / "delta"
    manifest = build_delta(parent, nxt, delta)

    assert manifest.schema_break is True
    tables = [(op, path) for op, path in _entries(manifest) if path in TABLE_KEYS]
    assert tables == [("replace", rel) for rel in sorted(TABLE_KEYS)]
    assert not (delta / "changes").exists()
    _assert_applies_to_next(parent, nxt, delta, tmp_path)


def test_build_delta_when_built_twice_writes_identical_bytes(parent, tmp_path):
    nxt = _next_from(parent, tmp_path)
    _update_table(nxt, "matched_events.parquet", lambda t: t.slice(1))
    write_parquet(nxt / "fills/kalshi/2026-12.parquet", fills_table("kalshi", "2026-12"))
    reseal(nxt, month="2026-12")
    first, second = tmp_path / "d1", tmp_path / "d2"
    build_delta(parent, nxt, first)
    build_delta(parent, nxt, second)

    def contents(folder):
        return {
            p.relative_to(folder).as_posix(): p.read_bytes()
            for p in folder.rglob("*")
            if p.is_file()
        }

    assert contents(first) == contents(second)


def test_build_delta_when_out_not_empty_refuses_and_leaves_it(parent, tmp_path):
    nxt = _next_from(parent, tmp_path)
    reseal(nxt, month="2026-12")
    out = tmp_path / "delta"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    with pytest.raises(DeltaBuildError, match="not empty"):
        build_delta(parent, nxt, out)
    assert [p.name for p in out.iterdir()] == ["keep.txt"]
    assert not [p for p in tmp_path.iterdir() if "skewtape-tmp" in p.name]


def test_build_delta_when_out_is_an_empty_folder_fills_it(parent, tmp_path):
    nxt = _next_from(parent, tmp_path)
    reseal(nxt, month="2026-12")
    out = tmp_path / "delta"
    out.mkdir()
    build_delta(parent, nxt, out)
    assert (out / MANIFEST).is_file()


def test_build_delta_when_out_inside_a_snapshot_refuses(parent, tmp_path):
    nxt = _next_from(parent, tmp_path)
    reseal(nxt, month="2026-12")
    with pytest.raises(DeltaBuildError, match="inside"):
        build_delta(parent, nxt, nxt / "delta")
    assert not (nxt / "delta").exists()


def test_build_delta_when_an_input_does_not_verify_refuses_before_writing(parent, tmp_path):
    nxt = _next_from(parent, tmp_path)
    reseal(nxt, month="2026-12")
    (nxt / "README.md").write_text("changed after sealing\n")
    with pytest.raises(VerificationError, match=r"README\.md"):
        build_delta(parent, nxt, tmp_path / "delta")
    assert not (tmp_path / "delta").exists()


@pytest.mark.parametrize(
    "wrong", ["delta as next", "delta as parent", "history as parent", "deltas as next"]
)
def test_build_delta_when_given_a_folder_of_another_kind_refuses_naming_it(parent, tmp_path, wrong):
    """A delta, a history folder or a deltas folder for a snapshot is refused naming what it
    is, before anything is written (a delta built from a delta would turn a month into a copy
    of that delta folder)."""
    nxt = _next_from(parent, tmp_path)
    reseal(nxt, month="2026-12")
    deltas = tmp_path / "deltas"
    build_delta(parent, nxt, deltas / "2026-12")
    given, named = {
        "delta as next": ((parent, deltas / "2026-12"), "is a delta"),
        "delta as parent": ((deltas / "2026-12", nxt), "is a delta"),
        "history as parent": ((tmp_path / "history", nxt), "is a history folder"),
        "deltas as next": ((parent, deltas), "is a folder of <YYYY-MM>/ deltas"),
    }[wrong]
    with pytest.raises(WrongFolderError, match=f"{named}.*, not a snapshot"):
        build_delta(*given, tmp_path / "out")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["deltas", "history"]


def _merge_locally(snapshot, rel):
    """Rewrite ``rel`` with DuckDB (same rows, new bytes) and record it as our merge."""
    new = snapshot / f"{rel}.new"
    duckdb.sql(f"SELECT * FROM read_parquet('{snapshot / rel}')").write_parquet(str(new))
    new.replace(snapshot / rel)
    record_merged_table(snapshot, rel, sha256_file(snapshot / rel))


def test_build_delta_when_parent_table_merged_locally_compares_published_hashes(parent, tmp_path):
    nxt = _next_from(parent, tmp_path)
    reseal(nxt, month="2026-12")
    _merge_locally(parent, "markets.parquet")
    manifest = build_delta(parent, nxt, tmp_path / "delta")
    assert _entries(manifest) == [("replace", CHECKSUMS), ("replace", MANIFEST)]


def test_build_delta_when_next_table_to_ship_whole_is_a_local_merge_refuses(parent, tmp_path):
    nxt = _next_from(parent, tmp_path)
    _update_table(nxt, "fees.parquet", lambda t: t.append_column("note", pa.array(["x"] * 4)))
    reseal(nxt, month="2026-12")
    _merge_locally(nxt, "markets.parquet")
    with pytest.raises(DeltaBuildError, match=r"markets\.parquet.*locally merged"):
        build_delta(parent, nxt, tmp_path / "delta")
    assert not (tmp_path / "delta").exists()
