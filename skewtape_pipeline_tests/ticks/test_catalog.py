"""The catalog: atomic JSON, validation naming the field, and the live state it implies."""

from __future__ import annotations

import json
import os
from datetime import date, timedelta

import pytest

from skewtape_pipeline.errors import TickFormatError
from skewtape_pipeline.ticks.catalog import (
    CATALOG_FILE,
    Catalog,
    CatalogFile,
    CatalogPartition,
    SourceStamp,
    archive_state,
    read_catalog,
    relative_to_root,
    resolve,
    write_catalog,
)
from skewtape_pipeline.ticks.lifecycle import retier
from skewtape_pipeline_tests.ticks.archive_builders import DAYS, POLICY, build_archive

SHA = "ab" * 32


def sample_catalog() -> Catalog:
    file = CatalogFile("../archive-cold/year=2026/part-x.parquet", "COLD", "2026", 900, 7, SHA, 2)
    stamp = SourceStamp("symbol=ES/x/part-0.parquet", SHA, 10, 11, 12)
    partitions = [
        CatalogPartition("ES", date(2026, 1, 2), "COLD", file.path, 4, 500, stamp),
        CatalogPartition("ES", date(2026, 1, 3), "COLD", file.path, 3, 400, None),
    ]
    withdrawn = frozenset({partitions[1].key})
    return Catalog(3, {file.path: file}, {p.key: p for p in partitions}, withdrawn)


def test_read_catalog_when_absent_is_empty_generation_zero(tmp_path):
    assert read_catalog(tmp_path) == Catalog()


def test_write_catalog_when_read_back_is_equal(tmp_path):
    write_catalog(tmp_path, sample_catalog())
    assert read_catalog(tmp_path) == sample_catalog()
    assert [p.name for p in tmp_path.iterdir()] == [CATALOG_FILE]  # no temporary left


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (lambda b: b.update(version=9), "version"),
        (lambda b: b["files"][0].update(tier="HOT"), r"files\[0\].tier"),
        (lambda b: b["files"][0].update(sha256="x"), r"files\[0\].sha256"),
        (lambda b: b["partitions"][1].update(file="elsewhere"), r"partitions\[1\].file"),
        (lambda b: b["partitions"][0].update(extra=1), r"partitions\[0\]: unknown keys"),
        (lambda b: b["partitions"].append(b["partitions"][0]), r"listed twice"),
        (lambda b: b["withdrawn"].append(["NQ", "2026-01-02"]), r"withdrawn\[1\]: NQ"),
    ],
)
def test_read_catalog_when_malformed_names_the_field(tmp_path, edit, field):
    body = json.loads(sample_catalog().to_json())
    edit(body)
    (tmp_path / CATALOG_FILE).write_text(json.dumps(body))
    with pytest.raises(TickFormatError, match=field):
        read_catalog(tmp_path)


def test_relative_to_root_when_file_beside_root_resolves_back(tmp_path):
    root = tmp_path / "archive"
    cold = tmp_path / "archive-cold" / "year=2026" / "part-1.parquet"
    rel = relative_to_root(root, cold)
    assert rel == "../archive-cold/year=2026/part-1.parquet"
    assert resolve(root, rel) == cold


def test_archive_state_when_moved_hot_file_remains_marks_it_superseded(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "fsync", lambda fd: None)
    as_of = DAYS[-1] + timedelta(days=14)
    root = build_archive(tmp_path, as_of=as_of, days=DAYS[:2])
    hot_files = {h.path: h.path.read_bytes() for h in archive_state(root).hot_live}
    retier(root, as_of=as_of, policy=POLICY)
    for path, data in hot_files.items():  # put one back as a byte-identical copy (new inode)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        os.utime(path, ns=(0, 0))
        break
    state = archive_state(root)
    assert len(state.hot_live) == 1 and len(state.overridden) == 1  # a new file: shown hot
    retier(root, as_of=as_of, policy=POLICY)  # same bytes: recognised and removed
    state = archive_state(root)
    assert state.hot_live == [] and state.overridden == frozenset()
