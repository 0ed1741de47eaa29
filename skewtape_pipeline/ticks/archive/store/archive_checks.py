"""Findings of ``verify-archive`` (``ops.integrity.verify_archive``) about the files around the
archive's records rather than the recorded files themselves: the tier roots' archive markers,
and the files no record accounts for.

Files on disk that the catalog does not list fall in three kinds, each told apart by what the
writers do with it:

- a Parquet file under the warm or cold root that no catalog accounts for (written for a
  generation the catalog never reached, or not a consolidated file): writers refuse to change
  anything while it is there (``trust.checked_catalog``); ``verify-archive`` reports it as a
  problem (``trust.unaccounted_files``, not here);
- a Parquet file under the warm or cold root that the catalog no longer lists, or that an
  interrupted run wrote, and that no kept version reads: a *leftover*. Every read and writer
  ignores it and ``prune`` removes it (``GarbageCollector.survey``: ``UNLISTED``);
  :func:`leftover_findings` names each, and they do not fail the verification. One a kept
  version reads is part of the archive (kept until ``prune-versions`` drops the version): no
  finding;
- a Parquet file under the archive root (the hot tier) that is not a hot file
  (``symbol=/year=/month=/date=/part-0.parquet``) nor one of the archive's own files (the
  ``_skewtape`` files and folders, dot files and folders: staging, temporary files): a *stray*.
  No reader of the archive sees it and nothing removes it, but a reader of the hot tier's plain
  layout (a glob of the root's ``**/*.parquet``, as DuckDB or Spark read it) takes its rows for
  the archive's; :func:`hot_strays` names each, a problem.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterable
from functools import partial
from pathlib import Path, PurePosixPath

from skewtape_pipeline.errors import ConfigError
from skewtape_pipeline.storage import TierFile, read_bytes
from skewtape_pipeline.ticks.archive.store.catalog import Catalog
from skewtape_pipeline.ticks.archive.store.hot_index import HOT_GLOB
from skewtape_pipeline.ticks.archive.store.layout import ARCHIVE_MARKER, parse_archive_marker
from skewtape_pipeline.ticks.archive.store.policy import COLD, WARM
from skewtape_pipeline.ticks.archive.store.tiers import ArchiveTiers
from skewtape_pipeline.ticks.archive.store.trust import hot_keys_of, unaccounted_files
from skewtape_pipeline.ticks.archive.store.versions import VersionLog

OWN_PREFIX = "_skewtape"
"""The archive's own files and folders in its root begin so (catalog, hot index, versions,
reports, marker)."""


def marker_problems(tiers: ArchiveTiers, catalog: Catalog) -> list[str]:
    """The archive marker (``_skewtape_archive.json``: scales and timestamp unit) missing from
    the archive root or from a tier root holding catalogued files, or different there."""
    own = tiers.root / ARCHIVE_MARKER
    if not own.exists():
        return [f"{own}: missing; the archive's scales and timestamp unit are unknown"]
    wanted = parse_archive_marker(own, own.read_bytes())
    problems = []
    for tier in (WARM, COLD):
        held = sum(1 for f in catalog.files.values() if f.tier == tier)
        if not held:
            continue
        marker = tiers.stores[tier].file(ARCHIVE_MARKER)
        try:
            found = parse_archive_marker(marker, read_bytes(marker))
        except FileNotFoundError:
            problems.append(
                f"{marker}: missing, though the {tier} root holds {held} catalogued file(s); "
                f"readers of that root cannot check its scales; copy {own} there"
            )
            continue
        except ConfigError as exc:
            problems.append(str(exc))
            continue
        if found != wanted:
            problems.append(f"{marker}: records {found}, the archive root's marker {wanted}")
    return problems


def leftover_findings(
    on_disk: Iterable[TierFile],
    listed: Collection[TierFile],
    unaccounted: Collection[TierFile],
    read_by_versions: Collection[TierFile],
    *,
    retained: bool = False,
) -> list[str]:
    """One finding per leftover (see the module notes) among the warm and cold roots' Parquet
    files ``on_disk``: neither ``listed`` by the catalog, nor ``unaccounted`` (a problem
    reported apart), nor read by a kept version (``read_by_versions``); in ``on_disk``'s
    order, each naming the file, and that ``prune`` removes it, or, ``retained`` (the archive
    in ``books_and_records`` mode), that it stays."""
    fate = "retained: books_and_records mode removes nothing" if retained else "`prune` removes it"
    return [
        f"{path}: a leftover, not in the catalog and read by no kept version (a replaced copy, or "
        f"one an interrupted run wrote): no read sees it; {fate}"
        for path in on_disk
        if path not in listed and path not in unaccounted and path not in read_by_versions
    ]


def current_leftovers(
    tiers: ArchiveTiers, catalog: Catalog, versions: VersionLog, *, retained: bool
) -> list[str]:
    """:func:`leftover_findings` as the archive shows them now: from ``catalog``, the stores'
    listing and what the kept ``versions`` read, no file checked (a first look's leftovers
    confirmed under the lock without checking every file of the archive again)."""
    listed = {tiers.resolve(f.path) for f in catalog.files.values()}
    on_disk = tiers.consolidated_files()
    unaccounted = unaccounted_files(partial(hot_keys_of, tiers.root), catalog, on_disk, listed)
    read = {tiers.resolve(rel) for v in versions.list() for rel in versions.state(v).catalog.files}
    found = [path for _, path in on_disk]
    return leftover_findings(found, listed, {p for p, _ in unaccounted}, read, retained=retained)


def hot_strays(archive_root: Path) -> list[str]:
    """One finding per stray Parquet file under ``archive_root`` (see the module notes), by
    path, each naming the file and the repair."""
    root = Path(archive_root)
    found = []
    for folder, folders, names in os.walk(root):
        here = Path(folder)
        at_root = here == root
        folders[:] = sorted(d for d in folders if not _own(d, at_root))
        for name in sorted(names):
            if not name.endswith(".parquet") or _own(name, at_root):
                continue
            path = here / name
            rel = PurePosixPath(path.relative_to(root).as_posix())
            if len(rel.parts) == 5 and rel.match(HOT_GLOB):
                continue  # a hot file: the hot index's check compares these
            found.append(
                f"{path}: a stray Parquet file in the hot tier, not a hot file "
                f"({HOT_GLOB}): no reader of the archive sees it and nothing removes it, but a "
                "glob of the root's **/*.parquet reads its rows as the archive's; move it out "
                "of the archive root"
            )
    return found


def _own(name: str, at_root: bool) -> bool:
    """True for a file or folder the archive owns or readers skip: a dot name anywhere, a
    ``_skewtape`` name in the root."""
    return name.startswith(".") or (at_root and name.startswith(OWN_PREFIX))
