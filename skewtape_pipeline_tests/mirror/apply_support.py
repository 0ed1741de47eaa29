"""Builders and assertions shared by the delta applier's tests.

``make_case(tmp_path)`` gives a sealed parent snapshot (``history/2026-11``), the sealed next
snapshot it should become (``published/2026-12``, built independently of the applier) and the
delta joining them (``deltas/2026-12``, built by the delta builder). The next snapshot adds
month files, replaces the README, deletes a month file, and changes rows of two tables.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from skewtape_pipeline.fsio import is_temp
from skewtape_pipeline.hashing import format_checksums, sha256_file
from skewtape_pipeline.mirror.diff import build_delta
from skewtape_pipeline.mirror.format import CHECKSUMS, MANIFEST, TABLE_KEYS
from skewtape_pipeline.mirror.snapshot import list_folder
from skewtape_pipeline.mirror.tables import read_table, same_rows
from skewtape_pipeline_tests.conftest import (
    candles_table,
    copy_snapshot,
    fills_table,
    make_snapshot,
    reseal,
    write_parquet,
)

PARENT_MONTH = "2026-11"
NEXT_MONTH = "2026-12"
DELETED = "fills/polymarket/2026-10.parquet"
ADDED = ("fills/kalshi/2026-12.parquet", "candles/kalshi/2026-12.parquet")
REPLACED = "README.md"
CHANGED = ("fees.parquet", "markets.parquet")


@dataclass(frozen=True)
class DeltaCase:
    root: Path
    parent: Path
    expected: Path
    delta: Path


def evolve_snapshot(
    parent: Path,
    folder: Path,
    *,
    month: str,
    deleted: str = DELETED,
    tables: tuple[str, ...] = CHANGED,
) -> Path:
    """Copy ``parent`` to ``folder``, change it the way a month does, and seal it as ``month``.

    Adds kalshi's fills and candles of ``month``, replaces the README, deletes ``deleted`` (when
    present), and changes rows of the ``tables`` among markets (one updated, one deleted, one
    added) and fees (one added). Returns ``folder``.
    """
    copy_snapshot(parent, folder)
    write_parquet(folder / f"fills/kalshi/{month}.parquet", fills_table("kalshi", month, rows=6))
    write_parquet(folder / f"candles/kalshi/{month}.parquet", candles_table("kalshi", month))
    (folder / REPLACED).write_text(f"Skewtape history snapshot {month}, revised.\n")
    (folder / deleted).unlink(missing_ok=True)
    if "markets.parquet" in tables:
        markets = read_table(folder / "markets.parquet")
        status = markets.column("status").to_pylist()
        status[0] = f"closed in {month}"
        markets = markets.set_column(
            markets.schema.get_field_index("status"), "status", pa.array(status)
        )
        added = markets.slice(0, 1).set_column(1, "market_id", pa.array([f"NEW-{month}"]))
        kept = [markets.slice(0, 1), markets.slice(2), added]
        write_parquet(folder / "markets.parquet", pa.concat_tables(kept))
    if "fees.parquet" in tables:
        fees = read_table(folder / "fees.parquet")
        new_fee = fees.slice(0, 1).set_column(1, "category", pa.array([f"politics-{month}"]))
        new_fee = new_fee.set_column(3, "taker_bps", pa.array([9], pa.int32()))
        write_parquet(folder / "fees.parquet", pa.concat_tables([fees, new_fee]))
    return reseal(folder, month=month)


def make_case(root: Path, *, small: bool = False) -> DeltaCase:
    """A parent snapshot, the next snapshot it should become and the delta between them.

    ``small``: one venue and fewer files (for tests that apply many times), still with every op.
    """
    if small:
        parent = make_snapshot(root, month=PARENT_MONTH, venues=("kalshi",))
        deleted = "fills/kalshi/2026-10.parquet"
    else:
        parent = make_snapshot(root, month=PARENT_MONTH)
        deleted = DELETED
    published = root / "published" / NEXT_MONTH
    expected = evolve_snapshot(parent, published, month=NEXT_MONTH, deleted=deleted)
    delta = root / "deltas" / NEXT_MONTH
    build_delta(parent, expected, delta)
    return DeltaCase(root=root, parent=parent, expected=expected, delta=delta)


# --- comparing trees -----------------------------------------------------------------------------


def tree_state(folder: Path) -> dict[str, tuple[Any, ...]]:
    """Every entry below ``folder`` (local state included): kind, sha256 and mode of files."""
    state: dict[str, tuple[Any, ...]] = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in dirnames + filenames:
            path = Path(dirpath, name)
            rel = path.relative_to(folder).as_posix()
            st = path.lstat()
            if stat.S_ISLNK(st.st_mode):
                state[rel] = ("link", os.readlink(path))
            elif stat.S_ISDIR(st.st_mode):
                state[rel] = ("dir",)
            else:
                state[rel] = ("file", sha256_file(path), stat.S_IMODE(st.st_mode), st.st_mtime_ns)
    return state


def assert_same_snapshot(actual: Path, expected: Path) -> None:
    """``actual`` holds exactly ``expected``'s files: same bytes, or same rows for the tables.

    Also asserts ``actual`` holds no leftover temporary file or link.
    """
    found, wanted = list_folder(actual), list_folder(expected)
    assert found.temps == [] and found.symlinks == [] and found.others == []
    assert found.files == wanted.files
    for rel in wanted.files:
        if rel in TABLE_KEYS:
            left, right = read_table(actual / rel), read_table(expected / rel)
            assert same_rows(left, right, TABLE_KEYS[rel]), f"{rel} rows differ"
        else:
            assert (actual / rel).read_bytes() == (expected / rel).read_bytes(), f"{rel} differs"


def temp_files(folder: Path) -> list[str]:
    """Leftover temporary files below ``folder``, local state included."""
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if is_temp(p))


# --- tampering with a delta ----------------------------------------------------------------------


def reseal_delta(delta: Path) -> None:
    """Rewrite the delta's CHECKSUMS.sha256 from the files it holds now (a consistent delta)."""
    hashes = {
        path.relative_to(delta).as_posix(): sha256_file(path)
        for path in sorted(delta.rglob("*"))
        if path.is_file() and not path.is_symlink() and path != delta / CHECKSUMS
    }
    replace_file(delta / CHECKSUMS, format_checksums(hashes))


def replace_file(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a new inode (hard links to the old file keep it)."""
    path.unlink(missing_ok=True)
    path.write_bytes(data)


def edit_manifest(delta: Path, edit) -> None:
    """Let ``edit(data)`` change the delta manifest's JSON, then reseal the delta."""
    data = json.loads((delta / MANIFEST).read_bytes())
    edit(data)
    replace_file(delta / MANIFEST, json.dumps(data, indent=2).encode())
    reseal_delta(delta)


def entry_index(delta: Path, path: str) -> int:
    files = json.loads((delta / MANIFEST).read_bytes())["files"]
    return next(i for i, entry in enumerate(files) if entry["path"] == path)


def rewrite_change_file(delta: Path, table: str, transform) -> None:
    """Replace ``changes/<table>`` by ``transform(arrow table)``, fix its sha256, reseal."""
    path = delta / "changes" / table
    changed = transform(pq.read_table(path))
    path.unlink()
    pq.write_table(changed, path)
    digest = sha256_file(path)

    def fix_sha(data: dict) -> None:
        data["files"][entry_index(delta, table)]["sha256"] = digest

    edit_manifest(delta, fix_sha)


def null_first_key(table: pa.Table, key: str) -> pa.Table:
    """The change table with ``row.<key>`` set to null in its first row."""
    rows = table.column("row").combine_chunks()
    fields = [rows.type.field(i) for i in range(rows.type.num_fields)]
    arrays = []
    for f in fields:
        column = rows.field(f.name)
        if f.name == key:
            mask = pa.array([i == 0 for i in range(len(column))])
            column = pc.if_else(mask, pa.scalar(None, f.type), column)
        arrays.append(column)
    struct = pa.StructArray.from_arrays(arrays, fields=fields)
    return table.set_column(table.schema.get_field_index("row"), "row", struct)
