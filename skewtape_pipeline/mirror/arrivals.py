"""Has a delta finished arriving? Cheap, read-only inspection of ``deltas/<YYYY-MM>/``.

A delta is *complete* when its ``CHECKSUMS.sha256`` lists its ``manifest.json`` with the
manifest's real sha256, and every file it lists is present with the right size. Sizes come from
the next snapshot's manifest (``snapshot/manifest.json`` inside the delta, checked against the
delta manifest's ``next.manifest_sha256``); files it does not size (the manifest files and the
``changes/`` tables, all small) are hashed instead. Large month files are therefore only
``stat``-ed, which keeps a sensor tick cheap. A delta still being copied is *incomplete*, never an
error: the sensor simply looks again on its next tick.

This module does not import dagster; the sensor and the schedule call it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path

from skewtape_pipeline.errors import ManifestError, UnsafePathError, quoted_path
from skewtape_pipeline.hashing import parse_checksums, sha256_bytes, sha256_file
from skewtape_pipeline.mirror.format import (
    CHECKSUMS,
    MANIFEST,
    MONTH_RE,
    DeltaManifest,
    SnapshotManifest,
    safe_relpath,
)


@dataclass(frozen=True)
class DeltaArrival:
    """What :func:`inspect_delta` found in one delta folder.

    ``complete`` is True only when every check passed; ``reason`` says what is missing or wrong
    otherwise (and "complete" when it is). ``manifest_sha256`` is the sha256 of the delta's
    ``manifest.json`` (the sensor's run key) and ``next_manifest_sha256`` names the snapshot the
    delta leads to; both are None when the manifest could not be read.
    """

    month: str
    folder: Path
    complete: bool
    reason: str
    manifest_sha256: str | None = None
    next_manifest_sha256: str | None = None
    next_bundle_id: str | None = None


def delta_months(deltas_dir: Path, *, after: str = "") -> list[str]:
    """Names of the ``YYYY-MM`` folders in ``deltas_dir`` later than ``after``, in month order.

    One ``scandir`` of the folder and no other file access, so it stays fast with thousands of
    entries. Entries that are not month folders are ignored. A missing folder gives [].
    """
    try:
        with os.scandir(deltas_dir) as entries:
            names = [
                entry.name
                for entry in entries
                if entry.name > after and MONTH_RE.match(entry.name) and entry.is_dir()
            ]
    except FileNotFoundError:
        return []
    return sorted(names)


def inspect_delta(folder: Path) -> DeltaArrival:
    """Report whether the delta in ``folder`` has completely arrived.

    Read-only and idempotent; never raises for a missing, partial or malformed delta (the
    answer is then ``complete=False`` with the reason). Hashes only the small files.
    """
    month = folder.name
    checksums_path, manifest_path = folder / CHECKSUMS, folder / MANIFEST
    try:
        listed = parse_checksums(checksums_path.read_bytes(), source=checksums_path)
        manifest_raw = manifest_path.read_bytes()
    except FileNotFoundError as exc:
        return DeltaArrival(month, folder, False, f"{exc.filename} has not arrived yet")
    except (ManifestError, UnicodeDecodeError) as exc:
        return DeltaArrival(month, folder, False, f"{checksums_path} is unreadable: {exc}")
    manifest_sha = sha256_bytes(manifest_raw)
    if listed.get(MANIFEST) != manifest_sha:
        return DeltaArrival(
            month,
            folder,
            False,
            f"{checksums_path} does not list {MANIFEST} with its sha256 {manifest_sha} "
            "(still being written, or not this manifest's checksums)",
            manifest_sha256=manifest_sha,
        )
    try:
        manifest = DeltaManifest.parse(manifest_raw, source=manifest_path)
    except (ManifestError, UnsafePathError) as exc:
        return DeltaArrival(month, folder, False, str(exc), manifest_sha256=manifest_sha)
    found = DeltaArrival(
        month,
        folder,
        False,
        "",
        manifest_sha256=manifest_sha,
        next_manifest_sha256=manifest.next.manifest_sha256,
        next_bundle_id=manifest.next.bundle_id,
    )
    problem = _first_missing_file(folder, listed, manifest)
    if problem:
        return replace(found, reason=problem)
    return replace(found, complete=True, reason="complete")


def _first_missing_file(folder: Path, listed: dict[str, str], manifest: DeltaManifest) -> str:
    """The first listed file that is absent or not yet whole, described; "" when all are."""
    unlisted = [e.source for e in manifest.files if e.source and e.source not in listed]
    if unlisted:
        return (
            f"{folder / CHECKSUMS} does not list {quoted_path(unlisted[0])}, which {MANIFEST} names"
        )
    sizes = _next_snapshot_sizes(folder, manifest)
    if isinstance(sizes, str):
        return sizes
    for rel, digest in listed.items():
        try:
            path = folder / safe_relpath(rel, field_name=CHECKSUMS, source=folder / CHECKSUMS)
            size = path.stat().st_size
        except UnsafePathError as exc:
            return str(exc)
        except FileNotFoundError:
            return f"{folder / rel} has not arrived yet"
        expected = sizes.get(rel)
        if expected is not None:
            if size != expected:
                return f"{folder / rel} has {size} bytes so far; expected {expected}"
        elif rel != MANIFEST and sha256_file(path) != digest:
            return f"{folder / rel} does not match its sha256 in {CHECKSUMS} yet"
    return ""


def _next_snapshot_sizes(folder: Path, manifest: DeltaManifest) -> dict[str, int] | str:
    """{delta path: bytes} of the next snapshot's files shipped in the delta, or a problem.

    Sizes come from the next snapshot's manifest, shipped as the source of the delta manifest's
    last entry and named by its ``next.manifest_sha256``, where it records them (the published
    format does not require it; a file without a recorded size is hashed instead).
    """
    rel = manifest.files[-1].source or ""
    path = folder / rel
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return f"{path} has not arrived yet"
    if sha256_bytes(raw) != manifest.next.manifest_sha256:
        return f"{path} is not yet the next snapshot's manifest named by {folder / MANIFEST}"
    try:
        snapshot = SnapshotManifest.parse(raw, source=path)
    except (ManifestError, UnsafePathError) as exc:
        return str(exc)
    sources = {
        entry.path: entry.source for entry in manifest.files if entry.op in ("add", "replace")
    }
    return {
        sources[entry.path]: entry.bytes
        for entry in snapshot.by_path().values()
        if entry.path in sources and entry.bytes is not None
    }


def holds_snapshot(folder: Path, manifest_sha256: str | None) -> bool:
    """True when ``folder``'s manifest.json hashes to ``manifest_sha256`` (already applied).

    Reads one small file; False when the folder or its manifest is missing.
    """
    try:
        return manifest_sha256 is not None and sha256_file(folder / MANIFEST) == manifest_sha256
    except FileNotFoundError:
        return False
