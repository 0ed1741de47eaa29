"""Delta arrival inspection: complete, still arriving, and month folder listing."""

from __future__ import annotations

import json
import os
from pathlib import Path

from skewtape_pipeline.hashing import sha256_file
from skewtape_pipeline.mirror.arrivals import delta_months, holds_snapshot, inspect_delta
from skewtape_pipeline.mirror.format import CHECKSUMS, MANIFEST


def largest_listed_file(delta: Path) -> Path:
    listed = [line.split("  ", 1)[1] for line in (delta / CHECKSUMS).read_text().splitlines()]
    return max((delta / rel for rel in listed), key=lambda path: path.stat().st_size)


def test_inspect_delta_when_every_file_is_there_reports_complete_with_manifest_sha(
    sample_root: Path,
):
    delta = sample_root / "deltas" / "2026-10"
    arrival = inspect_delta(delta)
    assert arrival.complete, arrival.reason
    assert arrival.manifest_sha256 == sha256_file(delta / MANIFEST)
    next_manifest = json.loads((delta / MANIFEST).read_bytes())["next"]
    assert arrival.next_manifest_sha256 == next_manifest["manifest_sha256"]


def test_inspect_delta_when_checksums_not_yet_copied_reports_incomplete(sample_root: Path):
    delta = sample_root / "deltas" / "2026-10"
    (delta / CHECKSUMS).unlink()
    arrival = inspect_delta(delta)
    assert not arrival.complete
    assert CHECKSUMS in arrival.reason


def test_inspect_delta_when_a_file_is_half_copied_reports_incomplete_naming_it(
    sample_root: Path,
):
    delta = sample_root / "deltas" / "2026-10"
    big = largest_listed_file(delta)
    size = big.stat().st_size
    os.truncate(big, size // 2)
    arrival = inspect_delta(delta)
    assert not arrival.complete
    assert str(big) in arrival.reason


def test_inspect_delta_when_a_listed_file_is_missing_reports_incomplete(sample_root: Path):
    delta = sample_root / "deltas" / "2026-10"
    big = largest_listed_file(delta)
    big.unlink()
    arrival = inspect_delta(delta)
    assert not arrival.complete
    assert "has not arrived" in arrival.reason


def test_inspect_delta_when_manifest_changed_after_checksums_reports_incomplete(
    sample_root: Path,
):
    delta = sample_root / "deltas" / "2026-10"
    (delta / MANIFEST).write_bytes((delta / MANIFEST).read_bytes() + b"\n")
    arrival = inspect_delta(delta)
    assert not arrival.complete
    assert MANIFEST in arrival.reason


def test_delta_months_when_folder_holds_other_entries_lists_only_later_month_folders(
    tmp_path: Path,
):
    for name in ("2026-09", "2026-10", "2026-11", "notes", "2026-13", ".2026-12.partial"):
        (tmp_path / name).mkdir()
    (tmp_path / "2026-12").write_text("a file, not a delta folder")
    assert delta_months(tmp_path, after="2026-09") == ["2026-10", "2026-11"]
    assert delta_months(tmp_path / "missing") == []


def test_holds_snapshot_when_folder_has_that_manifest_is_true_else_false(sample_root: Path):
    snapshot = sample_root / "history" / "2026-09"
    digest = sha256_file(snapshot / MANIFEST)
    assert holds_snapshot(snapshot, digest)
    assert not holds_snapshot(snapshot, "0" * 64)
    assert not holds_snapshot(sample_root / "history" / "2026-10", digest)
