"""Building the delta that takes one snapshot to the next.

The delta follows the published format: ``snapshot/<path>`` whole files for ``add``/``replace``,
``changes/<table>.parquet`` row changes for ``change``, ``delete`` entries for removed files, the
next snapshot's CHECKSUMS.sha256 then manifest.json last, a ``manifest.json`` naming both
snapshots by their manifest's sha256 and a ``CHECKSUMS.sha256`` of every delta file.

Change files hold two columns: ``op`` (``upsert``/``delete``) and ``row``, a struct with ALL the
table's columns (all nullable). An upsert holds the whole row; a delete holds its key columns and
nulls elsewhere. One struct type for both is what a Parquet column can hold, and it is what the
published DuckDB merge reads: ``SELECT row.*`` yields the key columns for its anti-join and whole
rows for its ``UNION ALL BY NAME``. Deletes come first, then upserts, each sorted by key.

Rules for the reference tables (see :func:`build_delta`):

- same sha256 in both manifests: no entry;
- same columns, different rows: ``change``;
- same rows but different bytes (re-encoded): ``replace``, so the mirror stays byte-exact;
- any table's columns differ (or a table is on one side only): ``schema_break`` is true and every
  table ships whole (``replace``; ``add``/``delete`` for a table on one side only).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from skewtape_pipeline.duckdb_interrupt import interruptible
from skewtape_pipeline.errors import ChecksumMismatchError, DeltaBuildError, checked_flag
from skewtape_pipeline.fsio import TEMP_MARKER, checked_path, fsync_dir
from skewtape_pipeline.hashing import format_checksums, sha256_bytes, sha256_file
from skewtape_pipeline.mirror.folder_kinds import check_snapshot_folder
from skewtape_pipeline.mirror.format import (
    CHECKSUMS,
    MANIFEST,
    TABLE_KEYS,
    BundleRef,
    DeltaFileEntry,
    DeltaManifest,
    NextBundle,
    SnapshotFileEntry,
    SnapshotManifest,
)
from skewtape_pipeline.mirror.snapshot import read_snapshot
from skewtape_pipeline.mirror.tables import (
    Columns,
    is_table,
    read_table,
    sort_by_keys,
    table_columns,
)
from skewtape_pipeline.mirror.verify import verify_snapshot

SNAPSHOT_DIR = "snapshot"
CHANGES_DIR = "changes"
_ROW_INDEX = "__skewtape_row_index"


def build_delta(
    parent: Path, next_snapshot: Path, out: Path, *, verify_inputs: bool = True
) -> DeltaManifest:
    """Write the delta that takes ``parent`` to ``next_snapshot`` into the folder ``out``.

    Parameters
    ----------
    parent, next_snapshot
        Two sealed snapshot folders.
    out
        The delta folder; it must not exist or be empty, and must lie outside both snapshots.
    verify_inputs
        Verify both snapshots first (without saving their hash caches); True or False (else
        ConfigError, nothing written).

    Returns
    -------
    DeltaManifest
        The manifest written (parsed back, so it obeys every rule of the format).

    Atomic and deterministic: the delta is built in a temporary folder beside ``out`` and renamed
    into place, so ``out`` is either absent/empty or complete; the same inputs give the same bytes.

    Raises
    ------
    ConfigError
        ``parent``, ``next_snapshot`` or ``out`` is no path (None, a number); ``verify_inputs``
        not True or False.
    WrongFolderError
        ``parent`` or ``next_snapshot`` is a delta, a history folder or a deltas folder, not a
        snapshot (named; nothing written, ``out`` not created).
    DeltaBuildError
        ``out`` is not empty or lies inside a snapshot; a table to ship whole holds locally
        merged bytes; a table's rows cannot be compared.
    VerificationError, ManifestError
        A snapshot does not verify or its manifest is unreadable.
    ChecksumMismatchError
        A snapshot file changed while it was copied.
    """
    checked_flag(verify_inputs, "verify_inputs")  # a falsy 0 or "" would skip verifying
    parent = checked_path(parent, "parent", "the parent snapshot's folder")
    next_snapshot = checked_path(next_snapshot, "next_snapshot", "the next snapshot's folder")
    out = checked_path(out, "out", "the delta's folder")
    check_snapshot_folder(parent)
    check_snapshot_folder(next_snapshot)
    _check_out(out, parent, next_snapshot)
    if verify_inputs:
        verify_snapshot(parent, save_cache=False)
        verify_snapshot(next_snapshot, save_cache=False)
    work = out.parent / f".{out.name}.{os.getpid()}{TEMP_MARKER}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    try:
        manifest = _write_delta(parent, next_snapshot, work)
        _publish_folder(work, out)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return manifest


def _write_delta(parent: Path, nxt: Path, work: Path) -> DeltaManifest:
    """Write every file of the delta into ``work``; return its manifest."""
    parent_manifest, _, parent_sha = read_snapshot(parent)
    next_manifest, _, next_sha = read_snapshot(nxt)
    entries = _file_entries(parent_manifest, next_manifest, nxt, work)
    schema_break, table_entries = _table_entries(
        parent, nxt, (parent_manifest, next_manifest), work
    )
    entries += table_entries
    entries.append(_ship_whole(nxt, work, CHECKSUMS, "replace", expected=None))
    entries.append(_ship_whole(nxt, work, MANIFEST, "replace", expected=next_sha))
    manifest = DeltaManifest(
        parent=BundleRef(
            bundle_id=parent_manifest.bundle_id or parent.name, manifest_sha256=parent_sha
        ),
        next=NextBundle(
            bundle_id=next_manifest.bundle_id or nxt.name,
            manifest_sha256=next_sha,
            venues=next_manifest.venues or (),
            omitted_venues=next_manifest.omitted_venues,
        ),
        schema_break=schema_break,
        files=tuple(entries),
    )
    return _write_delta_seal(work, manifest)


def _check_out(out: Path, parent: Path, next_snapshot: Path) -> None:
    resolved = out.resolve()
    for snapshot in (parent, next_snapshot):
        if resolved.is_relative_to(snapshot.resolve()):
            raise DeltaBuildError(f"{out}: lies inside the snapshot {snapshot}; expected outside")
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise DeltaBuildError(f"{out}: exists and is not a folder; expected no file there")
    if out.is_dir() and any(out.iterdir()):
        raise DeltaBuildError(f"{out}: is not empty; expected a new or empty folder")


# --- month and text files ---------------------------------------------------------------------


def _file_entries(
    parent: SnapshotManifest, nxt: SnapshotManifest, next_folder: Path, work: Path
) -> list[DeltaFileEntry]:
    """Deletes, adds, then replaces of every file but the reference tables, each sorted."""
    before = {e.path: e.sha256 for e in parent.files if not is_table(e.path)}
    after = {e.path: e.sha256 for e in nxt.files if not is_table(e.path)}
    entries = [
        DeltaFileEntry(path=rel, op="delete", source=None, sha256=None)
        for rel in sorted(before.keys() - after.keys())
    ]
    entries += [
        _ship_whole(next_folder, work, rel, "add", expected=after[rel])
        for rel in sorted(after.keys() - before.keys())
    ]
    entries += [
        _ship_whole(next_folder, work, rel, "replace", expected=after[rel])
        for rel in sorted(after.keys() & before.keys())
        if after[rel] != before[rel]
    ]
    return entries


def _ship_whole(
    next_folder: Path, work: Path, rel: str, op: str, *, expected: str | None
) -> DeltaFileEntry:
    """Copy ``rel`` of the next snapshot to ``snapshot/<rel>`` of the delta; its entry."""
    source = f"{SNAPSHOT_DIR}/{rel}"
    target = work / source
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(next_folder / rel, target)
    _fsync_file(target)
    digest = sha256_file(target)
    if expected is not None and digest != expected:
        raise ChecksumMismatchError(
            f"copied with sha256 {digest}; expected {expected} (its manifest's); "
            "did the snapshot change during the build?",
            path=next_folder / rel,
        )
    return DeltaFileEntry(path=rel, op=op, source=source, sha256=digest)


# --- the reference tables ---------------------------------------------------------------------


def _table_entries(
    parent: Path, nxt: Path, manifests: tuple[SnapshotManifest, SnapshotManifest], work: Path
) -> tuple[bool, list[DeltaFileEntry]]:
    """(schema_break, entries for the four tables in name order).

    Tables are told apart by their published sha256 (the manifests'), so a locally merged
    parent table that holds the published rows counts as unchanged.
    """
    before, after = ({e.path: e for e in m.files if is_table(e.path)} for m in manifests)
    before_columns = {rel: _columns(parent, entry) for rel, entry in before.items()}
    after_columns = {rel: _columns(nxt, entry) for rel, entry in after.items()}
    schema_break = before_columns != after_columns
    entries: list[DeltaFileEntry] = []
    for rel in sorted(TABLE_KEYS):
        if rel not in after:
            if rel in before:
                entries.append(DeltaFileEntry(path=rel, op="delete", source=None, sha256=None))
        elif rel not in before or schema_break:
            op = "replace" if rel in before else "add"
            entries.append(_ship_table_whole(nxt, work, rel, op, after[rel].sha256))
        elif before[rel].sha256 != after[rel].sha256:
            entries.append(_table_change(parent, nxt, work, rel, after[rel].sha256))
    return schema_break, entries


def _columns(folder: Path, entry: SnapshotFileEntry) -> Columns:
    return entry.columns if entry.columns is not None else table_columns(folder / entry.path)


def _ship_table_whole(nxt: Path, work: Path, rel: str, op: str, published: str) -> DeltaFileEntry:
    if sha256_file(nxt / rel) != published:
        raise DeltaBuildError(
            f"{nxt / rel}: holds locally merged bytes, not the published ones "
            f"(sha256 {published}); a delta ships published files, so build it from the "
            "published snapshot"
        )
    return _ship_whole(nxt, work, rel, op, expected=published)


def _table_change(parent: Path, nxt: Path, work: Path, rel: str, published: str) -> DeltaFileEntry:
    old, new = read_table(parent / rel), read_table(nxt / rel)
    keys = TABLE_KEYS[rel]
    try:
        deletes, upserts = row_changes(old, new, keys)
    except duckdb.Error as exc:
        raise DeltaBuildError(
            f"{rel}: the rows of the two snapshots cannot be compared ({exc})"
        ) from exc
    if deletes.num_rows == 0 and upserts.num_rows == 0:  # re-encoded, same rows
        return _ship_table_whole(nxt, work, rel, "replace", published)
    source = f"{CHANGES_DIR}/{rel}"
    target = work / source
    target.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(change_table(new.schema, keys, deletes, upserts), target, compression="zstd")
    _fsync_file(target)
    return DeltaFileEntry(path=rel, op="change", source=source, sha256=sha256_file(target))


def row_changes(old: pa.Table, new: pa.Table, keys: tuple[str, ...]) -> tuple[pa.Table, pa.Table]:
    """(rows of ``old`` whose key is gone from ``new``, rows of ``new`` absent from ``old``).

    Both sorted by key. Rows are compared on every column with null-safe equality, exactly (the
    rows returned are taken from the input tables, never converted). Keys must be unique.
    """
    con = duckdb.connect()
    try:
        con.register("old_rows", _with_row_index(old))
        con.register("new_rows", _with_row_index(new))
        columns = ", ".join(_quote(name) for name in new.column_names)
        using = ", ".join(_quote(key) for key in keys)
        index = _quote(_ROW_INDEX)
        changed = _indices(
            con,
            f"SELECT new_rows.{index} FROM new_rows SEMI JOIN ("
            f"SELECT {columns} FROM new_rows EXCEPT SELECT {columns} FROM old_rows"
            f") AS changed USING ({using})",
        )
        gone = _indices(
            con, f"SELECT old_rows.{index} FROM old_rows ANTI JOIN new_rows USING ({using})"
        )
    finally:
        con.close()
    deletes = sort_by_keys(old.take(gone).select(list(keys)), keys)
    upserts = sort_by_keys(new.take(changed), keys)
    return deletes, upserts


def _with_row_index(table: pa.Table) -> pa.Table:
    return table.append_column(_ROW_INDEX, pa.array(range(table.num_rows), pa.int64()))


def _indices(con: duckdb.DuckDBPyConnection, query: str) -> pa.Array:
    table = interruptible(con, lambda: con.sql(query).to_arrow_table())
    return table.column(0).combine_chunks().cast(pa.int64())


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def change_table(
    schema: pa.Schema, keys: tuple[str, ...], deletes: pa.Table, upserts: pa.Table
) -> pa.Table:
    """The ``op``/``row`` table of a change file: deletes (keys only, other columns null) first."""
    fields = [pa.field(f.name, f.type, nullable=True) for f in schema]
    columns = []
    for f in fields:
        deleted = (
            deletes.column(f.name).combine_chunks().cast(f.type)
            if f.name in keys
            else pa.nulls(deletes.num_rows, f.type)
        )
        upserted = upserts.column(f.name).combine_chunks()
        columns.append(pa.concat_arrays([deleted, upserted]))
    rows = pa.StructArray.from_arrays(columns, fields=fields)
    ops = pa.array(["delete"] * deletes.num_rows + ["upsert"] * upserts.num_rows, pa.string())
    return pa.table({"op": ops, "row": rows})


# --- sealing and publishing the delta ---------------------------------------------------------


def _write_delta_seal(work: Path, manifest: DeltaManifest) -> DeltaManifest:
    raw = manifest.to_json()
    (work / MANIFEST).write_bytes(raw)
    _fsync_file(work / MANIFEST)
    hashes = {entry.source: entry.sha256 for entry in manifest.files if entry.source}
    hashes[MANIFEST] = sha256_bytes(raw)
    (work / CHECKSUMS).write_bytes(format_checksums(hashes))
    _fsync_file(work / CHECKSUMS)
    for folder in sorted({p.parent for p in work.rglob("*") if p.is_file()}):
        fsync_dir(folder)
    return DeltaManifest.parse(raw, source=work / MANIFEST)


def _publish_folder(work: Path, out: Path) -> None:
    """Rename the finished folder to ``out`` (replacing an empty folder) and fsync the parent."""
    os.replace(work, out)  # rename(2) replaces an empty folder (checked up front)
    fsync_dir(out.parent)


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
