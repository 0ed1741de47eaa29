"""Files that leave the archive: which files on disk the committed catalog no longer reaches
(:func:`unreachable_files`), and their removal, each audited before it happens
(:func:`remove_files`); what interrupted runs left, never part of the archive
(:func:`remove_leftovers`).

Re-tiering removes what its commit replaced, pruning what an interrupted run left, withdrawal
the hot files of withdrawn symbol-days, version pruning the files only past versions read: all
through :func:`remove_files`, each file named by its catalog path and the reason it goes. A
consolidated file a kept version of the archive still reads
(``versions.VersionLog.kept_catalog_paths``) is not garbage yet. In ``books_and_records`` mode
nothing is removed (``Books.check_may_delete``).
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from skewtape_pipeline import faults, fsio
from skewtape_pipeline.storage import TierFile, delete, sha256_of, size_of
from skewtape_pipeline.ticks.archive.store import hot_index
from skewtape_pipeline.ticks.archive.store.books import EVENT_REMOVE, Books
from skewtape_pipeline.ticks.archive.store.catalog_check import remove_stale_catalog_temps
from skewtape_pipeline.ticks.archive.store.layout import staging_folder
from skewtape_pipeline.ticks.archive.store.placement import archive_state, hot_rel
from skewtape_pipeline.ticks.archive.store.spill import remove_orphaned_staging
from skewtape_pipeline.ticks.archive.store.tiers import ArchiveTiers
from skewtape_pipeline.ticks.archive.store.version_files import versions_dir
from skewtape_pipeline.ticks.archive.store.versions import VersionLog

SUPERSEDED = "superseded: its rows live in a consolidated file"
UNLISTED = "not in the catalog: replaced, or left by an interrupted run"


class Garbage(NamedTuple):
    """A file to remove (:func:`remove_files`): the file, its catalog path (what its audit
    record names) and why it goes."""

    file: TierFile
    rel: str
    reason: str


def unreachable_files(
    tiers: ArchiveTiers, *, books: bool = False
) -> tuple[list[Garbage], set[TierFile]]:
    """(garbage, kept): the files on disk that the committed catalog of the archive ``tiers``
    resolves makes unreachable, each with its catalog path and the reason (superseded hot
    files, then unlisted consolidated files, warm first: the order removals are audited in),
    and the consolidated files some kept version still reads (``VersionLog.kept_catalog_paths``;
    none looked for in ``books`` mode, where nothing is removed). The one survey after a
    commit (re-tiering's, or a prune's): each tier's store listed once
    (``ArchiveTiers.listing``), its files named by their catalog paths and compared with the
    catalog's paths."""
    root = tiers.root
    state = archive_state(root)
    wanted = set() if books else set(VersionLog(root).kept_catalog_paths())
    garbage = [Garbage(hot.path, hot_rel(root, hot), SUPERSEDED) for hot in state.hot_superseded]
    kept = set()
    for _, file, rel in tiers.listing():  # warm first
        if rel not in state.catalog.files:
            garbage.append(Garbage(file, rel, UNLISTED))
            if rel in wanted:
                kept.add(file)
    return garbage, kept


def remove_files(
    books: Books, garbage: list[Garbage], *, unlist_first: bool = False
) -> list[TierFile]:
    """Audit every removal (each file named by its catalog path, with its reason) first (one
    append, to the audit log of the archive's ``books``), then remove the files, the hot
    index saying the hot files are gone after them, or before them when ``unlist_first`` (a
    symbol-day removed for good: a crash between leaves its file unlisted, hidden from every
    reader, never listed and missing, which every query refuses until a rerun);
    WriteOnceError (audited) in ``books_and_records`` mode. Reads no tiers: each item carries
    its file and catalog path. Returns the files removed."""
    if not garbage:
        return []
    root = books.root
    records = []
    for path, rel, reason in garbage:
        books.check_may_delete(path, why=reason)
        if hot_index.key_of_rel(rel) is not None and not Path(path).exists():
            continue  # removed by a run cut short before the hot index said so: said below
        records.append(
            {
                "event": EVENT_REMOVE,
                "archive": str(root.absolute()),
                "file": rel,
                "sha256": sha256_of(path),
                "bytes": size_of(path),
                "reason": reason,
            }
        )
    books.audit(records)
    faults.checkpoint("audited-removals")
    hot_gone = [
        hot_index.gone_line(r) for _, r, _ in garbage if hot_index.key_of_rel(r) is not None
    ]
    if hot_gone and unlist_first:
        _unlist(root, hot_gone)
    removed = []
    for path, _, _ in garbage:
        if delete(path):
            removed.append(path)
        faults.checkpoint(f"removed:{path.name}")
    if hot_gone and not unlist_first:  # after the removals (a crash before: verify names them)
        _unlist(root, hot_gone)
    return removed


def _unlist(root: Path, gone: list[dict]) -> None:
    """The hot index of the archive at ``root`` told that these hot files are gone."""
    hot_index.ensure_index(root)
    hot_index.append_lines(root, gone)


_VERSION_FOLDERS = ("catalogs", "manifests", "records", "tags")
"""The version log's folders of small files, written whole under the lock."""


def remove_leftovers(tiers: ArchiveTiers) -> None:
    """Remove what interrupted runs left in the archive ``tiers`` resolves, none of it ever part
    of the archive (so nothing is audited): each tier store's temporary files, temporary
    catalogs, and the staged symbol-day files and spill folders of compactions that died
    (``spill.remove_orphaned_staging``: this host's, of processes that are gone; never a live
    writer's). Called under the archive's lock."""
    for store in tiers.stores.values():
        store.remove_stale_temps()
    remove_stale_catalog_temps(tiers.root)
    remove_orphaned_staging(staging_folder(tiers.root))
    for folder in (tiers.root, *(versions_dir(tiers.root) / f for f in _VERSION_FOLDERS)):
        fsio.remove_dead_writers_temps(folder)  # the hot index's, the version log's
