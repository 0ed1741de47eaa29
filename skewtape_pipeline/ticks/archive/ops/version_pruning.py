"""Pruning versions on purpose, and the bytes only past versions hold.

:func:`prune_versions` removes the versions ``--keep-last N`` or ``--older-than DATE`` leaves out
(never the latest, never a tagged one), then only the files no kept version and not the current
state reads: consolidated files the catalogs no longer list, hot files kept under their content
names, catalog and manifest snapshots (see ``store.versions``, whose ``VersionLog`` names
them). In ``books_and_records`` mode it refuses (audited): records are never removed. Under the
archive's lock; the pruning is audited before any record goes, every file removal before it
happens. The tier roots are listed before any record goes, so an object store that cannot be
reached (an ``ObjectStoreError`` naming it) stops the pruning with every version kept. A crash at
any step leaves every kept version readable; a rerun finishes the removals.

:func:`past_version_bytes` sums what pruning every past version would free: the consolidated
files kept for them that the current catalog no longer lists, and the hot files kept under their
content names that no other link makes a live hot file. The contracts are the front door's
(``ArchiveVersions.prune``, ``ArchiveVersions.past_bytes``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from skewtape_pipeline import faults, fsio
from skewtape_pipeline.errors import ConfigError
from skewtape_pipeline.storage import TierFile, file_text, size_of
from skewtape_pipeline.ticks.archive.store.books import EVENT_PRUNE
from skewtape_pipeline.ticks.archive.store.garbage import Garbage
from skewtape_pipeline.ticks.archive.store.placement import uncatalogued_files
from skewtape_pipeline.ticks.archive.store.version_files import SUFFIX, Version

if TYPE_CHECKING:
    from skewtape_pipeline.ticks.archive.core import ArchiveCore


@dataclass(frozen=True)
class PruneResult:
    """What :func:`prune_versions` did: the versions pruned and kept, the files removed."""

    pruned: list[int]
    kept: list[int]
    files_removed: list[TierFile]

    def to_dict(self) -> dict[str, object]:
        return {
            "pruned": self.pruned,
            "kept": self.kept,
            "files_removed": [file_text(p) for p in self.files_removed],
        }


def prune_versions(
    core: ArchiveCore, *, keep_last: int | None = None, older_than: date | None = None
) -> PruneResult:
    """Drop old versions, then the files only they read (``ArchiveVersions.prune``)."""
    _check_rule(keep_last, older_than)
    with core.writing():
        core.books.check_may_delete(core.versions.directory, why="pruning versions")
        with core.locked("pruning versions"):
            versions = core.versions.list()
            drop = _to_prune(versions, set(core.versions.tags().values()), keep_last, older_than)
            unlisted = uncatalogued_files(core.tiers, core.catalog.read())  # before any record goes
            _drop_versions(core, drop)
            kept = [v for v in versions if v.version not in set(drop)]
            unread = _unread(core, kept, unlisted)
            garbage = [
                Garbage(path, core.tiers.relative(path), "read by no kept version")
                for path in unread
            ]
            removed = core.garbage.remove(garbage)
    return PruneResult(drop, [v.version for v in kept], removed)


def _drop_versions(core: ArchiveCore, drop: list[int]) -> None:
    """Audit the pruning of the versions ``drop`` (once), then remove their records."""
    if drop:
        record = {"event": EVENT_PRUNE, "archive": str(core.root.absolute()), "versions": drop}
        core.books.audit([record])
        faults.checkpoint("audited-version-pruning")
    for number in drop:
        fsio.atomic_unlink(core.versions.record_path(number))
        faults.checkpoint(f"pruned-version:{number}")


def _check_rule(keep_last: object, older_than: object) -> None:
    if (keep_last is None) == (older_than is None):
        raise ConfigError("prune-versions: give exactly one of keep_last and older_than")
    if keep_last is not None and (
        not isinstance(keep_last, int) or isinstance(keep_last, bool) or keep_last < 1
    ):
        raise ConfigError(f"keep_last = {keep_last!r}: expected an int >= 1")
    if older_than is not None and (
        isinstance(older_than, datetime) or not isinstance(older_than, date)
    ):
        raise ConfigError(f"older_than = {older_than!r}: expected a date")


def _to_prune(
    versions: list[Version], tagged: set[int], keep_last: int | None, older_than: date | None
) -> list[int]:
    if not versions:
        return []
    latest = versions[-1].version
    if keep_last is not None:
        candidates = versions[:-keep_last]
    else:
        candidates = [v for v in versions if v.time.date() < older_than]  # type: ignore[operator]
    return [v.version for v in candidates if v.version != latest and v.version not in tagged]


def _unread(core: ArchiveCore, kept: list[Version], unlisted: list[TierFile]) -> list[TierFile]:
    """Files under the version store, and of ``unlisted`` (the tier roots' files the current
    catalog does not list), that no kept version reads."""
    log = core.versions
    wanted: set[Path] = set()
    for version in kept:
        wanted.update(log.manifest_path(d) for d in log.manifest_chain(version.manifest))
        if version.catalog is not None:
            wanted.add(log.catalog_snapshot_path(version.catalog))
    for manifest in {v.manifest: v for v in kept}.values():
        wanted.update(log.hot_blob(entry) for entry in log.read_manifest(manifest))
    out: list[TierFile] = []
    for folder in log.snapshot_dirs():
        if folder.is_dir():
            out += sorted(p for p in folder.rglob(f"*{SUFFIX}") if p not in wanted)
    held = _kept_files(core)
    out += [f for f in unlisted if f not in held]
    return out


def past_version_bytes(core: ArchiveCore) -> int:
    """The bytes only past versions read (the contract: ``ArchiveVersions.past_bytes``)."""
    current = {core.tiers.resolve(f.path) for f in core.catalog.read().files.values()}
    total = sum(size_of(f) for f in _kept_files(core) - current if _exists(f))
    hot = core.versions.hot_blobs_dir()
    if hot.is_dir():
        for blob in hot.rglob(f"*{SUFFIX}"):
            st = blob.stat()
            total += st.st_size if st.st_nlink == 1 else 0
    return total


def _kept_files(core: ArchiveCore) -> set[TierFile]:
    """The consolidated files some kept version reads (local paths or objects): re-tiering and
    pruning leave them in place."""
    return {core.tiers.resolve(path) for path in core.versions.kept_catalog_paths()}


def _exists(path: TierFile) -> bool:
    try:
        size_of(path)
    except FileNotFoundError:
        return False
    return True
