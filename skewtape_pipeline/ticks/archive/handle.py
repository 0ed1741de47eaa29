"""``Archive``: one tick archive, built once, with every verb a user or the orchestration calls.

Built from the archive root (its hot tier) and options fixed at creation, validated then (like
deltalake's ``DeltaTable`` or ArcticDB's ``Library``), never passed again::

    from skewtape_pipeline.ticks.archive.handle import Archive

    archive = Archive("data/archive")                    # the recorded tier policy, audited
    archive.retier(as_of=date(2026, 12, 1))
    archive.rebuild_catalog()
    rows = archive.query("SELECT count(*) FROM ticks")
    table = archive.read(["polymarket|0xabc"], start=date(2026, 11, 2), end=date(2026, 11, 6),
                         columns=["ts", "price"], as_of="paper-2026")  # a pyarrow Table

Options (keyword-only, safe defaults):

- ``policy``: the tier policy. None: the one the archive records
  (``<root>/_skewtape_tier_policy.json``, written by the first writer given a policy), else the
  default :class:`TierPolicy`. A policy that places the warm or cold tier elsewhere than the
  recorded one is refused (ConfigError naming both), so no command reads or writes tiers the
  archive does not have.
- ``audit_log``: where the writers' audit records go; None: no audit (the mirror's meaning).
  Default: ``audit.jsonl`` beside the archive root (:func:`books.default_audit_log`).
- ``lock_timeout``: seconds a writer waits for another to release the archive's one lock
  (``layout.archive_lock``); default 0: refuse at once. Compaction holds the lock only
  for its checks and renames and waits at least ``layout.ARCHIVE_LOCK_WAIT_SECONDS``
  (``compact.compaction_lock_wait``).
- ``books_and_records``: put the archive in write-once mode before the first write (for good;
  False never turns it off).

The verbs delegate to the modules that do the work (``compact``, ``retier_plan``, ``lifecycle``,
``withdraw``, ``integrity``, ``query``, ``placement``): re-tiering, pruning, withdrawal,
removal, the catalog rebuild and version pruning are handed the handle itself and take its lock
(:meth:`Archive.locked`) from it; the reading verbs are handed its resolved tiers (below),
``tag`` its root and audit log.

The tier policy is resolved in one place, once: :attr:`Archive.tiers` (a
``tiers.ArchiveTiers``: the warm and cold stores, each tier's settings, writer settings, layout
and root, the catalog path map).
Compaction reads the tier and writer settings in one function (``compact._published``: the tier
from ``TierPolicy.tier_for``), hands the Parquet writer (``layout.prepare_archive_file``) the
``WriterSettings`` alone (read in ``parquet_file.write_verified_file`` and ``choose_encodings``),
then hands the tiers to the catalog check it runs once, under the lock it publishes under.
Re-tiering (``lifecycle.retier``) reads ``archive.tiers`` once, under the lock
(``lifecycle._checked_tiers``: the stores' stale temps, the catalog check); its planner
(``retier_plan``) reads the same value once, when it is built, and carries every location in
the plan: each source's file and catalog path, each day's tier and period
(``TierPolicy.placement``), each rewrite's store, tier settings and layout (``consolidate`` hands
``parquet_file.write_table`` the writer settings alone; the store names the new file's catalog
path). Carrying the plan out reads only the plan; after the commit the garbage survey
(``garbage.unreachable_files``) lists the same tiers and hands ``garbage.remove_files`` each file
with its catalog path. ``retier_plan.plan_retier`` (without the lock) and pruning read it the
same way. Withdrawal, the catalog rebuild and version pruning read it where they need a store, a
catalog path or the catalog check. The catalog check (``catalog_check.checked_catalog``) and the
garbage survey each list the stores once (``ArchiveTiers.listing``: one listing per store, never
a request per file), compare the files' catalog paths with the catalog's and hand the listing
down (``catalog_check.unaccounted_files``), which reads no tiers.
The reading verbs (``read``, ``query``, ``open_view``, ``stats``, ``report``, ``verify``) hand
the same value down (``query``'s view and its checks, ``placement.locate`` and
``archive_metrics``, ``integrity.verify_archive``), as does ``lifecycle.relocated_report``;
no function below the handle resolves a policy again. ``read``, ``read_batch``, ``symbols``
and ``days`` go through the handle's one ``reader.ArchiveReader`` (made from those tiers on
first use), which keeps what it has read while its files are unchanged, so a second read
costs only the files it reads.

Every writing verb (and the orchestration's venue-day writer) runs inside
:meth:`Archive.writing`: ``books_and_records`` mode turned on first when the handle was built
with it, and a policy given to an archive that recorded none recorded once the write succeeded.
Versioned reads (``read``, ``versions``) and the version verbs (``tag``, ``prune_versions``)
are methods of this same class, with the same constructor: they read ``self.root`` and
``self.tiers`` and audit to ``self.audit_log`` as the verbs here do.
"""

from __future__ import annotations

import copy
from collections.abc import Collection, Iterable, Sequence
from contextlib import AbstractContextManager
from datetime import date
from pathlib import Path
from typing import Any

import pyarrow as pa

from skewtape_pipeline import fsio
from skewtape_pipeline.storage import TierFile
from skewtape_pipeline.ticks.archive.core import BESIDE, ArchiveCore, _Beside
from skewtape_pipeline.ticks.archive.ops import compact, integrity, lifecycle, retier_plan
from skewtape_pipeline.ticks.archive.ops import query as views
from skewtape_pipeline.ticks.archive.ops import withdraw as withdrawal
from skewtape_pipeline.ticks.archive.ops.compact_plan import (
    DEFAULT_RUN,
    CompactionRun,
    SymbolDayWrite,
)
from skewtape_pipeline.ticks.archive.ops.reader import ArchiveReader
from skewtape_pipeline.ticks.archive.ops.show import SymbolDayStory, show_symbol_day
from skewtape_pipeline.ticks.archive.ops.version_pruning import (
    PruneResult,
    past_version_bytes,
    prune_versions,
)
from skewtape_pipeline.ticks.archive.store import placement
from skewtape_pipeline.ticks.archive.store.catalog import SymbolDayKey
from skewtape_pipeline.ticks.archive.store.placement import (
    ArchiveState,
    Location,
    archive_state,
    locate,
)
from skewtape_pipeline.ticks.archive.store.policy import TierPolicy
from skewtape_pipeline.ticks.archive.store.reports_table import read_venue_day_reports
from skewtape_pipeline.ticks.archive.store.tiers import (
    ArchiveTiers,
)
from skewtape_pipeline.ticks.archive.store.versions import (
    AsOf,
    Version,
    latest_version,
    list_tags,
    list_versions,
    resolve_as_of,
    tag_version,
    version_state,
)
from skewtape_pipeline.ticks.encode.model import TickBatch
from skewtape_pipeline.ticks.encode.options import DEFAULT_ENCODING, TickEncoding
from skewtape_pipeline.ticks.encode.report import TickStorageCompactionReport
from skewtape_pipeline.ticks.encode.sources import SourceTicks, TickStream


class Archive:
    """The tick archive at ``root`` (its hot tier), with its options fixed when built (see the
    module docstring).

    Raises ConfigError when built for a path that is a file, a policy that is not a TierPolicy
    or that contradicts the recorded one, tier roots that nest (``tiers.check_roots_apart``),
    a negative or non-numeric ``lock_timeout``. (The root may not exist yet: a first
    compaction creates it; the verbs that need an archive refuse a folder that holds none, as
    ``layout.check_archive_root`` says.)
    """

    def __init__(
        self,
        root: Path | str,
        *,
        policy: TierPolicy | None = None,
        audit_log: Path | str | _Beside | None = BESIDE,
        lock_timeout: float = 0.0,
        books_and_records: bool = False,
    ):
        self.core = ArchiveCore(
            root,
            policy=policy,
            audit_log=audit_log,
            lock_timeout=lock_timeout,
            books_and_records=books_and_records,
        )
        """The archive as one object (``core.ArchiveCore``): what every operation is handed."""
        self._reader: ArchiveReader | None = None

    @property
    def root(self) -> Path:
        """The archive root (its hot tier)."""
        return self.core.root

    @property
    def tiers(self) -> ArchiveTiers:
        """The tier policy resolved for this archive, once, when it was built."""
        return self.core.tiers

    @property
    def audit_log(self) -> Path | None:
        """Where the writers' audit records go; None: no audit."""
        return self.core.audit_log

    @property
    def lock_timeout(self) -> float:
        """Seconds a writer waits for another to release the archive's lock."""
        return self.core.lock_timeout

    @property
    def books_and_records(self) -> bool:
        """Whether this handle turns write-once mode on before its first write."""
        return self.core.books_and_records

    def __repr__(self) -> str:
        return f"Archive({str(self.root)!r}, audit_log={self.audit_log!r})"

    # --- writing -------------------------------------------------------------------------------

    def tag(self, name: str, version: int | None = None) -> int:
        """Pin ``version`` (default: the latest) as ``name``; returns the version. Under the
        archive's lock, so a version pruning (which reads the tags under it) never drops a
        version tagged meanwhile."""
        with self.core.writing(), self.core.locked("tagging a version"):
            return tag_version(self.root, name, version=version, audit_log=self.audit_log)

    def prune_versions(
        self, *, keep_last: int | None = None, older_than: date | None = None
    ) -> PruneResult:
        """Drop old versions and the files only they read (``version_pruning.prune_versions``;
        refused in books_and_records mode, which a handle built with it turns on first)."""
        with self.core.writing():
            return prune_versions(self.core, keep_last=keep_last, older_than=older_than)

    def compact(
        self,
        source: SourceTicks | TickStream,
        *,
        as_of: date,
        encoding: TickEncoding = DEFAULT_ENCODING,
        run: CompactionRun = DEFAULT_RUN,
    ) -> list[TickStorageCompactionReport]:
        """Every symbol-day of ``source`` into the archive, encoded as ``encoding`` says, the
        run going as ``run`` says (``compact.compact_source``)."""
        doing = "compacting ticks into it"
        with fsio.stop_when_disk_full(self.root, doing), self.core.writing():
            return compact.compact_source(
                self.core, source, as_of=as_of, encoding=encoding, run=run
            )

    def compact_symbol_day(
        self, batch: TickBatch, write: SymbolDayWrite
    ) -> TickStorageCompactionReport:
        """One sorted symbol-day into the archive, as ``write`` says
        (``compact.compact_symbol_day``), committed as a version of its own (as ``compact``
        commits one per run)."""
        with self.core.writing():
            report = compact.compact_symbol_day(self.core, batch, write)
            compact.commit_compaction(self.core)
            return report

    def retier(
        self, *, as_of: date, months: Collection[str] | None = None
    ) -> lifecycle.RetierResult:
        """Move symbol-days to the tier their age calls for (``lifecycle.retier``)."""
        with self.core.writing():
            return lifecycle.retier(self.core, as_of=as_of, months=months)

    def prune(self) -> list[Any]:
        """Remove superseded files (``lifecycle.prune``); returns them."""
        with self.core.writing():
            return lifecycle.prune(self.core)

    def withdraw(self, keys: Iterable[SymbolDayKey]) -> list[SymbolDayKey]:
        """Hide catalogued symbol-days at once (``withdraw.withdraw_symbol_days``)."""
        with self.core.writing():
            return withdrawal.withdraw_symbol_days(self.core, keys)

    def remove(self, keys: Iterable[SymbolDayKey]) -> list[withdrawal.Removal]:
        """Take symbol-days out: hot files removed, consolidated copies withdrawn
        (``withdraw.remove_symbol_days``)."""
        with self.core.writing():
            return withdrawal.remove_symbol_days(self.core, keys)

    def rebuild_catalog(self, *, allow_fewer: bool = False) -> integrity.RebuildResult:
        """The catalog written again from the consolidated files (``integrity.rebuild_catalog``;
        refused when it would account for fewer symbol-days than the catalog it replaces,
        unless ``allow_fewer``)."""
        with self.core.writing():
            return integrity.rebuild_catalog(self.core, allow_fewer=allow_fewer)

    def resolve(self, rel: str) -> TierFile:
        """The file the catalog path ``rel`` names (``ArchiveTiers.resolve``)."""
        return self.tiers.resolve(rel)

    def relative(self, path: TierFile) -> str:
        """The catalog path of ``path`` (``ArchiveTiers.relative``)."""
        return self.tiers.relative(path)

    @property
    def policy(self) -> TierPolicy:
        """The archive's tier policy (the one its tiers resolve: ``tiers.policy``)."""
        return self.tiers.policy

    def locked(self, what: str) -> AbstractContextManager[None]:
        """The archive's one lock, waited for up to ``lock_timeout`` seconds
        (``core.ArchiveCore.locked``)."""
        return self.core.locked(what)

    def waiting(self, seconds: float) -> Archive:
        """This archive with its writers waiting up to ``seconds`` for the lock instead.
        ConfigError for seconds that are negative or not a number."""
        other = copy.copy(self)
        other.core = self.core.waiting(seconds)
        return other

    def writing(self) -> AbstractContextManager[ArchiveCore]:
        """Around every write to the archive by a writer outside this class, such as the
        Dagster asset archiving venue-days (``core.ArchiveCore.writing``: books mode first, the
        policy recorded after a write that succeeded)."""
        return self.core.writing()

    # --- reading -------------------------------------------------------------------------------

    def read(
        self,
        symbols: Iterable[str] | str | None = None,
        start: date | str | None = None,
        end: date | str | None = None,
        columns: Collection[str] | None = None,
        as_of: AsOf | None = None,
    ) -> pa.Table:
        """The ticks of ``symbols`` (None: all) on the days ``start`` to ``end`` (inclusive;
        None: open; a ``date``, a ``datetime`` or pandas ``Timestamp`` (its UTC day), or ISO
        text), as of a version (``as_of``: a number, a time, a tag; None: now), with ``columns``
        of the view (None: all), as an Arrow table (``.to_pandas()``; polars:
        ``polars.from_arrow``): row for row what ``SELECT <columns> FROM ticks ... ORDER BY
        symbol, date, ts, price, quantity, side`` returns, read straight from the files of
        those symbol-days (``reader.ArchiveReader``: no listing of the archive, only the files
        read verified). A symbol the archive holds with no ticks in the range gives no rows.

        Raises NotAnArchiveError for a root that holds no archive, UnknownSymbolError naming a
        symbol the archive does not hold (and the nearest it holds), ConfigError for an unknown
        column or a day that is none, VersionError for an ``as_of`` that names no kept
        version, DamagedFileError naming a file read that differs from its record,
        CatalogMismatchError naming a file the catalog or hot index lists that is missing;
        every one a SkewtapeError.
        """
        return self.reader.read(symbols, start, end, columns, as_of)

    def read_batch(
        self,
        symbols: Sequence[str],
        start: date | str | None = None,
        end: date | str | None = None,
        columns: Collection[str] | None = None,
        as_of: AsOf | None = None,
    ) -> dict[str, pa.Table]:
        """:meth:`read` of each of ``symbols`` in one call (``{symbol: table}``, in the order
        given), the state looked at once and the files read side by side (as ArcticDB's
        ``read_batch``)."""
        return self.reader.read_batch(symbols, start, end, columns, as_of)

    @property
    def reader(self) -> ArchiveReader:
        """This handle's reader (``reader.ArchiveReader``), made on first use; it keeps what it
        has read (catalog, hot index, footers, verified files) while their files are unchanged."""
        if self._reader is None:
            self._reader = ArchiveReader(self.tiers)
        return self._reader

    def state(self, as_of: AsOf | None = None) -> ArchiveState:
        """Where every symbol-day lives (now, or as of a version)."""
        self.reader.snapshot(None if as_of is None else as_of)  # refuses a root without archive
        if as_of is None:
            return archive_state(self.root)
        return version_state(self.root, resolve_as_of(self.root, as_of))

    def symbols(self, as_of: AsOf | None = None) -> list[str]:
        """The symbols with at least one visible symbol-day, sorted (NotAnArchiveError for a
        root that holds no archive)."""
        return sorted(self.reader.snapshot(as_of).symbols())

    def days(self, symbol: str, as_of: AsOf | None = None) -> list[date]:
        """The days of ``symbol`` the archive holds, sorted."""
        snapshot = self.reader.snapshot(as_of)
        return [piece.key[1] for piece in snapshot.pieces(self.tiers, symbol, None, None)]

    def report(self, symbol: str, day: date) -> Location | None:
        """Where ``symbol`` on ``day`` lives now (tier, file, rows, bytes); None when the
        archive does not hold it."""
        return locate(self.tiers, symbol, day)

    def versions(self) -> list[Version]:
        """The kept versions, oldest first."""
        return list_versions(self.root)

    def latest_version(self) -> Version | None:
        """The latest version (never pruned), None before the first."""
        return latest_version(self.root)

    def venue_day_reports(self, venue: str, day: date) -> pa.Table:
        """The reports table's rows of one venue-day (``reports_table.REPORTS_SCHEMA``; an
        empty table when no run reported it)."""
        return read_venue_day_reports(self.root, venue, day)

    def tags(self) -> dict[str, int]:
        """Every tag and the version it pins (``versions.list_tags``)."""
        return list_tags(self.root)

    def past_version_bytes(self) -> int:
        """Bytes on disk that only past versions read (``version_pruning.past_version_bytes``:
        what pruning versions would free)."""
        return past_version_bytes(self.core)

    def show(self, symbol: str, day: date) -> SymbolDayStory:
        """Where ``symbol`` on ``day`` is now, its report and its history from this archive's
        audit log (``show.show_symbol_day``); reads only."""
        return show_symbol_day(self.tiers, symbol, day, audit_log=self.audit_log)

    def verify(self, *, full: bool = False) -> integrity.ArchiveVerification:
        """Every file against its record (``integrity.verify_archive``); reads only."""
        return integrity.verify_archive(self.tiers, full=full)

    def query(
        self,
        sql: str,
        *,
        parameters: Sequence[Any] | None = None,
        unrestricted: bool = False,
    ) -> pa.Table:
        """``sql`` over the view ``ticks`` spanning every tier (``views.run_query``), through
        this archive's tiers; ConfigError for options that ``views.QueryOptions`` refuses."""
        options = views.QueryOptions(parameters=parameters or (), unrestricted=unrestricted)
        return views.run_query(sql, self.tiers, options)

    def open_view(self, con: Any, *, name: str = views.VIEW_NAME) -> Any:
        """The view ``name`` over every tier on the DuckDB connection ``con``
        (``views.open_ticks_view``); returns ``con``."""
        return views.open_ticks_view(con, self.tiers, name=name)

    def stats(self) -> placement.ArchiveMetrics:
        """Files, bytes, ticks and symbol-days per tier (``placement.archive_metrics``)."""
        return placement.archive_metrics(self.tiers)

    def plan_retier(
        self, *, as_of: date, months: Collection[str] | None = None
    ) -> retier_plan.RetierPlan:
        """What :meth:`retier` would move (``retier_plan.plan_retier``); reads only."""
        return retier_plan.plan_retier(self.core, as_of=as_of, months=months)


# --- the recorded policy ---------------------------------------------------------------------
