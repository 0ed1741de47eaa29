"""Bytes the product reads itself reach pyarrow as copies in Arrow's memory, never as Python
memory (freeing a wrapper of Python memory on an Arrow thread at interpreter exit aborts the
process: see ``skewtape_pipeline.arrow_memory``)."""

from __future__ import annotations

import os
import subprocess
import sys
from decimal import Decimal

import pyarrow as pa
import pytest

from skewtape_pipeline.arrow_memory import LEAN_POOL, owned_buffer, owned_reader, use_lean_pool
from skewtape_pipeline.sample.tables import decimal_array
from skewtape_pipeline.ticks.archive.handle import Archive
from skewtape_pipeline.ticks.archive.store.catalog import (
    CatalogStore,
)
from skewtape_pipeline.ticks.encode import sources
from skewtape_pipeline_tests.ticks.archive_builders import POLICY, STAGE_1, build_archive, view_rows
from skewtape_pipeline_tests.ticks.conftest import write_text


@pytest.fixture
def python_memory_refused(monkeypatch):
    """``pa.py_buffer`` raises, and so does ``pa.BufferReader`` over anything but an Arrow
    buffer (its wrapping of ``bytes`` goes through Python memory)."""
    arrow_reader = pa.BufferReader

    def refuse(*args, **kwargs):
        raise AssertionError("Python memory handed to pyarrow")

    def reader(source):
        if not isinstance(source, pa.Buffer):
            refuse()
        return arrow_reader(source)

    monkeypatch.setattr(pa, "py_buffer", refuse)
    monkeypatch.setattr(pa, "BufferReader", reader)


def test_owned_buffer_when_the_source_changes_keeps_its_copy_in_arrow_memory():
    source = bytearray(b"tick" * 4096)
    allocated_before = pa.total_allocated_bytes()
    buffer = owned_buffer(source)
    assert pa.total_allocated_bytes() - allocated_before >= len(source)
    source[:4] = b"XXXX"
    assert buffer.to_pybytes() == b"tick" * 4096
    assert owned_reader(b"ab").read() == b"ab"
    assert owned_buffer(b"").size == 0


def test_retier_when_reading_hot_files_and_the_catalog_hands_arrow_only_its_own_memory(
    tmp_path, no_fsync, python_memory_refused
):
    root = build_archive(tmp_path, as_of=STAGE_1)
    expected = view_rows(root)
    result = Archive(root, policy=POLICY, audit_log=None).retier(as_of=STAGE_1)
    assert result.committed and result.moved
    assert CatalogStore(root).read().generation >= 1
    assert view_rows(root) == expected


def test_csv_line_lengths_and_decimal_arrays_when_built_hand_arrow_only_its_own_memory(
    tmp_path, python_memory_refused
):
    text = "timestamp_nanos,price,quantity,side,symbol\n1700000000000000000,1.5,2,BUY,CL\n"
    source = sources.read_canonical(write_text(tmp_path / "ticks.csv", text))
    assert source.row_bytes.to_pylist() == [len(text.splitlines(keepends=True)[1])]
    assert decimal_array([15_000, -1]).to_pylist() == [Decimal("1.5000"), Decimal("-0.0001")]


# --- the pool the entry points choose -----------------------------------------------------------

POOL_AFTER = """
import sys
from skewtape_pipeline.cli.app import main
main(sys.argv[1:])
import pyarrow as pa
print(pa.default_memory_pool().backend_name)
"""


def pool_after_command(argv: list[str], pool_variable: str | None = None) -> str:
    """The Arrow pool a fresh interpreter allocates from after the CLI ran ``argv``."""
    env = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    if pool_variable:
        env["ARROW_DEFAULT_MEMORY_POOL"] = pool_variable
    done = subprocess.run([sys.executable, "-c", POOL_AFTER, *argv], env=env,
                          capture_output=True, text=True, check=True)  # fmt: skip
    return done.stdout.split()[-1]


def test_archive_command_allocates_from_jemalloc_unless_the_user_named_a_pool(tmp_path):
    try:
        pa.jemalloc_memory_pool()
    except NotImplementedError:
        pytest.skip("this pyarrow was built without jemalloc")
    root = build_archive(tmp_path / "a", as_of=STAGE_1)
    assert pool_after_command(["verify-archive", str(root)]) == LEAN_POOL == "jemalloc"
    assert pool_after_command(["verify-archive", str(root)], "system") == "system"


def test_use_lean_pool_when_pyarrow_lacks_jemalloc_keeps_the_default(monkeypatch):
    def unbuilt():
        raise NotImplementedError("This Arrow build does not enable jemalloc")

    monkeypatch.delenv("ARROW_DEFAULT_MEMORY_POOL", raising=False)
    monkeypatch.setattr(pa, "jemalloc_memory_pool", unbuilt)
    before = pa.default_memory_pool().backend_name
    assert use_lean_pool() == before
    assert pa.default_memory_pool().backend_name == before
