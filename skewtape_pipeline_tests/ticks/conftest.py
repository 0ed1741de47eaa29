"""Builders for tick archive tests: small exact batches, canonical CSV text, real-file paths,
and the sample chain with its first three months applied by the core (``applied_chain``)."""

from __future__ import annotations

import os
import shutil
from datetime import date, timedelta
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

from skewtape_pipeline.cli.app import main
from skewtape_pipeline.mirror.apply import apply_delta
from skewtape_pipeline.ticks.archive import core
from skewtape_pipeline.ticks.archive.handle import Archive
from skewtape_pipeline.ticks.archive.store.layout import ARCHIVE_LOCK_WAIT_SECONDS
from skewtape_pipeline.ticks.archive.store.policy import TierPolicy
from skewtape_pipeline.ticks.encode.model import SchemaRequest, TickBatch, TickSchema
from skewtape_pipeline.ticks.encode.options import TickEncoding
from skewtape_pipeline.ticks.encode.validate import day_start_ns

REAL_TICKS = Path(
    os.environ.get("SKEWTAPE_REAL_TICKS")
    or Path(__file__).resolve().parents[3] / "shared" / "data" / "real-ticks"
)
"""The real trade files: ../shared/data/real-ticks beside the repo, or $SKEWTAPE_REAL_TICKS."""
KALSHI_FILE = REAL_TICKS / "jdkatz21__Prediction_Markets_Public__trade_level_data_payrolls.csv"
TARDIS_FILE = REAL_TICKS / "nautechsystems__nautilus_trader__tardis_trades.csv"
LOBSTER_FILE = REAL_TICKS / "aronbencsiknu__KV6003-thesis__Amazon__message.csv"

DAY = date(2026, 11, 20)
DAY_NS = day_start_ns(DAY)


def make_batch(
    rows: list[tuple[int, int, int, int]], *, price_scale: int = 4, quantity_scale: int = 0
) -> TickBatch:
    """A batch from ``(ts_ns, price_units, quantity_units, side_code)`` rows."""
    ts, price, qty, side = zip(*rows, strict=True) if rows else ((), (), (), ())
    return TickBatch.from_units(
        list(ts), list(price), list(qty), list(side),
        TickSchema(price_scale=price_scale, quantity_scale=quantity_scale),
    )  # fmt: skip


def day_batch(n: int = 50, *, start: int = DAY_NS, price_scale: int = 4) -> TickBatch:
    """``n`` sorted ticks on :data:`DAY` with a duplicate timestamp and every side."""
    rows = []
    for i in range(n):
        ts = start + 7_000 * (i // 2)
        rows.append((ts, 1_500_000 + (i * 37) % 11 - 5, 1 + (i * 13) % 97, i % 3))
    return make_batch(rows, price_scale=price_scale)


def archive_at(root: Path, policy: TierPolicy | None = None, **options) -> Archive:
    """The ``Archive`` at ``root`` under ``policy``, not audited unless ``audit_log`` is given
    (``options``: the Archive's other options)."""
    return Archive(root, policy=policy, **{"audit_log": None, **options})


def encoded(
    timestamp_unit: str | None = None,
    price_scale: int | None = None,
    quantity_scale: int | None = None,
    **options,
) -> TickEncoding:
    """A ``TickEncoding`` fixing the schema fields given (``options``: its other fields)."""
    return TickEncoding(SchemaRequest(timestamp_unit, price_scale, quantity_scale), **options)


def write_text(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def compact(capsys, source: Path, archive: Path, *options: str) -> tuple[int, str]:
    """``compact-ticks source --out archive`` as of the day after :data:`DAY`: its exit code
    and what it wrote to stderr."""
    code = main(["compact-ticks", str(source), "--out", str(archive), "--as-of",
                 (DAY + timedelta(days=1)).isoformat(), *options])  # fmt: skip
    return code, capsys.readouterr().err


def archive_files(archive: Path) -> dict[str, bytes]:
    """Every file under ``archive`` (relative path to its bytes)."""
    return {str(f.relative_to(archive)): f.read_bytes() for f in archive.rglob("*") if f.is_file()}


def refused_once(err: str, path: Path, row: int, field: str) -> None:
    """``err`` is one error line naming ``path``, ``row`` and ``field``, no traceback."""
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert f"row {row}, field {field}: {path}" in err, err


def duckdb_archive(root: Path) -> pa.Table:
    """Everything DuckDB reads from the archive under ``root`` (plain glob + hive partitions)."""
    query = f"SELECT * FROM read_parquet('{root}/**/*.parquet', hive_partitioning=true)"
    return duckdb.sql(query).to_arrow_table()


def archive_rows(table: pa.Table) -> list[tuple]:
    """Sorted ``(symbol, ts_ns, price, quantity, side)`` tuples from a DuckDB result."""
    ts = table.column("ts").cast(pa.timestamp("ns", tz="UTC")).cast(pa.int64()).to_pylist()
    rows = zip(
        table.column("symbol").to_pylist(),
        ts,
        table.column("price").to_pylist(),
        table.column("quantity").to_pylist(),
        table.column("side").to_pylist(),
        strict=True,
    )
    return sorted(rows)


APPLIED_MONTHS = ("2026-10", "2026-11")
"""The months the applied chain applies (after the published first month, 2026-09)."""


@pytest.fixture(scope="session")
def applied_chain_once(published_sample: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data root whose first three months are applied (history/2026-09..11), once a session."""
    root = tmp_path_factory.mktemp("applied") / "data"
    shutil.copytree(published_sample, root, symlinks=True)
    history, parent = root / "history", "2026-09"
    for month in APPLIED_MONTHS:
        apply_delta(
            history / parent,
            root / "deltas" / month,
            into=history / month,
            audit_log=root / "audit.jsonl",
        )
        parent = month
    return root


@pytest.fixture
def applied_chain(applied_chain_once: Path, tmp_path: Path) -> Path:
    """A private copy of the applied chain (hard links kept as copies) that a test may change."""
    root = tmp_path / "applied"
    shutil.copytree(applied_chain_once, root, symlinks=True)
    return root


@pytest.fixture
def no_fsync(monkeypatch):
    """Durability is not what the tests that take this check (archives of thousands of tiny
    files): skip fsync to keep them fast."""
    monkeypatch.setattr(os, "fsync", lambda fd: None)


LOCK_WAITS = pytest.mark.parametrize(
    ("lock_timeout", "waited"),
    [
        (0.0, ARCHIVE_LOCK_WAIT_SECONDS),
        (ARCHIVE_LOCK_WAIT_SECONDS + 300, ARCHIVE_LOCK_WAIT_SECONDS + 300),
    ],
    ids=["default", "longer"],
)
"""An archive's ``lock_timeout`` and how long its writers wait to record a version: the
default archive waits the floor, one waiting longer its own timeout."""


@pytest.fixture
def version_lock_waits(monkeypatch) -> list[tuple[str, float]]:
    """``(what, timeout)`` of every archive lock taken to record a version, as taken (the core's
    lock, ``ArchiveCore.locked``, held for ``"recording a version"``)."""
    waits: list[tuple[str, float]] = []
    real_lock = core.archive_lock

    def recording_lock(lock_file, *, timeout, what):
        if what == "recording a version":
            waits.append((what, timeout))
        return real_lock(lock_file, timeout=timeout, what=what)

    monkeypatch.setattr(core, "archive_lock", recording_lock)
    return waits
