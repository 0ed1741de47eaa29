"""Shared test builders: a small, sealed snapshot folder and its parts.

``make_snapshot(tmp_path)`` writes a few venues' fills and candles month files, the four
reference tables, a README.md, and seals the folder. Tests that need a second snapshot copy one
with :func:`copy_snapshot`, change it, and seal it again with :func:`reseal`. Import them with
``from skewtape_pipeline_tests.conftest import make_snapshot``.

Fixtures for every folder: ``published_sample`` (a small sample chain published once a session:
the first month's full snapshot and the deltas), ``published_full_snapshots`` (every month's
full snapshot as published) and ``sample_root`` (a private copy of the chain a test may change).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
from collections.abc import Iterator, Sequence
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from skewtape_pipeline.mirror.format import LOCAL_STATE_DIR
from skewtape_pipeline.mirror.snapshot import read_snapshot, seal_snapshot
from skewtape_pipeline.sample.publisher import publish_sample


def pytest_configure(config: pytest.Config) -> None:
    """A session started with SIGINT ignored (in the background of a non-interactive shell,
    under some CI runners) gets Python's own SIGINT handler: Dagster's in-process runs give
    SIGTERM SIGINT's disposition, and an ignored SIGTERM is inherited by every process a test
    starts after one, so a server or ``make ui`` the test stops with SIGTERM would never stop."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


VENUES = ("kalshi", "polymarket")
MARKETS_PER_VENUE = 3
NS = 1_000_000_000
UTC_NS = pa.timestamp("ns", tz="UTC")
PRICE = pa.decimal128(8, 4)

SAMPLE_FIRST_MONTH = "2026-09"
SAMPLE_MONTHS = 4
SAMPLE_FILLS = 500
"""Fills per venue and month of the session's sample chain: small, published in a second or two."""


def month_start_ns(month: str) -> int:
    """Nanoseconds since the epoch of the first instant of ``month`` (YYYY-MM), UTC."""
    year, mon = (int(part) for part in month.split("-"))
    days = (pa.scalar(f"{year:04d}-{mon:02d}-01").cast(pa.date32())).value
    return days * 86_400 * NS


def previous_month(month: str) -> str:
    year, mon = (int(part) for part in month.split("-"))
    return f"{year - 1}-12" if mon == 1 else f"{year:04d}-{mon - 1:02d}"


def market_ids(venue: str) -> list[str]:
    return [f"{venue[:2].upper()}-M{i}" for i in range(MARKETS_PER_VENUE)]


def fills_table(venue: str, month: str, *, rows: int = 4) -> pa.Table:
    """A few fills of ``venue`` in ``month``: ns timestamps, 4-decimal prices."""
    start = month_start_ns(month)
    ids = market_ids(venue)
    return pa.table(
        {
            "venue": pa.array([venue] * rows),
            "market_id": pa.array([ids[i % len(ids)] for i in range(rows)]),
            "trade_id": pa.array([f"{venue}-{month}-{i}" for i in range(rows)]),
            "ts": pa.array([start + i * 3_600 * NS + i for i in range(rows)], UTC_NS),
            "price": pa.array([Decimal(f"0.{4000 + 37 * i:04d}") for i in range(rows)], PRICE),
            "quantity": pa.array([10 * (i + 1) for i in range(rows)], pa.int64()),
            "taker_side": pa.array(["yes" if i % 2 == 0 else "no" for i in range(rows)]),
        }
    )


def candles_table(venue: str, month: str, *, rows: int = 3) -> pa.Table:
    start = month_start_ns(month)
    ids = market_ids(venue)
    price = [Decimal(f"0.{5000 + 11 * i:04d}") for i in range(rows)]
    return pa.table(
        {
            "venue": pa.array([venue] * rows),
            "market_id": pa.array([ids[i % len(ids)] for i in range(rows)]),
            "ts": pa.array([start + i * 86_400 * NS for i in range(rows)], UTC_NS),
            "open": pa.array(price, PRICE),
            "close": pa.array(price[::-1], PRICE),
            "volume": pa.array([100 + i for i in range(rows)], pa.int64()),
        }
    )


def markets_table(venues: Sequence[str]) -> pa.Table:
    rows = [(v, m) for v in venues for m in market_ids(v)]
    return pa.table(
        {
            "venue": pa.array([v for v, _ in rows]),
            "market_id": pa.array([m for _, m in rows]),
            "title": pa.array([f"Will {m} resolve yes?" for _, m in rows]),
            "status": pa.array(["open"] * len(rows)),
            "tick_size": pa.array([Decimal("0.0100")] * len(rows), PRICE),
            "opened_at": pa.array([1_780_000_000 * NS + i for i in range(len(rows))], UTC_NS),
        }
    )


def resolutions_table(venues: Sequence[str]) -> pa.Table:
    rows = [(v, market_ids(v)[0], seq) for v in venues for seq in (1, 2)]
    return pa.table(
        {
            "venue": pa.array([v for v, _, _ in rows]),
            "market_id": pa.array([m for _, m, _ in rows]),
            "seq": pa.array([s for _, _, s in rows], pa.int64()),
            "outcome": pa.array(["yes" if s == 2 else "pending" for _, _, s in rows]),
            "payout": pa.array([Decimal("1.0000") if s == 2 else None for _, _, s in rows], PRICE),
            "resolved_at": pa.array(
                [1_790_000_000 * NS + s if s == 2 else None for _, _, s in rows], UTC_NS
            ),
        }
    )


def matched_events_table(venues: Sequence[str]) -> pa.Table:
    first, last = venues[0], venues[-1]
    ids = list(zip(market_ids(first), market_ids(last), strict=True))
    return pa.table(
        {
            "event_id": pa.array([f"EV-{i}" for i in range(len(ids))]),
            "venue_a": pa.array([first] * len(ids)),
            "market_a": pa.array([a for a, _ in ids]),
            "venue_b": pa.array([last] * len(ids)),
            "market_b": pa.array([b for _, b in ids]),
            "confidence": pa.array([0.5 + 0.1 * i for i in range(len(ids))], pa.float64()),
        }
    )


def fees_table(venues: Sequence[str]) -> pa.Table:
    rows = [(v, c) for v in venues for c in ("default", "sports")]
    return pa.table(
        {
            "venue": pa.array([v for v, _ in rows]),
            "category": pa.array([c for _, c in rows]),
            "effective_from": pa.array([1_767_225_600 * NS] * len(rows), UTC_NS),
            "taker_bps": pa.array([7 if c == "default" else 5 for _, c in rows], pa.int32()),
            "maker_bps": pa.array([0] * len(rows), pa.int32()),
        }
    )


def reference_tables(venues: Sequence[str]) -> dict[str, pa.Table]:
    """The four reference tables for ``venues``, by file name."""
    return {
        "markets.parquet": markets_table(venues),
        "resolutions.parquet": resolutions_table(venues),
        "matched_events.parquet": matched_events_table(venues),
        "fees.parquet": fees_table(venues),
    }


def write_parquet(path: Path, table: pa.Table) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)
    return path


def make_snapshot(
    root: Path,
    *,
    month: str = "2026-11",
    venues: Sequence[str] = VENUES,
    omitted_venues: Sequence[str] = (),
    months: Sequence[str] | None = None,
    tables: dict[str, pa.Table] | None = None,
    readme: str | None = None,
    folder_name: str | None = None,
) -> Path:
    """Write and seal a small snapshot at ``root/history/<month>`` (or ``root/<folder_name>``).

    Holds fills and candles month files for each venue and each of ``months`` (default: the
    month before ``month`` and ``month``), the four reference tables (``tables`` overrides
    them by name), and a README.md. Returns the folder.
    """
    folder = root / folder_name if folder_name else root / "history" / month
    folder.mkdir(parents=True, exist_ok=False)
    for venue in venues:
        for mon in months or (previous_month(month), month):
            write_parquet(folder / "fills" / venue / f"{mon}.parquet", fills_table(venue, mon))
            write_parquet(folder / "candles" / venue / f"{mon}.parquet", candles_table(venue, mon))
    for rel, table in {**reference_tables(venues), **(tables or {})}.items():
        write_parquet(folder / rel, table)
    (folder / "README.md").write_text(readme or f"Skewtape history snapshot {month}.\n")
    seal_snapshot(
        folder,
        bundle_id=f"skewtape-history-{month}",
        month=month,
        venues=venues,
        omitted_venues=omitted_venues,
    )
    return folder


def copy_snapshot(source: Path, target: Path) -> Path:
    """Copy a snapshot folder without its local state (``.skewtape/``)."""
    shutil.copytree(source, target, ignore=shutil.ignore_patterns(LOCAL_STATE_DIR))
    return target


def reseal(folder: Path, *, month: str, venues: Sequence[str] | None = None,
           omitted_venues: Sequence[str] = ()) -> Path:  # fmt: skip
    """Seal ``folder`` again as the snapshot of ``month`` (venues kept unless given)."""
    manifest, _, _ = read_snapshot(folder)
    seal_snapshot(
        folder,
        bundle_id=f"skewtape-history-{month}",
        month=month,
        venues=tuple(venues) if venues is not None else manifest.venues,
        omitted_venues=omitted_venues,
    )
    return folder


# --- the sample chain, published once a session ------------------------------------------------


@pytest.fixture(scope="session")
def published_chain(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(data root with the first full snapshot and the deltas, every month's full snapshot)."""
    base = tmp_path_factory.mktemp("sample")
    root, full = base / "data", base / "full"
    publish_sample(
        root,
        first_month=SAMPLE_FIRST_MONTH,
        months=SAMPLE_MONTHS,
        fills_per_venue_month=SAMPLE_FILLS,
        snapshots_dir=full,
    )
    return root, full


@pytest.fixture(scope="session")
def published_sample(published_chain: tuple[Path, Path]) -> Path:
    """The published data root (never modified; copy it with ``sample_root``)."""
    return published_chain[0]


@pytest.fixture(scope="session")
def published_full_snapshots(published_chain: tuple[Path, Path]) -> Path:
    """``<month>/``: every month's full snapshot as published (never modified)."""
    return published_chain[1]


@pytest.fixture
def sample_root(published_sample: Path, tmp_path: Path) -> Path:
    """A private copy of the published sample that a test may change."""
    root = tmp_path / "data"
    shutil.copytree(published_sample, root, symlinks=True)
    return root


def rewrite_keeping_stamp(path: Path, data: bytes) -> None:
    """Change a file's bytes in place (same size, same inode) and restore its mtime_ns: a
    rewrite its (inode, size, mtime) stamp cannot see."""
    before = path.stat()
    assert len(data) == before.st_size
    with open(path, "r+b") as handle:
        handle.write(data)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))


# --- an S3 server ------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def seaweedfs():
    """A real S3-compatible server (SeaweedFS ``weed mini``) on loopback for the session, with
    the bucket ``tiers``."""
    from skewtape_pipeline_tests.scale_out.servers import start_seaweedfs

    server = start_seaweedfs("tiers")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def s3_env(seaweedfs, monkeypatch):
    """The server's credentials in the environment (where the S3 client reads them)."""
    for name, value in seaweedfs.environment().items():
        monkeypatch.setenv(name, value)
    return seaweedfs


@contextlib.contextmanager
def mounted_tmpfs(folder: Path, size: str) -> Iterator[Path]:
    """``folder`` (made here) with a tmpfs of ``size`` (``"4m"``) mounted on it for the block
    (as root: a real file system that fills up), unmounted after it."""
    folder.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], check=True)
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=True)
