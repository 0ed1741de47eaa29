"""Verifying a snapshot folder against its CHECKSUMS.sha256 and manifest, and its local state.

What is checked (every finding is collected, then one :class:`VerificationError` lists them all):

- ``manifest.json``'s sha256 is its line in CHECKSUMS.sha256;
- when the manifest lists files (the published format does not require it), they and
  CHECKSUMS.sha256's entries (minus manifest.json) are the same paths with the same sha256;
- every listed file is present with its sha256, and no other file is there (``.skewtape/`` is
  ignored; a leftover temporary file or a link is a problem);
- each of the four reference tables has unique, non-null keys, the rows the manifest records
  when it records them, and the columns the manifest records or, where it records none, the
  columns the caller expects (an apply passes the parent's).

Where hashes come from: ``known_hashes`` (files the caller hashed while writing them), else the
hash cache ``.skewtape/hashes.json`` (trusted while a file's stamp holds: device, inode, size,
mtime and ctime, as git's index has it), else the file is hashed. ``full=True`` is a scrub: it
hashes every file.

Merged tables: applying row changes with DuckDB writes new Parquet bytes, so a merged table's
sha256 is not the published one. Such a table is accepted only when ``.skewtape/merged.json``
records the sha256 of the bytes our merge wrote and the table passes the row checks; any other
difference is a local modification.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from skewtape_pipeline.errors import (
    LocalStateError,
    ManifestError,
    UnsafePathError,
    VerificationError,
    checked_flag,
    quoted,
    quoted_path,
)
from skewtape_pipeline.fsio import atomic_write_bytes, checked_path, load_json, read_state_bytes
from skewtape_pipeline.hashing import (
    FileStamp,
    HashCache,
    is_sha256_hex,
    sha256_bytes,
    sha256_files,
)
from skewtape_pipeline.mirror.folder_kinds import check_snapshot_folder
from skewtape_pipeline.mirror.format import (
    CHECKSUMS,
    LOCAL_STATE_DIR,
    MANIFEST,
    SnapshotFileEntry,
    SnapshotManifest,
    safe_relpath,
)
from skewtape_pipeline.mirror.snapshot import list_folder, read_checksums
from skewtape_pipeline.mirror.tables import Columns, check_table, is_table

HASH_CACHE = "hashes.json"
MERGED_TABLES = "merged.json"


@dataclass
class VerifyResult:
    """What :func:`verify_snapshot` checked; ``problems`` is empty on success."""

    snapshot: Path
    bundle_id: str | None = None
    files_checked: int = 0
    """Listed files found and compared with their sha256."""
    files_hashed: int = 0
    """Files actually read and hashed in this run (the rest came from the cache or caller)."""
    bytes_hashed: int = 0
    tables: dict[str, int] = field(default_factory=dict)
    """Rows of each reference table that could be read."""
    compared_by_rows: list[str] = field(default_factory=list)
    """Reference tables whose bytes an apply's merge rewrote (recorded in ``merged.json``):
    their published sha256 no longer applies (``sha256sum -c CHECKSUMS.sha256`` reports them
    FAILED), so they were accepted by their rows, keys and columns instead."""
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict of the result (for reports and orchestration metadata)."""
        data = asdict(self)
        data["snapshot"] = str(self.snapshot)
        return data


def hash_cache_path(snapshot: Path) -> Path:
    """Where the hash cache of ``snapshot`` lives."""
    return Path(snapshot) / LOCAL_STATE_DIR / HASH_CACHE


def merged_tables_path(snapshot: Path) -> Path:
    """Where the merged-table records of ``snapshot`` live."""
    return Path(snapshot) / LOCAL_STATE_DIR / MERGED_TABLES


def merged_tables(snapshot: Path) -> dict[str, str]:
    """{table path: sha256 of the bytes our merge wrote} recorded for ``snapshot``.

    Empty when nothing was recorded. Raises :class:`LocalStateError` naming ``merged.json`` when
    it is not a JSON object of reference-table paths to sha256 hex digests, and
    :class:`LinkedStateFileError` when it is a symbolic link.
    """
    path = merged_tables_path(snapshot)
    raw = read_state_bytes(path)
    if raw is None:
        return {}
    data = load_json(raw, path, error=LocalStateError)
    if not isinstance(data, dict):
        raise LocalStateError(f"{path}: expected a JSON object of table path to sha256")
    for rel, digest in data.items():
        _check_merged_entry(path, rel, digest)
    return dict(data)


def _check_merged_entry(path: Path, rel: object, digest: object) -> None:
    if not isinstance(rel, str) or not is_table(rel):
        raise LocalStateError(
            f"{path}: {quoted_path(rel)} is not a reference table; nothing else is merged"
        )
    if not is_sha256_hex(digest):
        raise LocalStateError(f"{path}: {rel}: {quoted(digest)} is not 64 lowercase hex digits")


def record_merged_table(snapshot: Path, rel: str, sha256: str) -> None:
    """Record that ``rel`` of ``snapshot`` now holds bytes our merge wrote, hashing to ``sha256``.

    Atomic (the whole ``merged.json`` is rewritten by rename) and idempotent. Call it after the
    merged table was renamed into place; callers hold the apply lock, so there is one writer.
    Raises :class:`LocalStateError` when ``rel`` is not a reference table, ``sha256`` is not
    a hex digest, or the existing ``merged.json`` is damaged (nothing is written then).
    """
    path = merged_tables_path(snapshot)
    _check_merged_entry(path, rel, sha256)
    records = merged_tables(snapshot)
    records[rel] = sha256
    atomic_write_bytes(path, (json.dumps(records, indent=2, sort_keys=True) + "\n").encode())


def verify_snapshot(
    snapshot: Path,
    *,
    full: bool = False,
    known_hashes: Mapping[str, str] | None = None,
    known_hashed_at_ns: int | None = None,
    save_cache: bool = True,
    table_columns: Mapping[str, Columns] | None = None,
) -> VerifyResult:
    """Check that ``snapshot`` is exactly what its CHECKSUMS.sha256 and manifest describe.

    Parameters
    ----------
    snapshot
        The snapshot folder.
    full
        Scrub: hash every file, ignoring the cache and ``known_hashes``.
    known_hashes
        {path: sha256} of files the caller hashed while writing them; trusted as is.
    known_hashed_at_ns
        No later than when the caller began hashing ``known_hashes`` (``time.time_ns()``):
        their date in the hash cache (see ``hashing``: racily clean entries); default: now.
    save_cache
        Record every hash used in ``.skewtape/hashes.json`` (atomically). A folder that cannot be
        written to is verified all the same; the cache is then not saved.
    table_columns
        {table path: (name, Arrow type) pairs} a reference table must have where the manifest
        records no columns for it (an apply passes what it derived from the parent).

    Returns
    -------
    VerifyResult
        Counts of files checked and hashed, table rows, time taken. Read-only apart from the cache.

    Raises
    ------
    VerificationError
        Listing every problem found (the cache is saved first, so a rerun does not rehash). A
        missing folder, or one holding neither CHECKSUMS.sha256 nor manifest.json (no snapshot
        at all), is that one problem: nothing is hashed and no cache is written into it.
    WrongFolderError
        ``snapshot`` is a delta, a history folder or a deltas folder (as the command line
        refuses it), named with what it is: nothing is hashed and no cache is written into it.
    ConfigError
        ``snapshot`` is no path (None, a number).
    """
    started = time.perf_counter()
    snapshot = checked_path(snapshot, "snapshot", "a snapshot folder")
    checked_flag(full, "full")
    checked_flag(save_cache, "save_cache")
    result = VerifyResult(snapshot=snapshot)
    if not snapshot.is_dir():
        raise VerificationError(snapshot, [f"{snapshot} is not a folder"])
    check_snapshot_folder(snapshot)
    _refuse_unsealed(snapshot)
    manifest, checksums, problems = _read_seal(snapshot)
    result.bundle_id = manifest.bundle_id if manifest else None
    expected = _expected_files(manifest, checksums)
    problems += seal_disagreements(manifest, checksums)
    listed_in = MANIFEST if manifest is not None and manifest.files is not None else CHECKSUMS
    present, listing_problems = _present_files(snapshot, expected, listed_in=listed_in)
    problems += listing_problems
    cache = HashCache(hash_cache_path(snapshot))
    found = _hash_files(
        snapshot,
        present,
        cache,
        result,
        full=full,
        known=known_hashes or {},
        known_hashed_at_ns=known_hashed_at_ns,
    )
    merged, merged_problems = _merged_records(snapshot)
    problems += merged_problems
    for rel in present:
        problems += _compare_hash(rel, found.get(rel), expected[rel], merged)
        if found.get(rel) != expected[rel] and merged.get(rel) == found.get(rel):
            result.compared_by_rows.append(rel)
    problems += _check_tables(snapshot, present, manifest, result, table_columns or {})
    for rel in cache.entries():
        if rel not in present:
            cache.forget(rel)
    if save_cache:
        _save_quietly(cache)
    result.files_checked = len(present)
    result.problems = problems
    result.seconds = time.perf_counter() - started
    if problems:
        raise VerificationError(snapshot, problems)
    return result


def _refuse_unsealed(snapshot: Path) -> None:
    """Refuse (:class:`VerificationError`, its one problem) a folder holding neither seal file:
    no snapshot at all (a mistyped folder), so nothing in it is hashed and no hash cache is
    written into it. A folder missing one of the two is a damaged snapshot, verified as such."""
    if not any(os.path.lexists(snapshot / name) for name in (MANIFEST, CHECKSUMS)):
        raise VerificationError(
            snapshot,
            [
                f"it holds neither {MANIFEST} nor {CHECKSUMS}, so it is no snapshot; expected a "
                "snapshot folder, one month's folder of a history folder (history/<YYYY-MM>)"
            ],
        )


def _read_seal(snapshot: Path) -> tuple[SnapshotManifest | None, dict[str, str] | None, list[str]]:
    problems: list[str] = []
    manifest = checksums = raw = None
    try:
        raw = (snapshot / MANIFEST).read_bytes()
        manifest = SnapshotManifest.parse(raw, source=snapshot / MANIFEST)
    except FileNotFoundError:
        problems.append(f"{MANIFEST}: is missing")
    except OSError as exc:
        problems.append(f"{MANIFEST}: cannot be read ({exc.strerror})")
    try:
        checksums = read_checksums(snapshot / CHECKSUMS)
    except ManifestError as exc:
        problems.append(f"{CHECKSUMS}: {exc}")
    else:
        for rel in [rel for rel in checksums if not _is_safe(rel)]:
            problems.append(
                f"{CHECKSUMS}: lists the unsafe path {quoted_path(rel)}; it is not checked"
            )
            del checksums[rel]
    if raw is not None and checksums is not None:
        listed, actual = checksums.get(MANIFEST), sha256_bytes(raw)
        if listed is None:
            problems.append(f"{CHECKSUMS}: does not list {MANIFEST}")
        elif listed != actual:
            problems.append(
                f"{MANIFEST}: has sha256 {actual}; expected {listed} (its {CHECKSUMS} line)"
            )
    return manifest, checksums, problems


def _is_safe(rel: str) -> bool:
    try:
        safe_relpath(rel, field_name="path")
    except UnsafePathError:
        return False
    return True


def _expected_files(
    manifest: SnapshotManifest | None, checksums: dict[str, str] | None
) -> dict[str, str]:
    """{path: expected sha256} of the files besides the two seal files."""
    if manifest is not None and manifest.files is not None:
        return {entry.path: entry.sha256 for entry in manifest.files}
    if checksums is not None:
        return {rel: sha for rel, sha in checksums.items() if rel != MANIFEST}
    return {}


def seal_disagreements(
    manifest: SnapshotManifest | None, checksums: Mapping[str, str] | None
) -> list[str]:
    """Where a snapshot's manifest and its CHECKSUMS.sha256 (``checksums``: {path: sha256})
    disagree, one problem per file, naming it, as :func:`verify_snapshot` reports them: a path
    only one of them lists, or the two giving it different sha256. Empty when they agree, or
    when either is missing or the manifest lists no files (the format does not require them).
    Compares what the two files say; reads and hashes nothing."""
    if manifest is None or manifest.files is None or checksums is None:
        return []
    listed = {rel: sha for rel, sha in checksums.items() if rel != MANIFEST}
    described = {entry.path: entry.sha256 for entry in manifest.files}
    problems = [
        f"{rel}: is in {MANIFEST} but not in {CHECKSUMS}"
        for rel in sorted(described.keys() - listed)
    ]
    problems += [
        f"{rel}: is in {CHECKSUMS} but not in {MANIFEST}"
        for rel in sorted(listed.keys() - described)
    ]
    problems += [
        f"{rel}: {MANIFEST} says sha256 {described[rel]} but {CHECKSUMS} says {listed[rel]}"
        for rel in sorted(described.keys() & listed.keys())
        if described[rel] != listed[rel]
    ]
    return problems


def _present_files(
    snapshot: Path, expected: Mapping[str, str], *, listed_in: str
) -> tuple[list[str], list[str]]:
    listing = list_folder(snapshot)
    on_disk = set(listing.files)
    problems = [f"{rel}: is missing" for rel in sorted(expected.keys() - on_disk)]
    problems += [
        f"{rel}: is an extra file, not listed in {listed_in}"
        for rel in sorted(on_disk - expected.keys() - {MANIFEST, CHECKSUMS})
    ]
    problems += [
        f"{rel}: is a leftover temporary file of an interrupted write" for rel in listing.temps
    ]
    problems += [
        f"{rel}: is a link; a snapshot holds regular files only" for rel in listing.symlinks
    ]
    problems += [f"{rel}: is not a regular file" for rel in listing.others]
    return sorted(expected.keys() & on_disk), problems


def _hash_files(
    snapshot: Path,
    rels: list[str],
    cache: HashCache,
    result: VerifyResult,
    *,
    full: bool,
    known: Mapping[str, str],
    known_hashed_at_ns: int | None,
) -> dict[str, str]:
    """sha256 of each file in ``rels``: from ``known``, the cache, or by hashing it now."""
    found: dict[str, str] = {}
    to_hash: dict[str, FileStamp] = {}
    for rel in rels:
        path = snapshot / rel
        digest = None if full else known.get(rel) or cache.lookup(rel, path)
        if digest is not None:
            found[rel] = digest
            if rel in known:
                cache.record(rel, path, digest, hashed_at_ns=known_hashed_at_ns)
        else:
            to_hash[rel] = FileStamp.of(path)
    hashed = sha256_files(snapshot / rel for rel in to_hash)
    for rel, before in to_hash.items():
        path = snapshot / rel
        found[rel] = hashed[path]
        result.files_hashed += 1
        result.bytes_hashed += before.size
        if FileStamp.of(path) == before:  # not written to while we read it
            cache.record(rel, path, hashed[path])
        else:
            cache.forget(rel)
    return found


ParentHash = tuple[str, FileStamp, int]
"""A parent file's sha256, its stamp before it was read, and ``time.time_ns()`` then."""


def check_parent_files(snapshot: Path, rels: list[str]) -> dict[str, ParentHash]:
    """Refuse (:class:`VerificationError` naming ``snapshot`` and each file) a file of
    ``snapshot`` that an apply is about to carry into the next snapshot or merge changes into
    (``rels``) whose bytes are neither the published ones (its CHECKSUMS.sha256) nor, for a
    table, a merge recorded in merged.json: a file modified locally is named where the user
    can look at it, before anything is staged (merged, a modified table would also be recorded
    as the apply's own and vouched for from then on). A path the parent does not list or hold
    is left to the other checks.

    Hashes the parent's cache vouches for are not computed again. Returns the hashes computed
    now ({path: (sha256, stamp before reading, when)}) of the files whose stamp held while
    they were read, so the apply vouches for them in staging instead of hashing them again.
    """
    listed = read_checksums(snapshot / CHECKSUMS)
    merged, problems = _merged_records(snapshot)
    cache = HashCache(hash_cache_path(snapshot))
    found: dict[str, str] = {}
    to_hash: dict[str, FileStamp] = {}
    for rel in rels:
        path = snapshot / rel
        if rel not in listed or not path.is_file():
            continue  # a file the delta adds, or one the parent lacks: checked elsewhere
        cached = cache.lookup(rel, path)
        if cached is not None:
            found[rel] = cached
        else:
            to_hash[rel] = FileStamp.of(path)
    hashed_at = time.time_ns()
    hashed = sha256_files(snapshot / rel for rel in to_hash)
    computed = {}
    for rel, before in to_hash.items():
        found[rel] = hashed[snapshot / rel]
        if FileStamp.of(snapshot / rel) == before:
            computed[rel] = (found[rel], before, hashed_at)
    for rel in sorted(found):
        problems += _compare_parent_hash(rel, found[rel], listed[rel], merged)
    if problems:
        raise VerificationError(snapshot, problems)
    return computed


def _compare_parent_hash(
    rel: str, actual: str, expected: str, merged: Mapping[str, str]
) -> list[str]:
    """:func:`_compare_hash` for a file of the parent of an apply: one that is not the
    published file was modified locally (a table's message says so already)."""
    problems = _compare_hash(rel, actual, expected, merged)
    if problems and not is_table(rel):
        return [f"{rel}: modified locally: sha256 {actual}, expected the published {expected}"]
    return problems


def _merged_records(snapshot: Path) -> tuple[dict[str, str], list[str]]:
    try:
        return merged_tables(snapshot), []
    except LocalStateError as exc:
        return {}, [f"{LOCAL_STATE_DIR}/{MERGED_TABLES}: {exc}; no merged table is accepted"]


def _compare_hash(
    rel: str, actual: str | None, expected: str, merged: Mapping[str, str]
) -> list[str]:
    if actual is None or actual == expected:
        return []
    if is_table(rel):
        if merged.get(rel) == actual:
            return []  # our merge wrote it; the row checks decide
        return [
            f"{rel}: modified locally: sha256 {actual}, expected the published {expected} "
            f"or a merge recorded in {LOCAL_STATE_DIR}/{MERGED_TABLES}"
        ]
    return [f"{rel}: has sha256 {actual}; expected {expected}"]


def _check_tables(
    snapshot: Path,
    present: list[str],
    manifest: SnapshotManifest | None,
    result: VerifyResult,
    expected_columns: Mapping[str, Columns],
) -> list[str]:
    entries: dict[str, SnapshotFileEntry] = manifest.by_path() if manifest else {}
    problems: list[str] = []
    for rel in present:
        if not is_table(rel):
            continue
        entry = entries.get(rel)
        recorded = entry.columns if entry is not None else None
        rows, found = check_table(
            snapshot / rel,
            rel,
            columns=recorded if recorded is not None else expected_columns.get(rel),
            rows=entry.rows if entry else None,
        )
        if rows is not None:
            result.tables[rel] = rows
        problems += found
    return problems


def _save_quietly(cache: HashCache) -> None:
    with contextlib.suppress(OSError):  # a read-only mirror verifies all the same
        cache.save()
