"""Files that leave the archive, through the one :class:`GarbageCollector` each ``ArchiveCore``
builds: which files on disk the committed catalog no longer reaches (:meth:`~GarbageCollector.
survey`), their removal, each audited before it happens (:meth:`~GarbageCollector.remove`), both
after a commit (:meth:`~GarbageCollector.collect`), and what interrupted runs left, never part of
the archive (:meth:`~GarbageCollector.remove_leftovers`).

Re-tiering removes what its commit replaced, pruning what an interrupted run left, withdrawal
the hot files of withdrawn symbol-days, version pruning the files only past versions read: all
through :meth:`~GarbageCollector.remove`, each file named by its catalog path and the reason it
goes. A consolidated file a kept version of the archive still reads
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
from skewtape_pipeline.ticks.archive.store.catalog import CatalogStore
from skewtape_pipeline.ticks.archive.store.layout import staging_folder
from skewtape_pipeline.ticks.archive.store.placement import archive_state, hot_rel
from skewtape_pipeline.ticks.archive.store.spill import remove_orphaned_staging
from skewtape_pipeline.ticks.archive.store.tiers import ArchiveTiers
from skewtape_pipeline.ticks.archive.store.trust import remove_stale_catalog_temps
from skewtape_pipeline.ticks.archive.store.version_files import versions_dir
from skewtape_pipeline.ticks.archive.store.versions import VersionLog

SUPERSEDED = "superseded: its rows live in a consolidated file"
UNLISTED = "not in the catalog: replaced, or left by an interrupted run"


class Garbage(NamedTuple):
    """A file to remove (:meth:`GarbageCollector.remove`): the file, its catalog path (what its
    audit record names) and why it goes."""

    file: TierFile
    rel: str
    reason: str


class Collected(NamedTuple):
    """What :meth:`GarbageCollector.collect` did: the files removed, and the unreachable files
    retained (read by a kept version, or every one in ``books_and_records`` mode)."""

    removed: list[TierFile]
    retained: list[TierFile]


_VERSION_FOLDERS = ("catalogs", "manifests", "records", "tags")
"""The version log's folders of small files, written whole under the lock."""


class GarbageCollector:
    """The files leaving the archive ``tiers`` resolves (built once by the ``ArchiveCore``):
    every removal audited in ``books`` first, the stamps of hot files gone forgotten in
    ``catalog``, files a kept version of ``versions`` reads retained. Its writers are called
    under the archive's lock."""

    def __init__(
        self, tiers: ArchiveTiers, books: Books, catalog: CatalogStore, versions: VersionLog
    ):
        self.tiers, self.books, self.catalog, self.versions = tiers, books, catalog, versions

    def survey(self, *, books: bool = False) -> tuple[list[Garbage], set[TierFile]]:
        """(garbage, kept): the files on disk that the committed catalog makes unreachable,
        each with its catalog path and the reason (superseded hot files, then unlisted
        consolidated files, warm first: the order removals are audited in), and the
        consolidated files some kept version still reads (``VersionLog.kept_catalog_paths``;
        none looked for in ``books`` mode, where nothing is removed). Each tier's store listed
        once (``ArchiveTiers.listing``), its files named by their catalog paths and compared
        with the catalog's paths."""
        root = self.tiers.root
        state = archive_state(root)
        wanted = set() if books else set(self.versions.kept_catalog_paths())
        garbage = [
            Garbage(hot.path, hot_rel(root, hot), SUPERSEDED) for hot in state.hot_superseded
        ]
        kept = set()
        for _, file, rel in self.tiers.listing():  # warm first
            if rel not in state.catalog.files:
                garbage.append(Garbage(file, rel, UNLISTED))
                if rel in wanted:
                    kept.add(file)
        return garbage, kept

    def collect(self, *, retain_all: bool = False) -> Collected:
        """After a commit: remove the files the committed catalog no longer reaches and no kept
        version reads (:meth:`survey`, :meth:`remove`: WriteOnceError in ``books_and_records``
        mode), then forget the source stamps of the hot files gone
        (``CatalogStore.forget_gone_sources``: one more commit, same generation). With
        ``retain_all`` (re-tiering in ``books_and_records`` mode) remove nothing and retain
        every such file."""
        garbage, kept = self.survey(books=retain_all)
        retained = [item.file for item in garbage if retain_all or item.file in kept]
        if retain_all:
            return Collected([], retained)
        removed = self.remove([item for item in garbage if item.file not in kept])
        self.catalog.forget_gone_sources(self.catalog.read(), self.books)
        return Collected(removed, retained)

    def remove(self, garbage: list[Garbage], *, unlist_first: bool = False) -> list[TierFile]:
        """Audit every removal (each file named by its catalog path, with its reason) first (one
        append to the audit log), then remove the files, the hot index saying the hot files are
        gone after them, or before them when ``unlist_first`` (a symbol-day removed for good: a
        crash between leaves its file unlisted, hidden from every reader, never listed and
        missing, which every query refuses until a rerun); WriteOnceError (audited) in
        ``books_and_records`` mode. Reads no tiers: each item carries its file and catalog path.
        Returns the files removed."""
        if not garbage:
            return []
        self.books.audit([record for item in garbage if (record := self._removal(item))])
        faults.checkpoint("audited-removals")
        hot_gone = [
            hot_index.gone_line(r) for _, r, _ in garbage if hot_index.key_of_rel(r) is not None
        ]
        if hot_gone and unlist_first:
            self._unlist(hot_gone)
        removed = []
        for path, _, _ in garbage:
            if delete(path):
                removed.append(path)
            faults.checkpoint(f"removed:{path.name}")
        if hot_gone and not unlist_first:  # after the removals (a crash before: verify names them)
            self._unlist(hot_gone)
        return removed

    def _removal(self, item: Garbage) -> dict[str, object] | None:
        """The audit record of removing ``item`` (refused in ``books_and_records`` mode); None
        for a hot file a run cut short already removed (before the hot index said so)."""
        path, rel, reason = item
        self.books.check_may_delete(path, why=reason)
        if hot_index.key_of_rel(rel) is not None and not Path(path).exists():
            return None
        return {
            "event": EVENT_REMOVE,
            "archive": str(self.books.root.absolute()),
            "file": rel,
            "sha256": sha256_of(path),
            "bytes": size_of(path),
            "reason": reason,
        }

    def _unlist(self, gone: list[dict]) -> None:
        """The hot index told that these hot files are gone."""
        root = self.tiers.root
        hot_index.ensure_index(root)
        hot_index.append_lines(root, gone)

    def remove_leftovers(self) -> None:
        """Remove what interrupted runs left, none of it ever part of the archive (so nothing is
        audited): each tier store's temporary files, temporary catalogs, and the staged
        symbol-day files and spill folders of compactions that died
        (``spill.remove_orphaned_staging``: this host's, of processes that are gone; never a
        live writer's), the dead writers' temporary files of the hot index and the version
        log."""
        root = self.tiers.root
        for store in self.tiers.stores.values():
            store.remove_stale_temps()
        remove_stale_catalog_temps(root)
        remove_orphaned_staging(staging_folder(root))
        for folder in (root, *(versions_dir(root) / f for f in _VERSION_FOLDERS)):
            fsio.remove_dead_writers_temps(folder)
