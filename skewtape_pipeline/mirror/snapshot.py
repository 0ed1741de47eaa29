"""Sealing and reading snapshot folders.

A snapshot folder holds ``manifest.json``, ``CHECKSUMS.sha256`` (every file but itself, so it
lists ``manifest.json``), the four reference tables at the root, month files
``fills/<venue>/<YYYY-MM>.parquet`` and ``candles/<venue>/<YYYY-MM>.parquet``, and text files.
A local state folder ``.skewtape/`` (hash cache, merged-table records) is never listed, never
published and never counted as a file.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from skewtape_pipeline.errors import (
    ManifestError,
    UnreadableSealFileError,
    UnsafePathError,
    VerificationError,
    os_reason,
    quoted,
)
from skewtape_pipeline.fsio import atomic_write_bytes, is_temp
from skewtape_pipeline.hashing import (
    format_checksums,
    parse_checksums,
    sha256_bytes,
    sha256_files,
)
from skewtape_pipeline.mirror.format import (
    CHECKSUMS,
    LOCAL_STATE_DIR,
    MANIFEST,
    MONTH_RE,
    SnapshotFileEntry,
    SnapshotManifest,
    safe_checksums,
    safe_relpath,
)
from skewtape_pipeline.mirror.tables import check_table, is_table, parquet_rows, table_columns

SEAL_FILES = (MANIFEST, CHECKSUMS)
"""The two files sealing writes; they never appear in the manifest's ``files``."""


@dataclass
class FolderListing:
    """What lies below a snapshot folder, as relative POSIX paths (``.skewtape/`` excluded)."""

    files: list[str] = field(default_factory=list)
    """Regular files, sorted."""
    symlinks: list[str] = field(default_factory=list)
    """Symbolic links (to files or folders); snapshots never hold any."""
    temps: list[str] = field(default_factory=list)
    """Leftover temporary files of an interrupted write."""
    others: list[str] = field(default_factory=list)
    """Anything else that is not a folder (fifos, sockets, devices)."""


def list_folder(folder: Path) -> FolderListing:
    """List every entry below ``folder`` without following links, skipping ``.skewtape/``.

    Temporary files and links are listed apart, so callers can refuse or report them.
    """
    listing = FolderListing()
    for dirpath, dirnames, filenames in os.walk(folder, followlinks=False):
        base = Path(dirpath)
        rel_base = base.relative_to(folder).as_posix()
        prefix = "" if rel_base == "." else rel_base + "/"
        if not prefix:
            dirnames[:] = [d for d in dirnames if d != LOCAL_STATE_DIR]
        for name in list(dirnames):
            if (base / name).is_symlink():
                listing.symlinks.append(prefix + name)
                dirnames.remove(name)
        dirnames.sort()
        for name in filenames:
            path = base / name
            rel = prefix + name
            if path.is_symlink():
                listing.symlinks.append(rel)
            elif is_temp(path):
                listing.temps.append(rel)
            elif path.is_file():
                listing.files.append(rel)
            else:
                listing.others.append(rel)
    for names in (listing.files, listing.symlinks, listing.temps, listing.others):
        names.sort()
    return listing


def seal_snapshot(
    folder: Path,
    *,
    bundle_id: str,
    month: str,
    venues: Sequence[str],
    omitted_venues: Sequence[str] = (),
    schema_version: int = 1,
) -> SnapshotManifest:
    """Write ``manifest.json`` and ``CHECKSUMS.sha256`` for the files below ``folder``.

    Hashes every file (except the two seal files and ``.skewtape/``), records rows for every
    ``.parquet`` file and the columns of the four reference tables, then writes the manifest
    (files sorted by path) and CHECKSUMS.sha256 (listing manifest.json too), each atomically.
    Idempotent: sealing an unchanged folder again writes the same bytes.

    Raises
    ------
    ManifestError
        ``bundle_id``/``month``/``venues`` are invalid, or a venue is both kept and omitted.
    UnsafePathError
        The folder holds a link, a leftover temporary file or a name that is not a safe path.
    SnapshotError
        A Parquet file does not open.
    VerificationError
        A reference table lacks a key column or has null or duplicate keys (every finding
        listed).
    Nothing is written when any of these is raised.
    """
    folder = Path(folder)
    _check_seal_options(folder, bundle_id, month, venues, omitted_venues, schema_version)
    rels = _sealable_files(folder)
    hashes = sha256_files(folder / rel for rel in rels)
    entries: list[SnapshotFileEntry] = []
    problems: list[str] = []
    for rel in rels:
        path = folder / rel
        entries.append(_seal_entry(path, rel, hashes[path]))
        if is_table(rel):
            problems.extend(check_table(path, rel, columns=None, rows=None)[1])
    if problems:
        raise VerificationError(folder, problems)
    manifest = SnapshotManifest(
        bundle_id=bundle_id,
        month=month,
        venues=tuple(venues),
        omitted_venues=tuple(omitted_venues),
        schema_version=schema_version,
        files=tuple(entries),
    )
    raw = manifest.to_json()
    checksums = {entry.path: entry.sha256 for entry in entries}
    checksums[MANIFEST] = sha256_bytes(raw)
    atomic_write_bytes(folder / MANIFEST, raw)
    atomic_write_bytes(folder / CHECKSUMS, format_checksums(checksums))
    return manifest


def _check_seal_options(
    folder: Path,
    bundle_id: str,
    month: str,
    venues: Sequence[str],
    omitted_venues: Sequence[str],
    schema_version: int,
) -> None:
    source = folder / MANIFEST
    if not folder.is_dir():
        raise ManifestError(f"{folder} is not a folder; expected a snapshot folder to seal")
    if not isinstance(bundle_id, str) or not bundle_id:
        raise ManifestError(
            f"is {quoted(bundle_id)}; expected a name", path=source, field="bundle_id"
        )
    if not isinstance(month, str) or not MONTH_RE.match(month):
        raise ManifestError(f"is {quoted(month)}; expected YYYY-MM", path=source, field="month")
    for name, values in (("venues", venues), ("omitted_venues", omitted_venues)):
        if isinstance(values, str) or not all(isinstance(v, str) and v for v in values):
            raise ManifestError(
                f"is {quoted(values)}; expected a list of venue names", path=source, field=name
            )
    both = sorted(set(venues) & set(omitted_venues))
    if both:
        raise ManifestError(
            f"{both} are both kept and omitted; a venue is one or the other",
            path=source,
            field="omitted_venues",
        )
    if isinstance(schema_version, bool) or not isinstance(schema_version, int):
        raise ManifestError(
            f"is {quoted(schema_version)}; expected an integer", path=source, field="schema_version"
        )


def _sealable_files(folder: Path) -> list[str]:
    listing = list_folder(folder)
    refused = listing.symlinks + listing.temps + listing.others
    if refused:
        raise UnsafePathError(
            f"holds {refused[:5]}: links, leftover temporary files and special files are not "
            "sealed; remove them first",
            path=folder,
        )
    rels = [rel for rel in listing.files if rel not in SEAL_FILES]
    for rel in rels:
        safe_relpath(rel, field_name="files", source=folder)
    return rels


def _seal_entry(path: Path, rel: str, digest: str) -> SnapshotFileEntry:
    size = path.stat().st_size
    if not rel.endswith(".parquet"):
        return SnapshotFileEntry(path=rel, sha256=digest, bytes=size)
    return SnapshotFileEntry(
        path=rel,
        sha256=digest,
        bytes=size,
        rows=parquet_rows(path),
        columns=table_columns(path) if is_table(rel) else None,
    )


def read_snapshot(folder: Path) -> tuple[SnapshotManifest, dict[str, str], str]:
    """Read a sealed snapshot's manifest and CHECKSUMS.sha256.

    Returns
    -------
    (manifest, checksums, manifest_sha256)
        What we understand of the manifest (see :class:`SnapshotManifest`), with its ``files``
        taken from CHECKSUMS.sha256 when the manifest lists none; {path: sha256} of
        CHECKSUMS.sha256 (manifest.json included); and the sha256 of manifest.json's bytes (the
        name deltas give this snapshot).

    Raises
    ------
    ManifestError
        Either file is missing, or CHECKSUMS.sha256 is malformed (the error names the file and
        line); UnreadableSealFileError (a ManifestError and an OS error) when either exists but
        cannot be read. Consistency between the two is :func:`verify_snapshot`'s job.
    UnsafePathError
        CHECKSUMS.sha256 lists a path that is not a safe relative path.
    """
    folder = Path(folder)
    raw = _read_seal_file(folder / MANIFEST)
    checksums = safe_checksums(_read_seal_file(folder / CHECKSUMS), source=folder / CHECKSUMS)
    manifest = SnapshotManifest.parse(raw, source=folder / MANIFEST).with_listed_files(checksums)
    return manifest, checksums, sha256_bytes(raw)


def read_checksums(path: Path) -> dict[str, str]:
    """{path: sha256} of a CHECKSUMS.sha256 file; ManifestError naming it and the line if bad."""
    return parse_checksums(_read_seal_file(path), source=path)


def _read_seal_file(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise ManifestError("is missing; expected a sealed snapshot", path=path) from None
    except OSError as exc:  # a permission refused, a folder of that name: an OS error
        raise UnreadableSealFileError(f"cannot be read ({os_reason(exc)})", path=path) from None
