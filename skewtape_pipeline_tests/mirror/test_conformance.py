"""Conformance: deltas from a second, independent publisher, against the seed's reference applier.

The publisher (:mod:`minimal_publisher`) is written from the published format alone and shares
no code with the sample publisher or the engine; the oracle is the seed's ``apply_delta``
(:mod:`reference_apply`, verbatim). Over random pairs of snapshots (month files added, replaced
and deleted, text files, table upserts and deletes, an omitted venue, schema breaks), our apply,
in place and versioned, must give the same files (bytes) and tables (rows) as the reference on
the same inputs, and the published next snapshot; applying twice must leave the folder as it
was. The crash tests of ``test_faults`` run on this publisher's deltas too.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from skewtape_pipeline import faults
from skewtape_pipeline.errors import ManifestError, VerificationError
from skewtape_pipeline.mirror.apply import apply_delta
from skewtape_pipeline.mirror.arrivals import inspect_delta
from skewtape_pipeline.mirror.catchup import catch_up
from skewtape_pipeline.mirror.staging import staging_folders
from skewtape_pipeline.mirror.verify import verify_snapshot
from skewtape_pipeline_tests.mirror import minimal_publisher as minimal
from skewtape_pipeline_tests.mirror import reference_apply
from skewtape_pipeline_tests.mirror.apply_support import DeltaCase, temp_files, tree_state
from skewtape_pipeline_tests.mirror.test_faults import InjectedCrash, crash_at, logged

PARENT_MONTH, NEXT_MONTH = "2026-11", "2026-12"
OLD_MONTHS = ("2026-09", "2026-10", PARENT_MONTH)
ALL_VENUES = ("kalshi", "polymarket", "augur")
UTC_US = pa.timestamp("us", tz="UTC")
KEEP, MODIFY, DELETE = 0, 1, 2


# --- the worlds: a parent snapshot and the next one ----------------------------------------------


@dataclass(frozen=True)
class Month:
    """What changes between the two snapshots (drawn by hypothesis, or all at once)."""

    venues: int = 3
    omit_last_venue: bool = True
    schema_break: bool = False
    add_month: bool = True
    replace_month: bool = True
    delete_month: bool = True
    readme: str = "replace"
    add_text: bool = True
    delete_text: bool = True
    edits: dict[str, tuple[int, ...]] = field(
        default_factory=lambda: {name: (KEEP, MODIFY, DELETE, MODIFY) for name in minimal.KEYS}
    )
    added_rows: int = 2
    style: str = "terse"


def month_file(venue: str, month: str, kind: str, version: int) -> bytes:
    """A small, distinct Parquet month file (its bytes are all that matters to a delta)."""
    rows = 3 + version
    table = pa.table(
        {
            "venue": [venue] * rows,
            "market_id": [f"{venue[:2].upper()}-M{i}" for i in range(rows)],
            "ts": pa.array([i * 1_000_000 for i in range(rows)], UTC_US),
            kind: pa.array([float(i + version) / 8 for i in range(rows)]),
        }
    )
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return sink.getvalue().to_pybytes()


def table_rows(name: str, venue: str, index: int, version: int, *, note: bool) -> dict:
    """One row of the table ``name``; ``version`` changes its non-key values."""
    ident = f"{venue[:2].upper()}-M{index}"
    when = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC) + datetime.timedelta(days=index)
    if name == "markets.parquet":
        row = {"venue": venue, "market_id": ident, "title": f"Will {ident} happen? v{version}",
               "status": ["open", "closed", "settled"][version % 3], "tick": 100 + version,
               "open_time": when}  # fmt: skip
        return row | ({"note": f"n{version}"} if note else {})
    if name == "resolutions.parquet":
        return {"venue": venue, "market_id": ident, "seq": index % 2 + 1,
                "outcome": ["yes", "no"][version % 2], "settled": version % 2 == 0}  # fmt: skip
    if name == "matched_events.parquet":
        return {"event_id": f"EV-{venue}-{index}", "title": f"Event {index} v{version}",
                "confidence": 0.5 + version / 10}  # fmt: skip
    return {"venue": venue, "category": ["crypto", "sports"][index % 2],
            "effective_from": when, "taker_bps": 7 + version}  # fmt: skip


SCHEMAS = {
    "markets.parquet": [("venue", pa.string()), ("market_id", pa.string()),
                        ("title", pa.string()), ("status", pa.string()), ("tick", pa.int32()),
                        ("open_time", UTC_US)],
    "resolutions.parquet": [("venue", pa.string()), ("market_id", pa.string()),
                            ("seq", pa.int64()), ("outcome", pa.string()), ("settled", pa.bool_())],
    "matched_events.parquet": [("event_id", pa.string()), ("title", pa.string()),
                               ("confidence", pa.float64())],
    "fees.parquet": [("venue", pa.string()), ("category", pa.string()),
                     ("effective_from", UTC_US), ("taker_bps", pa.int32())],
}  # fmt: skip


def build_table(name: str, rows: list[dict], *, note: bool) -> pa.Table:
    fields = SCHEMAS[name] + ([("note", pa.string())] if note and name == "markets.parquet" else [])
    schema = pa.schema(fields)
    return pa.Table.from_pylist(rows, schema=schema).sort_by(
        [(k, "ascending") for k in minimal.KEYS[name]]
    )


def snapshots(month: Month) -> tuple[minimal.Content, minimal.Content]:
    """The parent's and the next snapshot's files for ``month``."""
    venues = ALL_VENUES[: month.venues]
    kept = venues[:-1] if month.omit_last_venue and len(venues) > 1 else venues
    parent: minimal.Content = {
        "README.md": b"Skewtape history 2026-11\n",
        "LICENSE": b"CC-BY-4.0\n",
        "notes/read me \xc3\xa9.txt": b"hi\n",
    }
    for venue in venues:
        for m in OLD_MONTHS:
            parent[f"fills/{venue}/{m}.parquet"] = month_file(venue, m, "price", 0)
        parent[f"candles/{venue}/{PARENT_MONTH}.parquet"] = month_file(
            venue, PARENT_MONTH, "close", 0
        )
    nxt = {
        rel: data
        for rel, data in parent.items()
        if not any(f"/{v}/" in rel for v in venues if v not in kept)
    }
    if month.add_month:
        for venue in kept:
            nxt[f"fills/{venue}/{NEXT_MONTH}.parquet"] = month_file(venue, NEXT_MONTH, "price", 0)
    if month.replace_month:
        nxt[f"fills/{kept[0]}/2026-10.parquet"] = month_file(kept[0], "2026-10", "price", 1)
    if month.delete_month:
        del nxt[f"fills/{kept[0]}/2026-09.parquet"]
    if month.readme == "replace":
        nxt["README.md"] = b"Skewtape history 2026-12, revised\r\n"
    elif month.readme == "delete":
        del nxt["README.md"]
    if month.add_text:
        nxt["docs/CHANGES.txt"] = b"2026-12: new month\n"
    if month.delete_text:
        del nxt["LICENSE"]
    for name in minimal.KEYS:
        parent_rows, next_rows = [], []
        edits = month.edits[name]
        for venue in venues:
            for index, edit in enumerate(edits):
                parent_rows.append(table_rows(name, venue, index, 0, note=False))
                if venue in kept and edit != DELETE:
                    version = 1 if edit == MODIFY else 0
                    next_rows.append(
                        table_rows(name, venue, index, version, note=month.schema_break)
                    )
            if venue in kept:
                for index in range(len(edits), len(edits) + month.added_rows):
                    next_rows.append(table_rows(name, venue, index, 2, note=month.schema_break))
        parent[name] = build_table(name, parent_rows, note=False)
        nxt[name] = build_table(name, next_rows, note=month.schema_break)
    return parent, nxt


def publish_case(root: Path, month: Month, *, tamper_next=None, next_fields=None) -> DeltaCase:
    """Publish the two snapshots and the delta with the minimal publisher (``test_faults``
    layout: ``history/2026-11``, ``published/2026-12``, ``deltas/2026-12``).

    ``next_fields`` are added to the next snapshot's manifest; ``tamper_next(folder)`` may
    change the next snapshot after it was sealed, before the delta is built from it."""
    style = minimal.STYLES[month.style]
    parent_files, next_files = snapshots(month)
    venues = ALL_VENUES[: month.venues]
    kept = venues[:-1] if month.omit_last_venue and len(venues) > 1 else venues
    parent = minimal.publish_snapshot(
        root / "history" / PARENT_MONTH,
        parent_files,
        bundle_id="skewtape-history-2026-11",
        venues=venues,
        style=style,
    )
    nxt = minimal.publish_snapshot(
        root / "published" / NEXT_MONTH,
        next_files,
        bundle_id="skewtape-history-2026-12",
        venues=kept,
        style=style,
        manifest_fields=next_fields,
    )
    if tamper_next is not None:
        tamper_next(nxt.folder)
    delta = minimal.publish_delta(parent, nxt, root / "deltas" / NEXT_MONTH, style=style,
                                  omitted_venues=tuple(v for v in venues if v not in kept),
                                  schema_break=month.schema_break)  # fmt: skip
    return DeltaCase(root=root, parent=parent.folder, expected=nxt.folder, delta=delta)


months = st.builds(
    Month,
    venues=st.integers(1, 3),
    omit_last_venue=st.booleans(),
    schema_break=st.booleans(),
    add_month=st.booleans(),
    replace_month=st.booleans(),
    delete_month=st.booleans(),
    readme=st.sampled_from(["keep", "replace", "delete"]),
    add_text=st.booleans(),
    delete_text=st.booleans(),
    edits=st.fixed_dictionaries(
        {name: st.lists(st.integers(KEEP, DELETE), max_size=4).map(tuple) for name in minimal.KEYS}
    ),
    added_rows=st.integers(0, 2),
    style=st.sampled_from(sorted(minimal.STYLES)),
)


# --- comparing results, without the engine's helpers --------------------------------------------


def snapshot_state(folder: Path) -> dict[str, object]:
    """{path: bytes, or for a table (schema, rows sorted)} of a snapshot, local state left out."""
    state: dict[str, object] = {}
    for dirpath, dirnames, names in os.walk(folder):
        dirnames[:] = [d for d in dirnames if d != ".skewtape"]
        for name in names:
            path = Path(dirpath, name)
            rel = path.relative_to(folder).as_posix()
            if rel in minimal.KEYS:
                table = pq.read_table(path)
                columns = [(f.name, str(f.type)) for f in table.schema]
                state[rel] = (columns, sorted(table.to_pylist(), key=repr))
            else:
                state[rel] = path.read_bytes()
    return state


def copy_parent(case: DeltaCase, history: Path) -> Path:
    return Path(shutil.copytree(case.parent, history / PARENT_MONTH))


def reference_result(case: DeltaCase, work: Path) -> dict[str, object]:
    snapshot = copy_parent(case, work / "reference" / "history")
    reference_apply.apply_delta(snapshot, case.delta)
    return snapshot_state(snapshot)


def assert_ours_match_reference(case: DeltaCase, work: Path) -> None:
    expected = reference_result(case, work)
    published = snapshot_state(case.expected)
    tables = {rel: value for rel, value in published.items() if rel in minimal.KEYS}
    assert {rel: v for rel, v in expected.items() if rel not in minimal.KEYS} == {
        rel: v for rel, v in published.items() if rel not in minimal.KEYS
    }
    assert {rel: v[1] for rel, v in expected.items() if rel in tables} == {
        rel: v[1] for rel, v in tables.items()
    }
    for mode in ("in_place", "versioned"):
        history = work / mode / "history"
        parent = copy_parent(case, history)
        into = history / NEXT_MONTH if mode == "versioned" else None
        parent_before = tree_state(parent)
        result = apply_delta(parent, case.delta, into=into)
        assert snapshot_state(result.snapshot) == expected, mode
        if mode == "versioned":
            assert tree_state(parent) == parent_before
        after_first = tree_state(result.snapshot)
        again = apply_delta(parent, case.delta, into=into)
        assert again.already_applied and tree_state(result.snapshot) == after_first, mode


# --- the tests ------------------------------------------------------------------------------------


@settings(
    max_examples=12,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(month=months)
def test_apply_delta_when_minimal_publisher_delta_gives_the_reference_result(month):
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        case = publish_case(root / "published", month)
        assert_ours_match_reference(case, root / "runs")


@pytest.mark.parametrize("style", sorted(minimal.STYLES))
@pytest.mark.parametrize("schema_break", [False, True], ids=["changes", "schema-break"])
def test_apply_delta_when_every_kind_of_change_at_once_gives_the_reference_result(
    tmp_path, style, schema_break
):
    case = publish_case(tmp_path / "published", Month(style=style, schema_break=schema_break))
    assert_ours_match_reference(case, tmp_path / "runs")


def test_verify_snapshot_when_published_by_the_minimal_publisher_passes(tmp_path):
    case = publish_case(tmp_path, Month())
    for folder in (case.parent, case.expected):
        result = verify_snapshot(folder, full=True)
        assert result.bundle_id == f"skewtape-history-{folder.name}"
        assert set(result.tables) == set(minimal.KEYS)


@pytest.mark.parametrize("mode", ["in_place", "versioned"])
def test_apply_delta_when_minimal_delta_crashed_at_any_checkpoint_rerun_gives_next(
    tmp_path, mode, monkeypatch
):
    monkeypatch.setattr(os, "fsync", lambda fd: None)  # as in test_faults: not a power-loss test
    case = publish_case(tmp_path / "case", Month(venues=2, added_rows=1))
    expected = reference_result(case, tmp_path / "oracle")
    names: list[str] = []

    def run(name: str, hook=None):
        history = tmp_path / name / "history"
        if not history.exists():
            copy_parent(case, history)
        into = history / NEXT_MONTH if mode == "versioned" else None
        with faults.installed(hook) if hook else contextlib.nullcontext():
            return apply_delta(history / PARENT_MONTH, case.delta, into=into,
                               audit_log=history / "audit.log")  # fmt: skip

    clean = run("clean", names.append)
    clean_log = logged(tmp_path / "clean" / "history" / "audit.log")
    assert len(names) > 20
    for index, name in enumerate(names):
        with pytest.raises(InjectedCrash):
            run(f"crash-{index}", crash_at(index))
        result = run(f"crash-{index}")
        assert snapshot_state(result.snapshot) == expected, name
        verify_snapshot(result.snapshot, full=True)
        assert temp_files(result.snapshot) == [], name
        assert staging_folders(result.snapshot) == [], name
        assert (result.files_added, result.files_deleted) == (
            clean.files_added,
            clean.files_deleted,
        ) or result.already_applied, name
        assert logged(tmp_path / f"crash-{index}" / "history" / "audit.log") == clean_log, name
        shutil.rmtree(tmp_path / f"crash-{index}")


def publish_chain(root: Path, style: str = "terse") -> Path:
    """history/2026-11 and the deltas to 2026-12 and 2027-01, all from the minimal publisher;
    none of their manifests records a month. Returns ``root``."""
    case = publish_case(root, Month(style=style))
    january = root / "published" / "2027-01"
    seals = (minimal.MANIFEST, minimal.CHECKSUMS)
    files: minimal.Content = {
        rel: (case.expected / rel).read_bytes()
        for rel in snapshot_state(case.expected)
        if rel not in seals
    }
    files["README.md"] = b"Skewtape history 2027-01\n"
    files["fills/kalshi/2027-01.parquet"] = month_file("kalshi", "2027-01", "price", 0)
    december = minimal.Published(
        case.expected, "skewtape-history-2026-12", _sha(case.expected), ALL_VENUES[:2]
    )
    nxt = minimal.publish_snapshot(january, files, bundle_id="skewtape-history-2027-01",
                                   venues=ALL_VENUES[:2], style=minimal.STYLES[style])  # fmt: skip
    minimal.publish_delta(december, nxt, root / "deltas" / "2027-01", style=minimal.STYLES[style])
    return root


def _sha(folder: Path) -> str:
    return minimal.sha256_hex((folder / minimal.MANIFEST).read_bytes())


@pytest.mark.parametrize("mode", ["in_place", "versioned"])
def test_catch_up_when_manifests_record_no_month_follows_the_folders_and_the_chain(tmp_path, mode):
    root = publish_chain(tmp_path)
    history, deltas = root / "history", root / "deltas"
    results = catch_up(history, deltas, mode=mode)
    assert [r.next_bundle_id for r in results] == [
        "skewtape-history-2026-12",
        "skewtape-history-2027-01",
    ]
    newest = history / ("2026-11" if mode == "in_place" else "2027-01")
    assert _sha(newest) == _sha(root / "published" / "2027-01")
    assert catch_up(history, deltas, mode=mode) == []  # current: nothing left to apply


def test_catch_up_when_in_place_chain_was_interrupted_resumes_the_month_held(tmp_path):
    root = publish_chain(tmp_path)
    history, deltas = root / "history", root / "deltas"
    apply_delta(history / "2026-11", deltas / "2026-12")  # the folder now holds 2026-12
    results = catch_up(history, deltas, mode="in_place")
    assert [r.next_bundle_id for r in results] == ["skewtape-history-2027-01"]
    assert _sha(history / "2026-11") == _sha(root / "published" / "2027-01")


# --- what we use when present, and what we require ---------------------------------------------


@pytest.mark.parametrize(
    "fields",
    [
        {"month": "December 2026", "venues": "kalshi", "schema_version": "2"},
        {"files": "every one", "omitted_venues": [1, 2]},
        {"files": [{"path": "README.md"}], "bundle_id": 7},
        {"files": [{"path": "../x", "sha256": "0" * 64}], "columns": {"a": 1}},
    ],
    ids=["odd-scalars", "odd-lists", "entry-without-sha", "unsafe-entry"],
)
def test_apply_delta_when_next_manifest_holds_fields_in_unknown_shapes_ignores_them(
    tmp_path, fields
):
    case = publish_case(tmp_path / "published", Month(), next_fields=fields)
    assert_ours_match_reference(case, tmp_path / "runs")


def _parent_unchanged_after_refusal(case: DeltaCase, error, match: str) -> None:
    for into in (None, case.root / "history" / NEXT_MONTH):
        before = tree_state(case.parent)
        with pytest.raises(error, match=match):
            apply_delta(case.parent, case.delta, into=into)
        assert tree_state(case.parent) == before
        assert into is None or not into.exists()


def _drop_checksum_line(folder: Path, rel: str) -> None:
    path = folder / minimal.CHECKSUMS
    lines = path.read_bytes().replace(b"\r\n", b"\n").split(b"\n")
    kept = [line for line in lines if line and not line.endswith(b" " + rel.encode())]
    kept = [line for line in kept if not line.endswith(b"*" + rel.encode())]
    assert len(kept) == len([line for line in lines if line]) - 1
    path.write_bytes(b"\n".join(kept) + b"\n")


def _add_checksum_line(folder: Path, rel: str) -> None:
    with open(folder / minimal.CHECKSUMS, "ab") as handle:
        handle.write(f"\n{'0' * 64}  {rel}\n".encode())


def test_apply_delta_when_next_checksums_omit_the_next_manifest_refuses_before_writing(tmp_path):
    case = publish_case(
        tmp_path, Month(), tamper_next=lambda f: _drop_checksum_line(f, minimal.MANIFEST)
    )
    _parent_unchanged_after_refusal(case, ManifestError, r"CHECKSUMS\.sha256.*lists manifest")


def test_apply_delta_when_next_checksums_list_a_deleted_file_refuses_before_writing(tmp_path):
    case = publish_case(tmp_path, Month(), tamper_next=lambda f: _add_checksum_line(f, "LICENSE"))
    _parent_unchanged_after_refusal(case, ManifestError, "deletes 'LICENSE', which the next")


def test_apply_delta_when_next_checksums_omit_an_added_file_refuses_before_writing(tmp_path):
    case = publish_case(
        tmp_path, Month(), tamper_next=lambda f: _drop_checksum_line(f, "docs/CHANGES.txt")
    )
    _parent_unchanged_after_refusal(case, ManifestError, "adds 'docs/CHANGES.txt', which")


def test_apply_delta_when_next_manifest_files_disagree_with_its_checksums_refuses(tmp_path):
    listed = {"path": "README.md", "sha256": "0" * 64, "bytes": 3}
    case = publish_case(tmp_path, Month(), next_fields={"files": [listed]})
    _parent_unchanged_after_refusal(case, ManifestError, "has sha256 0+ for 'README.md'")


def test_verify_snapshot_when_table_columns_differ_from_those_expected_reports_them(tmp_path):
    case = publish_case(tmp_path, Month())
    expected = {"markets.parquet": (("venue", "string"), ("market_id", "string"))}
    with pytest.raises(VerificationError, match=r"markets\.parquet: has columns"):
        verify_snapshot(case.parent, table_columns=expected)
    verify_snapshot(case.parent)  # without the expectation, the same folder verifies


def test_apply_delta_when_parent_table_has_large_strings_verifies_the_merge(tmp_path, monkeypatch):
    # DuckDB writes large_string columns back as string: the same column to a Parquet reader.
    markets = [(name, pa.large_string() if name == "title" else kind)
               for name, kind in SCHEMAS["markets.parquet"]]  # fmt: skip
    monkeypatch.setitem(SCHEMAS, "markets.parquet", markets)
    case = publish_case(tmp_path / "published", Month())
    assert ("title", "large_string") in snapshot_state(case.parent)["markets.parquet"][0]
    assert_ours_match_reference(case, tmp_path / "runs")


def test_inspect_delta_when_minimal_delta_has_arrived_reports_complete(tmp_path):
    case = publish_case(tmp_path, Month())
    assert inspect_delta(case.delta).complete
    largest = max((p for p in case.delta.rglob("*") if p.is_file()), key=lambda p: p.stat().st_size)
    largest.write_bytes(largest.read_bytes()[:-1])  # still arriving
    arrival = inspect_delta(case.delta)
    assert not arrival.complete and largest.name in arrival.reason


@pytest.mark.parametrize(
    ("damage", "problem"),
    [
        (
            lambda f: (f / "x.txt").write_bytes(b"x"),
            "x.txt: is an extra file, not listed in CHECKSUMS",
        ),
        (lambda f: (f / "LICENSE").unlink(), "LICENSE: is missing"),
        (lambda f: (f / "LICENSE").write_bytes(b"MIT\n"), "LICENSE: has sha256"),
    ],
    ids=["extra", "missing", "modified"],
)
def test_verify_snapshot_when_manifest_lists_no_files_checks_the_checksums_list(
    tmp_path, damage, problem
):
    folder = publish_case(tmp_path, Month()).parent
    damage(folder)
    with pytest.raises(VerificationError, match=re.escape(problem)):
        verify_snapshot(folder, full=True)
