"""Tests of the sample publisher: the chain's layout, its ops, its oracle and its refusals."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest

from skewtape_pipeline.errors import ConfigError, SampleRootError
from skewtape_pipeline.mirror.format import TABLE_KEYS, DeltaManifest, SnapshotManifest
from skewtape_pipeline.sample.publisher import publish_sample
from skewtape_pipeline_tests.sample.conftest import Published

TINY = 200


def delta_manifests(root: Path) -> dict[str, DeltaManifest]:
    return {
        folder.name: DeltaManifest.parse((folder / "manifest.json").read_bytes(), source=folder)
        for folder in sorted((root / "deltas").iterdir())
    }


def snapshot_manifest(folder: Path) -> SnapshotManifest:
    return SnapshotManifest.parse((folder / "manifest.json").read_bytes(), source=folder)


def files_below(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def change_rows(delta: Path, table: str) -> list[tuple[str, dict]]:
    changes = pq.read_table(delta / "changes" / table)
    return list(zip(changes["op"].to_pylist(), changes["row"].to_pylist(), strict=True))


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def apply_like_the_published_reference(snapshot: Path, delta: Path) -> None:
    """The published DuckDB applier, condensed (the same ops, the same merge query)."""
    manifest = json.loads((delta / "manifest.json").read_bytes())
    con = duckdb.connect()
    for entry in manifest["files"]:
        target = snapshot / entry["path"]
        if entry["op"] == "delete":
            target.unlink(missing_ok=True)
            continue
        source = delta / entry["source"]
        assert sha256(source) == entry["sha256"]
        if entry["op"] in ("add", "replace"):
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)
            continue
        keys = ", ".join(TABLE_KEYS[entry["path"]])
        merged = target.with_name(target.name + ".new")
        con.sql(
            f"""SELECT * FROM (
                  SELECT base.* FROM read_parquet($target) AS base
                  ANTI JOIN (SELECT row.* FROM read_parquet($changes)) AS ch USING ({keys})
                  UNION ALL BY NAME
                  SELECT row.* FROM read_parquet($changes) WHERE op = 'upsert'
                ) ORDER BY {keys}""",
            params={"target": str(target), "changes": str(source)},
        ).write_parquet(str(merged))
        merged.replace(target)


def test_publish_sample_when_run_twice_writes_the_same_bytes(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    publish_sample(first, fills_per_venue_month=TINY, snapshots_dir=first / "oracle")
    publish_sample(second, fills_per_venue_month=TINY, snapshots_dir=second / "oracle")

    written = files_below(first)
    assert written == files_below(second)
    assert any(rel.startswith("deltas/") for rel in written)


def test_publish_sample_when_seeds_differ_writes_different_trades(tmp_path: Path) -> None:
    publish_sample(tmp_path / "a", seed=1, fills_per_venue_month=TINY)
    publish_sample(tmp_path / "b", seed=2, fills_per_venue_month=TINY)

    rel = "history/2026-09/fills/kalshi/2026-09.parquet"
    assert (tmp_path / "a" / rel).read_bytes() != (tmp_path / "b" / rel).read_bytes()


def test_publish_sample_when_published_writes_first_snapshot_and_a_delta_per_later_month(
    published: Published,
) -> None:
    summary = published.summary
    months = summary.months

    assert len(months) == 4 and len(summary.deltas) == 3
    assert sorted(p.name for p in (published.root / "history").iterdir()) == [months[0]]
    assert sorted(p.name for p in (published.root / "deltas").iterdir()) == months[1:]
    first = snapshot_manifest(published.root / "history" / months[0])
    assert first.month == months[0]
    assert set(first.venues) == {"kalshi", "polymarket", "predictit", "augur"}
    paths = {entry.path for entry in first.files}
    assert set(TABLE_KEYS) <= paths
    assert {"README.md", "LICENSE.txt", "CHANGELOG.md"} <= paths
    assert f"fills/kalshi/{months[0]}.parquet" in paths
    assert f"candles/polymarket/{months[0]}.parquet" in paths


def test_publish_sample_when_published_every_op_appears_in_the_chain(
    published: Published,
) -> None:
    ops = {entry.op for m in delta_manifests(published.root).values() for entry in m.files}

    assert ops == {"add", "replace", "delete", "change"}


def test_publish_sample_when_published_changes_hold_upserts_and_deletes(
    published: Published,
) -> None:
    first_delta = published.root / "deltas" / published.summary.months[1]

    markets_ops = {op for op, _ in change_rows(first_delta, "markets.parquet")}
    events_ops = {op for op, _ in change_rows(first_delta, "matched_events.parquet")}
    new_seqs = {row["seq"] for op, row in change_rows(first_delta, "resolutions.parquet")}
    fee_rows = [row for op, row in change_rows(first_delta, "fees.parquet") if op == "upsert"]
    assert markets_ops == {"upsert", "delete"}
    assert events_ops == {"upsert", "delete"}
    assert 1 in new_seqs
    assert len(fee_rows) == 1


def test_publish_sample_when_a_table_gains_a_column_the_delta_is_a_schema_break(
    published: Published,
) -> None:
    manifests = delta_manifests(published.root)
    breaks = [month for month, m in manifests.items() if m.schema_break]

    assert breaks == published.summary.schema_break_months
    assert len(breaks) == 1
    entries = {e.path: e.op for e in manifests[breaks[0]].files}
    assert {entries[table] for table in TABLE_KEYS} == {"replace"}
    after = snapshot_manifest(published.oracle / breaks[0]).by_path()["markets.parquet"]
    assert after.columns is not None and "settlement_source" in dict(after.columns)


def test_publish_sample_when_a_venue_leaves_its_files_go_and_its_rows_are_deleted_by_key(
    published: Published,
) -> None:
    manifests = delta_manifests(published.root)
    leaving = [(month, m) for month, m in manifests.items() if m.next.omitted_venues]
    month, manifest = leaving[0]
    venue = manifest.next.omitted_venues[0]
    delta = published.root / "deltas" / month

    assert venue not in manifest.next.venues
    deleted = {e.path for e in manifest.files if e.op == "delete"}
    months = published.summary.months
    parent = snapshot_manifest(published.oracle / months[months.index(month) - 1])
    venue_files = {e.path for e in parent.files if f"/{venue}/" in e.path}
    assert venue_files and venue_files <= deleted
    for table in ("markets.parquet", "resolutions.parquet", "fees.parquet"):
        deleted_venues = {row["venue"] for op, row in change_rows(delta, table) if op == "delete"}
        assert venue in deleted_venues, table
    assert not manifest.schema_break


def test_publish_sample_when_a_closed_month_is_corrected_the_delta_replaces_it(
    published: Published,
) -> None:
    first_month = published.summary.months[0]
    fills = f"fills/kalshi/{first_month}.parquet"
    replaced_in = [
        month
        for month, m in delta_manifests(published.root).items()
        if any(e.path == fills and e.op == "replace" for e in m.files)
    ]

    assert len(replaced_in) == 1
    before = pq.read_table(published.oracle / first_month / fills)
    after = pq.read_table(published.oracle / replaced_in[0] / fills)
    before_rows = {r["trade_id"]: r for r in before.to_pylist()}
    after_rows = {r["trade_id"]: r for r in after.to_pylist()}
    assert before_rows.keys() - after_rows.keys(), "some trades are removed"
    assert after_rows.keys() - before_rows.keys(), "some trades are added"
    kept = before_rows.keys() & after_rows.keys()
    assert any(before_rows[t] != after_rows[t] for t in kept), "some trades are corrected"


def test_publish_sample_when_a_text_file_is_retired_the_delta_deletes_it(
    published: Published,
) -> None:
    deleted = {
        e.path
        for m in delta_manifests(published.root).values()
        for e in m.files
        if e.op == "delete"
    }

    assert any(path.endswith((".md", ".txt")) for path in deleted)


def test_publish_sample_when_chain_applied_in_order_reaches_every_oracle_snapshot(
    published: Published, tmp_path: Path
) -> None:
    months = published.summary.months
    mirror = tmp_path / "mirror"
    shutil.copytree(published.root / "history" / months[0], mirror)

    for month in months[1:]:
        apply_like_the_published_reference(mirror, published.root / "deltas" / month)
        oracle = published.oracle / month
        got, want = files_below(mirror), files_below(oracle)
        assert got.keys() == want.keys(), month
        for rel in want:
            if rel in TABLE_KEYS:
                assert (
                    pq.read_table(mirror / rel).to_pylist()
                    == pq.read_table(oracle / rel).to_pylist()
                ), (month, rel)
            else:
                assert got[rel] == want[rel], (month, rel)


def test_publish_sample_when_published_summary_matches_the_manifests(
    published: Published,
) -> None:
    summary = published.summary
    manifests = delta_manifests(published.root)

    for month, manifest in manifests.items():
        counted: dict[str, int] = {}
        for entry in manifest.files:
            counted[entry.op] = counted.get(entry.op, 0) + 1
        assert summary.delta_ops[month] == counted
    for month, rows in summary.rows.items():
        listed = snapshot_manifest(published.oracle / month).by_path()
        assert all(listed[rel].rows == count for rel, count in rows.items())
    assert json.loads(json.dumps(summary.to_dict()))["months"] == summary.months


@pytest.mark.parametrize("taken", ["history/2026-09/README.md", "deltas/2026-10/manifest.json"])
def test_publish_sample_when_root_holds_history_or_deltas_refuses_and_writes_nothing(
    tmp_path: Path, taken: str
) -> None:
    (tmp_path / taken).parent.mkdir(parents=True)
    (tmp_path / taken).write_text("already here\n")
    before = files_below(tmp_path)

    with pytest.raises(SampleRootError, match="already holds"):
        publish_sample(tmp_path, fills_per_venue_month=TINY)

    assert files_below(tmp_path) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [taken.split("/")[0]]


def test_publish_sample_when_snapshots_dir_holds_a_month_refuses_and_writes_nothing(
    tmp_path: Path,
) -> None:
    oracle = tmp_path / "oracle"
    (oracle / "2026-11").mkdir(parents=True)

    with pytest.raises(SampleRootError, match="2026-11"):
        publish_sample(tmp_path / "root", fills_per_venue_month=TINY, snapshots_dir=oracle)

    assert not (tmp_path / "root").exists()
    assert [p.name for p in oracle.iterdir()] == ["2026-11"]


def test_publish_sample_when_history_and_deltas_folders_are_empty_publishes(
    tmp_path: Path,
) -> None:
    (tmp_path / "history").mkdir()
    (tmp_path / "deltas").mkdir()

    summary = publish_sample(tmp_path, fills_per_venue_month=TINY)

    assert summary.first_snapshot == tmp_path / "history" / "2026-09"
    assert (summary.first_snapshot / "manifest.json").is_file()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"months": 3}, "months"),
        ({"first_month": "2026-13"}, "first_month"),
        ({"fills_per_venue_month": 5}, "fills_per_venue_month"),
        ({"seed": "seven"}, "seed"),
    ],
)
def test_publish_sample_when_an_option_is_invalid_raises_config_error_and_writes_nothing(
    tmp_path: Path, options: dict, named: str
) -> None:
    with pytest.raises(ConfigError, match=named):
        publish_sample(tmp_path / "root", **options)

    assert not (tmp_path / "root").exists()


def test_publish_sample_when_months_exceed_four_later_deltas_stay_ordinary(
    tmp_path: Path,
) -> None:
    summary = publish_sample(tmp_path, months=5, fills_per_venue_month=TINY)

    fifth = delta_manifests(tmp_path)[summary.months[4]]
    assert not fifth.schema_break
    assert fifth.next.omitted_venues == ("augur",)
    assert {e.op for e in fifth.files} >= {"add", "change"}
    assert not any("/augur/" in e.path for e in fifth.files)


def test_publish_sample_when_a_killed_run_left_a_work_folder_removes_it(tmp_path: Path) -> None:
    leftover = tmp_path / ".sample.99999.skewtape-tmp" / "snapshots" / "2026-09"
    leftover.mkdir(parents=True)
    (leftover / "README.md").write_text("half written\n")

    publish_sample(tmp_path, fills_per_venue_month=TINY)

    assert sorted(p.name for p in tmp_path.iterdir()) == ["deltas", "history"]
