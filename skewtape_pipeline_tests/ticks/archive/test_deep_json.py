"""Every JSON file of the tick archive, nested deeper than the parser's stack: one typed error
naming the file, never a RecursionError."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from skewtape_pipeline.errors import ConfigError, TickFormatError
from skewtape_pipeline.ticks.archive.core import ArchiveCore
from skewtape_pipeline.ticks.archive.handle import Archive
from skewtape_pipeline.ticks.archive.ops.query import run_query
from skewtape_pipeline.ticks.archive.store.books import BOOKS_MARKER
from skewtape_pipeline.ticks.archive.store.catalog import (
    CatalogStore,
)
from skewtape_pipeline.ticks.archive.store.catalog_format import CATALOG_METADATA_KEY
from skewtape_pipeline.ticks.archive.store.layout import ARCHIVE_MARKER, read_archive_marker
from skewtape_pipeline.ticks.archive.store.policy import TierPolicy

DEEP = b"[" * 100_000 + b"]" * 100_000
"""JSON nested far deeper than Python's recursion limit."""


def test_tier_policy_load_when_json_nested_too_deep_raises_config_error_naming_it(tmp_path):
    policy = tmp_path / "tiers.json"
    policy.write_bytes(DEEP)
    with pytest.raises(ConfigError, match=r"tiers\.json: .*nested too deep"):
        TierPolicy.load(policy)


def test_read_archive_marker_when_nested_too_deep_raises_config_error_naming_it(tmp_path):
    (tmp_path / ARCHIVE_MARKER).write_bytes(DEEP)
    with pytest.raises(ConfigError, match=f"{ARCHIVE_MARKER}: .*nested too deep"):
        read_archive_marker(tmp_path)


def test_is_books_and_records_when_marker_nested_too_deep_raises_config_error_naming_it(
    tmp_path,
):
    (tmp_path / BOOKS_MARKER).write_bytes(DEEP)
    with pytest.raises(ConfigError, match=f"{BOOKS_MARKER}: .*nested too deep"):
        Archive(tmp_path, audit_log=None).core.books.is_on()


def test_read_catalog_when_parquet_header_nested_too_deep_raises_tick_format_error(tmp_path):
    table = pa.table({"symbol": ["S"]}).replace_schema_metadata({CATALOG_METADATA_KEY: DEEP})
    pq.write_table(table, CatalogStore(tmp_path).path)
    with pytest.raises(TickFormatError, match=r"_skewtape_catalog\.parquet.*nested too deep"):
        CatalogStore(tmp_path).read()


def test_run_query_when_an_empty_archive_marker_is_nested_too_deep_raises_config_error(
    tmp_path,
):
    (tmp_path / ARCHIVE_MARKER).write_bytes(DEEP)
    with pytest.raises(ConfigError, match=f"{ARCHIVE_MARKER}: .*nested too deep"):
        run_query("SELECT count(*) FROM ticks", [ArchiveCore(tmp_path)])


def test_tier_policy_load_when_toml_nested_too_deep_raises_config_error_naming_it(tmp_path):
    policy = tmp_path / "tiers.toml"
    policy.write_text("hot_days = " + "[" * 100_000 + "]" * 100_000 + "\n")
    with pytest.raises(ConfigError, match=r"tiers\.toml: not valid TOML"):
        TierPolicy.load(policy)
