"""Tests of the delta/snapshot manifest parsers and the safe-path rule."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from skewtape_pipeline.errors import ManifestError, UnsafePathError
from skewtape_pipeline.hashing import format_checksums, parse_checksums
from skewtape_pipeline.mirror.format import (
    CHECKSUMS,
    MANIFEST,
    DeltaManifest,
    SnapshotManifest,
    safe_relpath,
)

SHA = "a" * 64
SRC = Path("delta/manifest.json")


def delta_json(files: list[dict], **overrides) -> bytes:
    data = {
        "parent": {"bundle_id": "skewtape-history-2026-11", "manifest_sha256": SHA},
        "next": {
            "bundle_id": "skewtape-history-2026-12",
            "manifest_sha256": "b" * 64,
            "venues": ["kalshi"],
            "omitted_venues": [],
        },
        "schema_break": False,
        "files": files,
    }
    data.update(overrides)
    return json.dumps(data).encode()


TAIL = [
    {"path": CHECKSUMS, "op": "replace", "source": f"snapshot/{CHECKSUMS}", "sha256": SHA},
    {"path": MANIFEST, "op": "replace", "source": f"snapshot/{MANIFEST}", "sha256": SHA},
]


def test_delta_manifest_parse_when_valid_keeps_order_and_fields():
    files = [
        {
            "path": "fills/kalshi/2026-12.parquet",
            "op": "add",
            "source": "snapshot/f",
            "sha256": SHA,
        },
        {"path": "markets.parquet", "op": "change", "source": "changes/m", "sha256": SHA},
        {"path": "old.md", "op": "delete"},
        *TAIL,
    ]
    manifest = DeltaManifest.parse(delta_json(files), source=SRC)
    assert [e.op for e in manifest.files] == ["add", "change", "delete", "replace", "replace"]
    assert manifest.files[2].source is None
    assert manifest.next.venues == ("kalshi",)
    assert DeltaManifest.parse(manifest.to_json(), source=SRC) == manifest


@pytest.mark.parametrize(
    ("files", "fragment"),
    [
        ([{"path": "a", "op": "move", "source": "s", "sha256": SHA}, *TAIL], "expected one of"),
        ([{"path": "a", "op": "add", "source": "s", "sha256": SHA}] * 2 + TAIL, "appears twice"),
        ([{"path": "x.parquet", "op": "change", "source": "s", "sha256": SHA}, *TAIL], "no known"),
        ([{"path": "a", "op": "add", "source": "s", "sha256": "zz"}, *TAIL], "64 lowercase hex"),
        ([{"path": "a", "op": "add", "source": "s"}, *TAIL], "missing"),
        (list(reversed(TAIL)), "last two entries"),
        ([{"path": "a", "op": "add", "source": "s", "sha256": SHA}], "last two entries"),
    ],
)
def test_delta_manifest_parse_when_rule_broken_raises_naming_field(files, fragment):
    with pytest.raises(ManifestError, match=fragment) as info:
        DeltaManifest.parse(delta_json(files), source=SRC)
    assert "files" in str(info.value)
    assert str(SRC) in str(info.value)


@pytest.mark.parametrize(
    "bad", ["", "/etc/passwd", "../x", "a/../b", "a//b", "a\\b", "C:/x", "./a", "a/", ".skewtape/x"]
)
def test_safe_relpath_when_path_escapes_raises_unsafe_path(bad):
    with pytest.raises(UnsafePathError, match="refusing the path"):
        safe_relpath(bad, field_name="files[0].path")


def test_delta_manifest_parse_when_not_json_raises_manifest_error():
    with pytest.raises(ManifestError, match="not valid JSON"):
        DeltaManifest.parse(b"{nope", source=SRC)


def test_snapshot_manifest_round_trips_through_json():
    raw = json.dumps(
        {
            "bundle_id": "skewtape-history-2026-11",
            "month": "2026-11",
            "venues": ["kalshi", "polymarket"],
            "omitted_venues": [],
            "schema_version": 1,
            "files": [
                {"path": "markets.parquet", "sha256": SHA, "bytes": 10, "rows": 3,
                 "columns": [["venue", "string"]]},
                {"path": "README.md", "sha256": SHA, "bytes": 5},
            ],
        }
    ).encode()  # fmt: skip
    manifest = SnapshotManifest.parse(raw, source=SRC)
    assert manifest.by_path()["markets.parquet"].rows == 3
    assert SnapshotManifest.parse(manifest.to_json(), source=SRC) == manifest


def test_parse_checksums_when_line_malformed_names_line():
    with pytest.raises(ManifestError, match="line 2"):
        parse_checksums(f"{SHA}  a\nnot a line\n".encode(), source=SRC)


def test_checksums_round_trip():
    hashes = {"b": SHA, "a": "c" * 64}
    assert parse_checksums(format_checksums(hashes), source=SRC) == hashes
