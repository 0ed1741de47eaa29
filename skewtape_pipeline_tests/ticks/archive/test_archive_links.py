"""The archive's lock and audit log are never written through a planted symbolic link."""

from __future__ import annotations

from datetime import timedelta

import pytest

from skewtape_pipeline.errors import LinkedStateFileError
from skewtape_pipeline.ticks.archive.handle import Archive
from skewtape_pipeline.ticks.archive.ops.compact import compact_symbol_day
from skewtape_pipeline.ticks.archive.ops.compact_plan import SymbolDayWrite
from skewtape_pipeline.ticks.archive.store.layout import ARCHIVE_LOCK_FILE
from skewtape_pipeline_tests.ticks.archive_builders import DAYS, POLICY, build_archive, day_ticks
from skewtape_pipeline_tests.ticks.conftest import archive_at


def _precious(tmp_path):
    precious = tmp_path / "precious.txt"
    precious.write_text("keep me\n")
    return precious


def test_compact_symbol_day_when_the_archive_lock_is_a_planted_symlink_refuses_untouched(
    tmp_path,
):
    precious = _precious(tmp_path)
    root = tmp_path / "archive"
    root.mkdir()
    (root / ARCHIVE_LOCK_FILE).symlink_to(precious)
    with pytest.raises(LinkedStateFileError, match=ARCHIVE_LOCK_FILE):
        compact_symbol_day(
            archive_at(root, POLICY).core,
            day_ticks("ES", DAYS[0]),
            SymbolDayWrite(symbol="ES", day=DAYS[0], age_days=0),
        )
    assert precious.read_text() == "keep me\n"
    assert sorted(p.name for p in root.iterdir()) == [ARCHIVE_LOCK_FILE]


def test_retier_when_the_audit_log_is_a_planted_symlink_refuses_and_leaves_its_target(tmp_path):
    as_of = DAYS[-1] + timedelta(days=30)
    root = build_archive(tmp_path, as_of=DAYS[-1])
    precious = _precious(tmp_path)
    log = tmp_path / "audit.jsonl"
    log.symlink_to(precious)
    with pytest.raises(LinkedStateFileError, match=r"audit\.jsonl"):
        Archive(root, policy=POLICY, audit_log=log).retier(as_of=as_of)
    assert precious.read_text() == "keep me\n"
