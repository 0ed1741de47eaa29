"""Delta apply benchmark: the published reference applier, ours in both modes, and the floor.

Run with ``make bench`` or directly::

    .venv/bin/python benchmarks/delta_apply.py [--month-mb 520] [--markets 1200000] [--repeat 1]

Generates (once per ``--workdir``; reused when present) a parent snapshot, the next one and the
delta between them with the project's ``seal_snapshot`` and ``build_delta``: over 1 GB of month
files in the delta, a markets table of over a million rows, and every op (add, replace of a
corrected closed month, delete of a leaving venue's months, change of the four tables). Then it
times, in one run, each contender on its own fresh copy of the parent (the copy and the warm-up
of its hash cache are not timed; everything the contender does is):

- reference: the published ``apply_delta`` re-implemented faithfully (hash each source, copy,
  the same DuckDB anti-join/union/order query, ``.new`` then rename);
- ours, in place, and ours, versioned (``into=`` a new month folder beside the parent);
- floor: sha256 of every byte of the delta once plus the same table merges alone.

The same snapshots are also published by the test suite's minimal publisher (written from the
published format alone: a snapshot manifest that records no files, uppercase binary CHECKSUMS
lines with CRLF ends), and every contender runs on that delta too. For each run it prints the
bytes hashed per phase and the bytes hashed more than once (counted per file identity, device
and inode), so it is visible that no byte is hashed twice.

Prints a markdown table per delta of seconds per phase, bytes hashed per phase and the ratios,
and PASS/FAIL for the bars.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import hashlib
import json
import os
import pathlib
import shutil
import stat
import sys
import tempfile
import threading
import time
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parent.parent))  # the tests' minimal publisher

from bench_util import markdown_table

REFERENCE_KEYS = {
    "markets.parquet": ["venue", "market_id"],
    "resolutions.parquet": ["venue", "market_id", "seq"],
    "matched_events.parquet": ["event_id"],
    "fees.parquet": ["venue", "category", "effective_from"],
}
KEPT_VENUES = ("kalshi", "polymarket")
LEAVING_VENUE = "augur"
PARENT_MONTHS = ("2026-08", "2026-09", "2026-10", "2026-11")
NEXT_MONTH = "2026-12"
CORRECTED = ("kalshi", "2026-10")
TS_NS = pa.timestamp("ns", tz="UTC")
TS_US = pa.timestamp("us", tz="UTC")
DECIMAL = pa.decimal128(10, 4)
VERSIONED_BAR = 1.5
FLOOR_BAR = 1.3


# --- data generation --------------------------------------------------------------------


def decimal_units(units: np.ndarray) -> pa.Array:
    """decimal128(10, 4) from integer units of 1/10_000 (exact, no float)."""
    words = np.zeros((len(units), 2), dtype=np.int64)
    words[:, 0] = units
    words[:, 1] = np.where(units < 0, -1, 0)
    return pa.Array.from_buffers(DECIMAL, len(units), [None, pa.py_buffer(words.tobytes())])


def prefixed(prefix: str, numbers: np.ndarray) -> pa.Array:
    """``prefix`` + zero-padded ``numbers`` as a string array, built in Arrow."""
    text = pc.utf8_lpad(pa.array(numbers).cast(pa.string()), 8, "0")
    return pc.binary_join_element_wise(pa.scalar(prefix), text, "")


def month_start_ns(month: str) -> int:
    return int(np.datetime64(month + "-01", "ns").astype(np.int64))


def write_until(path: Path, schema: pa.Schema, batches, target_bytes: int) -> int:
    """Write row groups from ``batches`` until the file reaches ``target_bytes``; rows written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = 0
    with pq.ParquetWriter(path, schema, compression="zstd", compression_level=1) as writer:
        for batch in batches:
            writer.write_table(batch, row_group_size=131_072)
            rows += batch.num_rows
            if path.stat().st_size >= target_bytes:
                break
    return rows


def fills_batches(venue: str, month: str, seed: int, markets: int):
    rng = np.random.default_rng(seed)
    ts = month_start_ns(month)
    trade = 0
    while True:
        n = 1_000_000
        ts_col = ts + np.cumsum(rng.integers(0, 2_000_000, n) * 1000)
        ts = int(ts_col[-1])
        yield pa.table(
            {
                "venue": pa.array(np.full(n, venue)),
                "market_id": prefixed(f"{venue[:2].upper()}-", rng.integers(0, markets, n)),
                "trade_id": prefixed(f"{seed}-", trade + np.arange(n)),
                "ts": pa.array(ts_col).view(TS_NS),
                "price": decimal_units(rng.integers(1, 100, n) * 100),
                "quantity": pa.array(np.minimum(rng.zipf(1.6, n), 100_000).astype(np.int64)),
                "taker_side": pa.array(np.where(rng.random(n) < 0.5, "yes", "no")),
            }
        )
        trade += n


def candles_batches(venue: str, month: str, seed: int, markets: int):
    rng = np.random.default_rng(seed)
    bucket = month_start_ns(month)
    while True:
        n = 500_000
        close = rng.integers(1, 100, n) * 100
        yield pa.table(
            {
                "venue": pa.array(np.full(n, venue)),
                "market_id": prefixed(f"{venue[:2].upper()}-", rng.integers(0, markets, n)),
                "bucket": pa.array(np.full(n, bucket, dtype=np.int64)).view(TS_NS),
                "open": decimal_units(close),
                "high": decimal_units(close + 100),
                "low": decimal_units(np.maximum(close - 100, 0)),
                "close": decimal_units(close),
                "volume": pa.array(rng.integers(1, 10_000, n)),
                "trades": pa.array(rng.integers(1, 100, n)),
            }
        )
        bucket += 3_600 * 10**9


def markets_table(n: int, seed: int) -> pa.Table:
    """``n`` markets over the three venues (the leaving venue holds 2%), sorted by key."""
    rng = np.random.default_rng(seed)
    venue = np.where(
        rng.random(n) < 0.02, LEAVING_VENUE, np.where(rng.random(n) < 0.6, *KEPT_VENUES)
    )
    ids = np.arange(n)
    open_us = 1_780_000_000_000_000 + rng.integers(0, 10**13, n)
    table = pa.table(
        {
            "venue": pa.array(venue),
            "market_id": pc.binary_join_element_wise(
                pc.utf8_upper(pc.utf8_slice_codeunits(pa.array(venue), 0, 2)),
                pa.scalar("-"),
                pc.utf8_lpad(pa.array(ids).cast(pa.string()), 8, "0"),
                "",
            ),
            "title": prefixed("Will the outcome of question ", ids),
            "category": pa.array(rng.choice(["crypto", "economics", "politics", "sports"], n)),
            "open_time": pa.array(open_us).view(TS_US),
            "close_time": pa.array(open_us + 30 * 86_400 * 10**6).view(TS_US),
            "tick_size": decimal_units(np.full(n, 100)),
            "status": pa.array(rng.choice(["open", "closed", "settled"], n)),
        }
    )
    return table.sort_by([("venue", "ascending"), ("market_id", "ascending")])


def resolutions_table(markets: pa.Table, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    pick = markets.take(np.sort(rng.choice(markets.num_rows, markets.num_rows // 4, replace=False)))
    n = pick.num_rows
    return pa.table(
        {
            "venue": pick["venue"],
            "market_id": pick["market_id"],
            "seq": pa.array(np.ones(n, dtype=np.int64)),
            "resolved_at": pick["close_time"],
            "outcome": pa.array(rng.choice(["yes", "no"], n)),
            "settlement_price": decimal_units(rng.choice([0, 10_000], n)),
            "note": pa.array(np.full(n, "")),
        }
    )


def matched_events_table(n: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    ids = np.arange(n)
    return pa.table(
        {
            "event_id": prefixed("EV-", ids),
            "title": prefixed("Matched event ", ids),
            "category": pa.array(rng.choice(["crypto", "economics", "politics", "sports"], n)),
            "kalshi_market_id": prefixed("KA-", rng.integers(0, 10**6, n)),
            "polymarket_market_id": prefixed("PO-", rng.integers(0, 10**6, n)),
            "match_confidence": decimal_units(rng.integers(5_000, 10_001, n)),
            "reviewed": pa.array(rng.random(n) < 0.5),
            "matched_at": pa.array(1_780_000_000_000_000 + ids * 10**6).view(TS_US),
        }
    )


def fees_table() -> pa.Table:
    rows = [
        (venue, category, 1_700_000_000_000_000 + i * 86_400 * 10**6)
        for venue in (*KEPT_VENUES, LEAVING_VENUE)
        for category in ("crypto", "economics", "politics", "sports")
        for i in range(10)
    ]
    n = len(rows)
    return pa.table(
        {
            "venue": pa.array([r[0] for r in rows]),
            "category": pa.array([r[1] for r in rows]),
            "effective_from": pa.array(np.array([r[2] for r in rows])).view(TS_US),
            "taker_fee": decimal_units(np.full(n, 700)),
            "maker_fee": decimal_units(np.full(n, 0)),
            "fee_basis": pa.array(np.full(n, "price*(1-price)")),
        }
    )


def next_tables(parent: Path, seed: int) -> dict[str, pa.Table]:
    """The parent's tables with the month's changes: edits, new rows, the leaving venue gone."""
    rng = np.random.default_rng(seed)
    out = {}
    markets = pq.read_table(parent / "markets.parquet")
    markets = markets.filter(pc.not_equal(markets["venue"], LEAVING_VENUE))
    status = markets["status"].to_numpy(zero_copy_only=False).copy()
    edited = rng.random(len(status)) < 0.01
    status[edited] = "settled"
    markets = markets.set_column(
        markets.schema.get_field_index("status"), "status", pa.array(status)
    )
    new = markets_table(40_000, seed + 1)
    new = new.filter(pc.not_equal(new["venue"], LEAVING_VENUE))
    new = new.set_column(1, "market_id", prefixed("NEW-", np.arange(new.num_rows)))
    out["markets.parquet"] = pa.concat_tables([markets, new])
    resolutions = pq.read_table(parent / "resolutions.parquet")
    resolutions = resolutions.filter(pc.not_equal(resolutions["venue"], LEAVING_VENUE))
    out["resolutions.parquet"] = pa.concat_tables([resolutions, resolutions_table(new, seed + 2)])
    matched = pq.read_table(parent / "matched_events.parquet")
    reviewed = matched["reviewed"].to_numpy(zero_copy_only=False).copy()
    reviewed[rng.random(len(reviewed)) < 0.02] = True
    index = matched.schema.get_field_index("reviewed")
    out["matched_events.parquet"] = matched.set_column(index, "reviewed", pa.array(reviewed))
    fees = pq.read_table(parent / "fees.parquet")
    out["fees.parquet"] = fees.filter(pc.not_equal(fees["venue"], LEAVING_VENUE))
    return out


def write_table_sorted(table: pa.Table, path: Path) -> None:
    keys = REFERENCE_KEYS[path.name]
    table = table.sort_by([(k, "ascending") for k in keys])
    pq.write_table(table, path, compression="zstd", row_group_size=131_072)


def generate(root: Path, *, month_mb: int, parent_month_mb: int, markets: int) -> dict[str, Path]:
    """Parent, next and delta under ``root`` (reused if ``root/READY`` exists)."""
    from skewtape_pipeline.mirror.diff import build_delta
    from skewtape_pipeline.mirror.snapshot import seal_snapshot

    paths = {
        "parent": root / "history" / PARENT_MONTHS[-1],
        "next": root / "published" / NEXT_MONTH,
        "delta": root / "deltas" / NEXT_MONTH,
    }
    if (root / "READY").exists():
        return paths
    shutil.rmtree(root, ignore_errors=True)
    parent, nxt = paths["parent"], paths["next"]
    mb = 1 << 20
    seed = 1
    for venue in (*KEPT_VENUES, LEAVING_VENUE):
        for month in PARENT_MONTHS:
            seed += 1
            rel = f"fills/{venue}/{month}.parquet"
            write_until(parent / rel, *_fills(venue, month, seed), parent_month_mb * mb)
            rel = f"candles/{venue}/{month}.parquet"
            write_until(parent / rel, *_candles(venue, month, seed), parent_month_mb * mb // 8)
    table = markets_table(markets, 7)
    write_table_sorted(table, parent / "markets.parquet")
    write_table_sorted(resolutions_table(table, 8), parent / "resolutions.parquet")
    write_table_sorted(matched_events_table(200_000, 9), parent / "matched_events.parquet")
    write_table_sorted(fees_table(), parent / "fees.parquet")
    (parent / "README.md").write_text(f"Skewtape history {PARENT_MONTHS[-1]} (benchmark data)\n")
    all_venues = (*KEPT_VENUES, LEAVING_VENUE)
    seal_snapshot(parent, bundle_id="bench-history-2026-11", month="2026-11", venues=all_venues)

    for source in parent.rglob("*"):
        rel = source.relative_to(parent)
        if source.is_file() and rel.parts[0] != ".skewtape" and LEAVING_VENUE not in rel.parts:
            (nxt / rel).parent.mkdir(parents=True, exist_ok=True)
            os.link(source, nxt / rel)
    for name in ("manifest.json", "CHECKSUMS.sha256"):
        (nxt / name).unlink()
    for rel, table in next_tables(parent, 11).items():
        (nxt / rel).unlink()
        write_table_sorted(table, nxt / rel)
    for venue in KEPT_VENUES:
        seed += 1
        write_until(
            nxt / f"fills/{venue}/{NEXT_MONTH}.parquet",
            *_fills(venue, NEXT_MONTH, seed),
            month_mb * mb,
        )
        write_until(
            nxt / f"candles/{venue}/{NEXT_MONTH}.parquet",
            *_candles(venue, NEXT_MONTH, seed),
            month_mb * mb // 16,
        )
    corrected = nxt / f"fills/{CORRECTED[0]}/{CORRECTED[1]}.parquet"
    corrected.unlink()
    write_until(corrected, *_fills(*CORRECTED, 999), parent_month_mb * mb)
    (nxt / "README.md").unlink()
    (nxt / "README.md").write_text(f"Skewtape history {NEXT_MONTH} (benchmark data)\n")
    seal_snapshot(
        nxt,
        bundle_id="bench-history-2026-12",
        month=NEXT_MONTH,
        venues=KEPT_VENUES,
        omitted_venues=(LEAVING_VENUE,),
    )
    build_delta(parent, nxt, paths["delta"])
    (root / "READY").write_text("ok\n")
    return paths


def generate_minimal(root: Path, sample: dict[str, Path]) -> dict[str, Path]:
    """The same two snapshots and their delta as the minimal publisher writes them (reused if
    ``root/READY`` exists): month files hard-linked from ``sample``'s, sealed its way."""
    from skewtape_pipeline_tests.mirror import minimal_publisher as minimal

    paths = {
        "parent": root / "history" / PARENT_MONTHS[-1],
        "next": root / "published" / NEXT_MONTH,
        "delta": root / "deltas" / NEXT_MONTH,
    }
    if (root / "READY").exists():
        return paths
    shutil.rmtree(root, ignore_errors=True)
    style = minimal.STYLES["terse"]
    sealed = {}
    for key, venues in (("parent", (*KEPT_VENUES, LEAVING_VENUE)), ("next", KEPT_VENUES)):
        for source in sample[key].rglob("*"):
            rel = source.relative_to(sample[key])
            seal = rel.as_posix() in ("manifest.json", "CHECKSUMS.sha256")
            if source.is_file() and rel.parts[0] != ".skewtape" and not seal:
                (paths[key] / rel).parent.mkdir(parents=True, exist_ok=True)
                os.link(source, paths[key] / rel)
        bundle = f"minimal-history-{paths[key].name}"
        sealed[key] = minimal.seal_folder(paths[key], bundle_id=bundle, venues=venues, style=style)
    minimal.publish_delta(
        sealed["parent"], sealed["next"], paths["delta"], omitted_venues=(LEAVING_VENUE,),
        style=style,
    )  # fmt: skip
    (root / "READY").write_text("ok\n")
    return paths


def _fills(venue: str, month: str, seed: int):
    schema = next(fills_batches(venue, month, seed, 1)).schema
    return schema, fills_batches(venue, month, seed, 20_000)


def _candles(venue: str, month: str, seed: int):
    schema = next(candles_batches(venue, month, seed, 1)).schema
    return schema, candles_batches(venue, month, seed, 20_000)


# --- the reference applier (the published one, with phase timers) ------------------------


REFERENCE_HASHED = {"bytes": 0}
"""Bytes the reference applier hashed (its sha256 calls, counted; the code is unchanged)."""


def _ref_sha256(path):
    REFERENCE_HASHED["bytes"] += os.stat(path).st_size
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _ref_inside(root, rel):
    parts = pathlib.PurePosixPath(rel).parts
    if not parts or rel.startswith("/") or ".." in parts:
        raise ValueError(f"refusing the path {rel!r}")
    return root.joinpath(*parts)


def reference_apply_delta(snapshot, delta) -> dict[str, float]:
    """The published ``apply_delta``, statement for statement; returns seconds per phase."""
    phases = dict.fromkeys(("hash", "copy", "merge", "delete"), 0.0)
    clock = time.perf_counter
    snapshot, delta = pathlib.Path(snapshot), pathlib.Path(delta)
    t = clock()
    raw = (delta / "manifest.json").read_bytes()
    listed = (delta / "CHECKSUMS.sha256").read_text().splitlines()
    if f"{hashlib.sha256(raw).hexdigest()}  manifest.json" not in listed:
        raise ValueError("the delta's CHECKSUMS.sha256 does not list its manifest.json")
    manifest = json.loads(raw)
    parent, nxt = manifest["parent"], manifest["next"]
    if _ref_sha256(snapshot / "manifest.json") not in (
        parent["manifest_sha256"],
        nxt["manifest_sha256"],
    ):
        raise ValueError(f"{snapshot} holds neither {parent['bundle_id']} nor {nxt['bundle_id']}")
    con = duckdb.connect()
    phases["hash"] += clock() - t
    for f in manifest["files"]:
        target = _ref_inside(snapshot, f["path"])
        if f["op"] == "delete":
            t = clock()
            target.unlink(missing_ok=True)
            phases["delete"] += clock() - t
            continue
        source = _ref_inside(delta, f["source"])
        t = clock()
        if _ref_sha256(source) != f["sha256"]:
            raise ValueError(f"{source} is not the file the delta's manifest names")
        phases["hash"] += clock() - t
        t = clock()
        if f["op"] in ("add", "replace"):
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)
            phases["copy"] += clock() - t
        elif f["op"] == "change":
            keys = ", ".join(REFERENCE_KEYS[f["path"]])
            new = target.with_name(target.name + ".new")
            con.sql(
                REFERENCE_MERGE.format(keys=keys),
                params={"target": str(target), "changes": str(source)},
            ).write_parquet(str(new))
            new.replace(target)
            phases["merge"] += clock() - t
        else:
            raise ValueError(f"unknown op {f['op']!r} for {f['path']}")
    return phases


REFERENCE_MERGE = """
                SELECT * FROM (
                  SELECT base.* FROM read_parquet($target) AS base
                  ANTI JOIN (SELECT row.* FROM read_parquet($changes)) AS ch USING ({keys})
                  UNION ALL BY NAME
                  SELECT row.* FROM read_parquet($changes) WHERE op = 'upsert'
                ) ORDER BY {keys}
                """


# --- the floor ------------------------------------------------------------------------------


def floor(snapshot: Path, delta: Path, scratch: Path) -> dict[str, float]:
    """sha256 of every byte of the delta once, plus the same table merges alone (to scratch)."""
    from skewtape_pipeline.hashing import sha256_files

    clock = time.perf_counter
    t = clock()
    sha256_files(p for p in delta.rglob("*") if p.is_file())
    hashed = clock() - t
    manifest = json.loads((delta / "manifest.json").read_bytes())
    con = duckdb.connect()
    t = clock()
    for f in manifest["files"]:
        if f["op"] == "change":
            keys = ", ".join(REFERENCE_KEYS[f["path"]])
            con.sql(
                REFERENCE_MERGE.format(keys=keys),
                params={"target": str(snapshot / f["path"]), "changes": str(delta / f["source"])},
            ).write_parquet(str(scratch / f["path"]))
    return {"hash": hashed, "merge": clock() - t}


# --- counting the bytes hashed ---------------------------------------------------------------


class HashMeter:
    """Counts the bytes our engine hashes, per apply phase and per file identity.

    While active, every ``sha256_file``/``sha256_bytes`` of ``skewtape_pipeline.hashing`` (and
    every module's imported name for them; ``sha256_files`` calls ``sha256_file``) is wrapped;
    the current phase is the one the applier's phase clock is timing (``apply`` when it has
    none). A file hashed twice (same device and inode) adds its size to ``twice`` again.
    """

    def __init__(self) -> None:
        self.by_phase: dict[str, int] = {}
        self.twice = 0
        self._seen: set[tuple[int, int]] = set()
        self._phase = ["apply"]
        self._lock = threading.Lock()  # sha256_files hashes on a thread pool

    def _count(self, phase: str, size: int, identity: tuple[int, int] | None) -> None:
        with self._lock:
            self._count_locked(phase, size, identity)

    def _count_locked(self, phase: str, size: int, identity: tuple[int, int] | None) -> None:
        self.by_phase[phase] = self.by_phase.get(phase, 0) + size
        if identity is not None:
            if identity in self._seen:
                self.twice += size
            self._seen.add(identity)

    @contextlib.contextmanager
    def active(self):
        from skewtape_pipeline import hashing
        from skewtape_pipeline.mirror import apply

        original_file, original_bytes = hashing.sha256_file, hashing.sha256_bytes

        def counted_file(path):
            st = os.stat(path)
            self._count(self._phase[-1], st.st_size, (st.st_dev, st.st_ino))
            return original_file(path)

        def counted_bytes(data):
            self._count(self._phase[-1], len(data), None)
            return original_bytes(data)

        patched = []
        for module in [m for name, m in sys.modules.items() if name.startswith("skewtape_")]:
            for attr, original, wrapper in (
                ("sha256_file", original_file, counted_file),
                ("sha256_bytes", original_bytes, counted_bytes),
            ):
                if getattr(module, attr, None) is original:
                    setattr(module, attr, wrapper)
                    patched.append((module, attr, original))
        clock = getattr(apply, "_Clock", None)
        original_phase = getattr(clock, "phase", None)
        if original_phase is not None:

            @contextlib.contextmanager
            def phase(clock_self, name):
                self._phase.append(name)
                try:
                    with original_phase(clock_self, name):
                        yield
                finally:
                    self._phase.pop()

            clock.phase = phase
        try:
            yield self
        finally:
            for module, attr, original in patched:
                setattr(module, attr, original)
            if original_phase is not None:
                clock.phase = original_phase

    def summary(self) -> str:
        parts = [f"{k} {v / 1e6:,.0f}" for k, v in self.by_phase.items() if v >= 500_000]
        return ", ".join(parts) or "-"


# --- running the contenders ---------------------------------------------------------------


@dataclasses.dataclass
class Run:
    name: str
    seconds: float
    phases: dict[str, float]
    check: str
    hashed: str = "-"
    """MB hashed per phase."""
    hashed_twice: str = "-"
    """MB hashed more than once."""


def _writable(func, path, _exc):
    """rmtree helper: snapshot files and folders may have been made read-only."""
    os.chmod(os.path.dirname(path), stat.S_IRWXU)
    os.chmod(path, stat.S_IRWXU)
    func(path)


def remove(path: Path) -> None:
    if path.exists():
        shutil.rmtree(path, onexc=_writable) if sys.version_info >= (3, 12) else shutil.rmtree(
            path, onerror=_writable
        )


def fresh_copy(source: Path, target: Path) -> Path:
    """A byte copy with its own inodes (no local state), flushed to disk before timing."""
    shutil.copytree(source, target, ignore=shutil.ignore_patterns(".skewtape"))
    return target


def _snapshot_files(folder: Path) -> dict[str, Path]:
    return {
        p.relative_to(folder).as_posix(): p
        for p in folder.rglob("*")
        if p.is_file() and ".skewtape" not in p.relative_to(folder).parts
    }


def light_check(folder: Path, published: Path) -> str:
    """Same files as the published next snapshot, same sizes (tables: same row counts), the
    published manifest.json byte for byte. Reads no manifest field, so it checks either
    publisher's snapshots."""
    problems = []
    if (folder / "manifest.json").read_bytes() != (published / "manifest.json").read_bytes():
        problems.append("manifest.json differs")
    present, listed = _snapshot_files(folder), _snapshot_files(published)
    if present.keys() != listed.keys():
        problems.append(
            f"files differ: extra {sorted(present.keys() - listed.keys())[:3]}, "
            f"missing {sorted(listed.keys() - present.keys())[:3]}"
        )
    for rel in present.keys() & listed.keys():
        if rel in REFERENCE_KEYS:
            rows = (pq.ParquetFile(p).metadata.num_rows for p in (present[rel], listed[rel]))
            if len(set(rows)) != 1:
                problems.append(f"{rel}: rows differ")
        elif present[rel].stat().st_size != listed[rel].stat().st_size:
            problems.append(f"{rel}: size differs")
    return "ok" if not problems else "; ".join(problems)


def _mb(n: int) -> str:
    return f"{n / 1e6:,.0f}"


def run_reference(parent: Path, delta: Path, work: Path, published: Path) -> Run:
    snapshot = fresh_copy(parent, work / "history" / PARENT_MONTHS[-1])
    delta = fresh_copy(delta, work / "delta")
    os.sync()
    REFERENCE_HASHED["bytes"] = 0
    start = time.perf_counter()
    phases = reference_apply_delta(snapshot, delta)
    seconds = time.perf_counter() - start
    hashed = f"hash {_mb(REFERENCE_HASHED['bytes'])}"
    return Run(
        "reference (published apply_delta)",
        seconds,
        phases,
        light_check(snapshot, published),
        hashed=hashed,
    )


def run_ours(parent: Path, delta: Path, work: Path, published: Path, *, versioned: bool) -> Run:
    from skewtape_pipeline.mirror.apply import apply_delta
    from skewtape_pipeline.mirror.verify import verify_snapshot

    snapshot = fresh_copy(parent, work / "history" / PARENT_MONTHS[-1])
    delta = fresh_copy(delta, work / "delta")
    verify_snapshot(snapshot)  # a mirror's parent carries a warm hash cache
    os.sync()
    into = work / "history" / NEXT_MONTH if versioned else None
    meter = HashMeter()
    with meter.active():
        start = time.perf_counter()
        result = apply_delta(snapshot, delta, into=into)
        seconds = time.perf_counter() - start
    name = "ours, versioned (into=)" if versioned else "ours, in place"
    check = light_check(Path(result.snapshot), published)
    return Run(name, seconds, dict(result.seconds), check, meter.summary(), _mb(meter.twice))


def run_floor(parent: Path, delta: Path, work: Path, published: Path) -> Run:
    delta = fresh_copy(delta, work / "delta")
    scratch = work / "merged"
    scratch.mkdir(parents=True)
    os.sync()
    delta_bytes = sum(p.stat().st_size for p in delta.rglob("*") if p.is_file())
    start = time.perf_counter()
    phases = floor(parent, delta, scratch)
    return Run(
        "floor (hash delta once + merges)",
        time.perf_counter() - start,
        phases,
        "n/a",
        hashed=f"hash {_mb(delta_bytes)}",
        hashed_twice="0",
    )


def delta_stats(delta: Path, parent: Path) -> str:
    manifest = json.loads((delta / "manifest.json").read_bytes())
    months = sum(
        (delta / f["source"]).stat().st_size
        for f in manifest["files"]
        if f["op"] in ("add", "replace") and f["path"].split("/")[0] in ("fills", "candles")
    )
    total = sum(p.stat().st_size for p in delta.rglob("*") if p.is_file())
    ops: dict[str, int] = {}
    for f in manifest["files"]:
        ops[f["op"]] = ops.get(f["op"], 0) + 1
    markets = pq.ParquetFile(parent / "markets.parquet").metadata.num_rows
    parent_bytes = sum(p.stat().st_size for p in parent.rglob("*") if p.is_file())
    return (
        f"delta: {total / 1e9:.2f} GB ({months / 1e9:.2f} GB of month files), ops {ops}; "
        f"parent: {parent_bytes / 1e9:.2f} GB, markets {markets:,} rows"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--workdir",
        type=Path,
        default=None,
        help="folder for the generated data and the runs (default: a temp folder)",
    )
    parser.add_argument("--month-mb", type=int, default=520, help="size of each new fills month")
    parser.add_argument("--parent-month-mb", type=int, default=90, help="size of older months")
    parser.add_argument("--markets", type=int, default=1_200_000, help="rows of markets")
    parser.add_argument("--repeat", type=int, default=1, help="rounds; the best time counts")
    parser.add_argument("--keep", action="store_true", help="keep the generated data")
    args = parser.parse_args(argv)

    owned = args.workdir is None
    workdir = Path(tempfile.mkdtemp(prefix="delta-bench-")) if owned else args.workdir
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        t = time.perf_counter()
        sample = generate(
            workdir / "data",
            month_mb=args.month_mb,
            parent_month_mb=args.parent_month_mb,
            markets=args.markets,
        )
        deltas = {
            "sample publisher": sample,
            "minimal publisher": generate_minimal(workdir / "data-minimal", sample),
        }
        print(
            f"data ready in {time.perf_counter() - t:.0f} s: "
            f"{delta_stats(sample['delta'], sample['parent'])}",
            file=sys.stderr,
        )
        tables = [run_delta(label, paths, workdir, args.repeat) for label, paths in deltas.items()]
        print("\n\n".join(tables))
    finally:
        if owned and not args.keep:
            remove(workdir)
    return 0


def run_delta(label: str, paths: dict[str, Path], workdir: Path, repeat: int) -> str:
    """Every contender on one delta, ``repeat`` rounds; the rendered table and bars."""
    from skewtape_pipeline.mirror.verify import verify_snapshot

    parent, delta, published = paths["parent"], paths["delta"], paths["next"]
    verify_snapshot(parent)  # warm hash cache of the parent (copies get their own)
    contenders = {
        "reference": lambda w: run_reference(parent, delta, w, published),
        "in_place": lambda w: run_ours(parent, delta, w, published, versioned=False),
        "versioned": lambda w: run_ours(parent, delta, w, published, versioned=True),
        "floor": lambda w: run_floor(parent, delta, w, published),
    }
    best: dict[str, Run] = {}
    for round_no in range(repeat):
        for key, contender in contenders.items():
            work = workdir / "runs" / key
            remove(work)
            run = contender(work)
            remove(work)
            print(
                f"{label}, round {round_no + 1}: {run.name}: {run.seconds:.2f} s ({run.check})",
                file=sys.stderr,
                flush=True,
            )
            if key not in best or run.seconds < best[key].seconds:
                best[key] = run
    return render(best, repeat, f"{label}: {delta_stats(delta, parent)}")


def render(best: dict[str, Run], repeat: int, stats: str) -> str:
    ref, flo = best["reference"].seconds, best["floor"].seconds
    rows = []
    for run in best.values():
        phases = ", ".join(f"{k} {v:.2f}" for k, v in run.phases.items() if v >= 0.005)
        rows.append(
            [
                run.name,
                f"{run.seconds:.2f}",
                f"{ref / run.seconds:.2f}x",
                f"{run.seconds / flo:.2f}x",
                phases,
                run.hashed,
                run.hashed_twice,
                run.check,
            ]
        )
    headers = [
        "contender",
        "seconds",
        "speed-up vs reference",
        "time vs floor",
        "seconds per phase",
        "MB hashed per phase",
        "MB hashed twice",
        "result check",
    ]
    table = markdown_table(headers, rows)
    versioned, in_place = best["versioned"].seconds, best["in_place"].seconds
    bars = [
        _bar(
            ref / versioned >= VERSIONED_BAR,
            f"versioned {ref / versioned:.2f}x faster than the reference (bar >= {VERSIONED_BAR}x)",
        ),
        _bar(
            versioned / flo <= FLOOR_BAR,
            f"versioned {versioned / flo:.2f}x the floor (bar <= {FLOOR_BAR}x)",
        ),
        _bar(
            in_place <= ref, f"in place {in_place / ref:.2f}x the reference's time (bar <= 1.00x)"
        ),
    ]
    return (
        f"#### Delta apply ({stats}; best of {repeat})\n\n"
        + table
        + "\n\n#### Bars\n"
        + "\n".join(bars)
    )


def _bar(ok: bool, text: str) -> str:
    return f"- {'PASS' if ok else 'FAIL'} {text}"


if __name__ == "__main__":
    raise SystemExit(main())
