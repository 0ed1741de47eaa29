"""How a compaction run goes (CompactionRun), what was measured of its input (SourceFacts), and
how long it waits for the archive's lock: validated when built, given once."""

from __future__ import annotations

from datetime import date

import pytest

from skewtape_pipeline.errors import ConfigError
from skewtape_pipeline.ticks.archive.ops.compact import compaction_lock_wait
from skewtape_pipeline.ticks.archive.ops.compact_plan import (
    DEFAULT_MEMORY_LIMIT,
    DEFAULT_RUN,
    CompactionRun,
    SourceFacts,
)
from skewtape_pipeline.ticks.archive.store.layout import ARCHIVE_LOCK_WAIT_SECONDS
from skewtape_pipeline.ticks.encode.sources import read_canonical
from skewtape_pipeline_tests.ticks.archive_builders import write_four_day_csv
from skewtape_pipeline_tests.ticks.conftest import LOCK_WAITS, archive_at, encoded


def test_compaction_run_when_defaulted_takes_every_symbol_in_the_default_memory():
    assert (DEFAULT_RUN.symbol, DEFAULT_RUN.memory_limit) == (None, DEFAULT_MEMORY_LIMIT)
    assert DEFAULT_RUN.on_progress is None and DEFAULT_RUN.on_read is None


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"symbol": 7}, "symbol"),
        ({"memory_limit": 1024}, "memory_limit"),
        ({"memory_limit": True}, "memory_limit"),
        ({"on_progress": "print"}, "on_progress"),
        ({"on_read": 3}, "on_read"),
    ],
)
def test_compaction_run_when_a_field_is_bad_refuses_when_built_naming_it(options, field):
    with pytest.raises(ConfigError, match=field):
        CompactionRun(**options)


@pytest.mark.parametrize(
    ("facts", "field"),
    [
        ({"raw_size_bytes": 0}, "raw_size_bytes"),
        ({"raw_size_basis": "supplied"}, "raw_size_basis"),
        ({"raw_size_bytes": 10, "raw_size_basis": "guess"}, "raw_size_basis"),
        ({"reordered_ticks": -1}, "reordered_ticks"),
        ({"reordered_ticks": 1.5}, "reordered_ticks"),
    ],
)
def test_source_facts_when_a_field_is_bad_refuses_when_built_naming_it(facts, field):
    with pytest.raises(ConfigError, match=field):
        SourceFacts(**facts)


def test_source_facts_when_size_given_without_basis_calls_it_supplied():
    assert SourceFacts(98_765).basis == "supplied"
    assert SourceFacts(98_765, "canonical_csv").basis == "canonical_csv"
    assert SourceFacts().basis is None


def test_compaction_lock_wait_when_archive_waits_longer_takes_the_longer(tmp_path):
    assert compaction_lock_wait(archive_at(tmp_path).core) == ARCHIVE_LOCK_WAIT_SECONDS
    longer = ARCHIVE_LOCK_WAIT_SECONDS + 5
    assert compaction_lock_wait(archive_at(tmp_path, lock_timeout=longer).core) == longer


@LOCK_WAITS
def test_archive_compact_records_its_version_waiting_for_the_lock_as_long_as_its_writes(
    tmp_path, version_lock_waits, lock_timeout, waited
):
    source = read_canonical(write_four_day_csv(tmp_path / "ticks.csv"))
    archive = archive_at(tmp_path / "archive", lock_timeout=lock_timeout)
    archive.compact(source, as_of=date(2025, 12, 5))
    assert version_lock_waits == [("recording a version", waited)]


def test_archive_compact_when_given_the_run_follows_it_and_the_encoding(tmp_path):
    source = read_canonical(write_four_day_csv(tmp_path / "ticks.csv"))
    archive = archive_at(tmp_path / "archive")
    done = []
    run = CompactionRun(symbol="KX-1", on_progress=lambda *counts: done.append(counts))
    reports = archive.compact(source, as_of=date(2025, 12, 5), encoding=encoded(price_scale=3),
                              run=run)  # fmt: skip
    assert {r.symbol for r in reports} == {"KX-1"}
    assert {r.price_scale for r in reports} == {3}
    assert done[-1] == (len(reports), len(reports))
    with pytest.raises(TypeError, match="price_scale"):
        archive.compact(source, as_of=date(2025, 12, 5), price_scale=2)  # type: ignore[call-arg]


@pytest.mark.parametrize(
    ("options", "field"),
    [({"as_of": "2025-12-05"}, "as_of"), ({"encoding": {"price_scale": 2}}, "encoding")],
)
def test_archive_compact_when_given_a_bad_option_refuses_naming_it_and_writes_nothing(
    tmp_path, options, field
):
    source = read_canonical(write_four_day_csv(tmp_path / "ticks.csv"))
    with pytest.raises(ConfigError, match=field):
        archive_at(tmp_path / "archive").compact(source, **{"as_of": date(2025, 12, 5), **options})
    assert not (tmp_path / "archive").exists()


def test_archive_waiting_when_asked_gives_the_archive_waiting_that_long_and_leaves_it_as_built(
    tmp_path,
):
    archive = archive_at(tmp_path, lock_timeout=0.5)
    waiting = archive.waiting(ARCHIVE_LOCK_WAIT_SECONDS)
    assert (waiting.root, waiting.policy, waiting.audit_log) == (
        archive.root, archive.policy, archive.audit_log
    )  # fmt: skip
    assert (waiting.lock_timeout, archive.lock_timeout) == (ARCHIVE_LOCK_WAIT_SECONDS, 0.5)
    with pytest.raises(ConfigError, match="lock_timeout"):
        archive.waiting(-1)
