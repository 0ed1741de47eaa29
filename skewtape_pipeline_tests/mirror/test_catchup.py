"""Catching a history folder up with a chain of monthly deltas."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from skewtape_pipeline import faults
from skewtape_pipeline.errors import ChainError, ConfigError
from skewtape_pipeline.mirror.apply import LOCK_FILE
from skewtape_pipeline.mirror.catchup import catch_up, next_month
from skewtape_pipeline.mirror.diff import build_delta
from skewtape_pipeline.mirror.snapshot import read_snapshot
from skewtape_pipeline.mirror.verify import merged_tables, verify_snapshot
from skewtape_pipeline_tests.conftest import make_snapshot
from skewtape_pipeline_tests.mirror import minimal_publisher as minimal
from skewtape_pipeline_tests.mirror import reference_apply
from skewtape_pipeline_tests.mirror.apply_support import (
    assert_same_snapshot,
    edit_manifest,
    evolve_snapshot,
    tree_state,
)

MONTHS = ("2026-12", "2027-01")


def history_state(root):
    """Every entry of the history folder but the apply lock file (rewritten by each run)."""
    state = tree_state(root / "history")
    state.pop(LOCK_FILE, None)
    return state


@pytest.fixture
def chain(tmp_path):
    """history/2026-11, published 2026-12 and 2027-01, and deltas/<month> for both.

    2027-01 changes fees only, so the markets table merged in 2026-12 is carried unchanged.
    """
    previous = make_snapshot(tmp_path, month="2026-11", venues=("kalshi",))
    published = {}
    for month, tables in zip(MONTHS, (("markets.parquet", "fees.parquet"), ("fees.parquet",)),
                             strict=True):  # fmt: skip
        published[month] = evolve_snapshot(
            previous,
            tmp_path / "published" / month,
            month=month,
            deleted="fills/kalshi/2026-10.parquet",
            tables=tables,
        )
        build_delta(previous, published[month], tmp_path / "deltas" / month)
        previous = published[month]
    return tmp_path, published


def test_next_month_when_december_rolls_over_the_year():
    assert next_month("2026-12") == "2027-01"
    assert next_month("2027-01") == "2027-02"


def test_catch_up_when_versioned_adds_one_verified_folder_per_month(chain):
    root, published = chain
    before = tree_state(root / "history" / "2026-11")
    results = catch_up(root / "history", root / "deltas")
    assert [r.next_bundle_id for r in results] == [f"skewtape-history-{m}" for m in MONTHS]
    for month in MONTHS:
        assert_same_snapshot(root / "history" / month, published[month])
        verify_snapshot(root / "history" / month, full=True)
    assert tree_state(root / "history" / "2026-11") == before
    assert "markets.parquet" in merged_tables(root / "history" / "2027-01")  # carried record


@pytest.mark.parametrize("link_sources", [True, False])
def test_catch_up_when_link_sources_is_false_copies_the_deltas_files(chain, link_sources):
    root, _published = chain
    catch_up(root / "history", root / "deltas", link_sources=link_sources)
    shared = [p for p in (root / "deltas").rglob("*") if p.is_file() and p.stat().st_nlink > 1]
    assert bool(shared) == link_sources


def test_catch_up_when_in_place_advances_the_newest_folder(chain):
    root, published = chain
    results = catch_up(root / "history", root / "deltas", mode="in_place")
    newest = root / "history" / "2026-11"
    assert [r.snapshot for r in results] == [newest, newest]
    assert_same_snapshot(newest, published["2027-01"])
    assert read_snapshot(newest)[0].month == "2027-01"
    assert not (root / "history" / "2026-12").exists()


@pytest.mark.parametrize("mode", ["versioned", "in_place"])
def test_catch_up_when_history_is_current_returns_nothing(chain, mode):
    root, _ = chain
    catch_up(root / "history", root / "deltas", mode=mode)
    before = history_state(root)
    assert catch_up(root / "history", root / "deltas", mode=mode) == []
    assert history_state(root) == before


def test_catch_up_when_a_month_is_missing_raises_chain_error_and_applies_nothing(chain):
    root, _ = chain
    (root / "deltas" / "2026-12").rename(root / "parked-2026-12")
    before = history_state(root)
    with pytest.raises(ChainError, match="no delta for 2026-12"):
        catch_up(root / "history", root / "deltas")
    assert history_state(root) == before


def test_catch_up_when_parent_link_broken_raises_chain_error_and_applies_nothing(chain):
    root, _ = chain

    def other_parent(data):
        data["parent"]["manifest_sha256"] = "3" * 64

    edit_manifest(root / "deltas" / "2027-01", other_parent)
    before = history_state(root)
    with pytest.raises(ChainError, match="2027-01") as info:
        catch_up(root / "history", root / "deltas")
    assert "3" * 64 in str(info.value)
    assert history_state(root) == before


def test_catch_up_when_history_is_empty_raises_chain_error(tmp_path):
    (tmp_path / "history").mkdir()
    with pytest.raises(ChainError, match="holds no snapshot"):
        catch_up(tmp_path / "history", tmp_path / "deltas")


def test_catch_up_when_mode_unknown_raises_config_error(chain):
    root, _ = chain
    with pytest.raises(ConfigError, match="'sideways'"):
        catch_up(root / "history", root / "deltas", mode="sideways")


@pytest.mark.parametrize("mode", ["versioned", "in_place"])
def test_catch_up_when_interrupted_in_second_month_rerun_finishes(chain, mode):
    root, published = chain
    seen: list[str] = []

    def crash_in_second_merge(name: str) -> None:
        seen.append(name)
        if name == "fees.parquet:written" and seen.count(name) == 2:
            raise RuntimeError("simulated crash")

    with faults.installed(crash_in_second_merge), pytest.raises(RuntimeError):
        catch_up(root / "history", root / "deltas", mode=mode)
    results = catch_up(root / "history", root / "deltas", mode=mode)
    assert [r.next_bundle_id for r in results] == ["skewtape-history-2027-01"]
    newest = root / "history" / ("2027-01" if mode == "versioned" else "2026-11")
    assert_same_snapshot(newest, published["2027-01"])


@pytest.mark.parametrize("mode", ["versioned", "in_place"])
@pytest.mark.parametrize("month", [1, 2], ids=["first-month", "last-month"])
def test_catch_up_when_cut_after_a_commit_before_its_audit_rerun_audits_that_month(
    chain, mode, month
):
    root, published = chain
    log, clean_log = root / "audit.jsonl", root / "clean" / "audit.jsonl"
    clean = root / "clean" / "history"
    clean.mkdir(parents=True)
    shutil.copytree(root / "history" / "2026-11", clean / "2026-11")
    reference = shutil.copytree(root / "history" / "2026-11", root / "reference" / "2026-11")
    catch_up(clean, root / "deltas", mode=mode, audit_log=clean_log)
    seen: list[str] = []

    def cut_before_audit(name: str) -> None:
        seen.append(name)
        if name == "before-audit" and seen.count(name) == month:
            raise KeyboardInterrupt  # Ctrl-C, or a kill, between commit and audit

    with faults.installed(cut_before_audit), pytest.raises(KeyboardInterrupt):
        catch_up(root / "history", root / "deltas", mode=mode, audit_log=log)
    results = catch_up(root / "history", root / "deltas", mode=mode, audit_log=log)

    assert [r.next_bundle_id for r in results] == [
        f"skewtape-history-{m}" for m in MONTHS[month - 1 :]
    ]
    newest = root / "history" / ("2027-01" if mode == "versioned" else "2026-11")
    assert_same_snapshot(newest, published["2027-01"])
    assert_as_the_reference_applier_leaves_it(newest, reference, root / "deltas")
    assert audited_changes(log) == audited_changes(clean_log)
    assert catch_up(root / "history", root / "deltas", mode=mode, audit_log=log) == []


def assert_as_the_reference_applier_leaves_it(ours: Path, parent: Path, deltas: Path) -> None:
    """``ours`` holds what the seed's reference applier makes of ``parent`` and every delta
    (its files byte for byte, its tables row for row, in key order)."""
    for month in MONTHS:
        reference_apply.apply_delta(parent, deltas / month)
    assert files_of(ours) == files_of(parent)
    for rel in files_of(ours):
        if rel not in minimal.KEYS:
            assert (ours / rel).read_bytes() == (parent / rel).read_bytes(), rel
            continue
        order = [(key, "ascending") for key in minimal.KEYS[rel]]
        mine = pq.read_table(ours / rel).sort_by(order)
        assert mine.equals(pq.read_table(parent / rel).select(mine.column_names).sort_by(order))


def files_of(folder: Path) -> list[str]:
    """The snapshot's files (its local state left out), relative, sorted."""
    return sorted(
        p.relative_to(folder).as_posix()
        for p in folder.rglob("*")
        if p.is_file() and ".skewtape" not in p.relative_to(folder).parts
    )


def audited_changes(log) -> list[tuple[str, str, str]]:
    """Each audit record's delta month, path and operation, in order."""
    records = [json.loads(line) for line in log.read_text().splitlines()]
    return [(Path(r["delta"]).name, r["path"], r["op"]) for r in records]


def test_catch_up_when_a_relative_folder_name_holds_a_colon_takes_it_as_local(chain, monkeypatch):
    root, published = chain
    shutil.copytree(root / "history", root / "mirror:prod" / "history")
    shutil.copytree(root / "deltas", root / "mirror:prod" / "deltas")
    monkeypatch.chdir(root)  # "mirror:prod/..." is no URI of a scheme "mirror"

    results = catch_up(Path("mirror:prod/history"), Path("mirror:prod/deltas"))

    assert [r.next_bundle_id for r in results] == [f"skewtape-history-{m}" for m in MONTHS]
    verify_snapshot(Path("mirror:prod/history") / MONTHS[-1], full=True)
    assert_same_snapshot(root / "mirror:prod" / "history" / MONTHS[-1], published[MONTHS[-1]])
    reference = shutil.copytree(root / "history" / "2026-11", root / "reference" / "2026-11")
    ours = root / "mirror:prod" / "history" / MONTHS[-1]
    assert_as_the_reference_applier_leaves_it(ours, reference, root / "deltas")


def test_catch_up_when_a_later_month_is_missing_names_where_the_chain_stops(chain):
    root, _ = chain
    (root / "deltas" / "2027-01").rename(root / "deltas" / "2027-02")
    before = history_state(root)
    with pytest.raises(ChainError) as info:
        catch_up(root / "history", root / "deltas")
    assert "no delta for 2027-01: the snapshot " in str(info.value)
    assert "2026-11 holds 2026-11, its deltas reach 2026-12, and the next" in str(info.value)
    assert history_state(root) == before
