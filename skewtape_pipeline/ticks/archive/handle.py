"""The front door of the tick archive: :class:`Archive`, one archive built once from its root.

Its options (tier policy, audit log, lock timeout, write-once mode) are fixed and checked when it
is built, never passed again (as deltalake's ``DeltaTable``, ArcticDB's ``Library``); each verb
documents its parameters, returns and raises. The version verbs are ``archive.versions``::

    archive = Archive("data/archive")  # the tier policy the archive records, audited
    archive.retier(as_of=date(2026, 12, 1))
    table = archive.read("polymarket|0xabc", start=date(2026, 11, 2), columns=["ts", "price"])
    rows = archive.query("SELECT symbol, count(*) FROM ticks GROUP BY symbol")
    archive.versions.tag("paper-2026")
"""

from __future__ import annotations

import copy
from collections.abc import Collection, Iterable, Sequence
from contextlib import AbstractContextManager
from datetime import date
from pathlib import Path
from typing import Any

import pyarrow as pa

from skewtape_pipeline.ticks.archive.core import BESIDE, ArchiveCore, _Beside
from skewtape_pipeline.ticks.archive.ops import compact, integrity
from skewtape_pipeline.ticks.archive.ops import query as views
from skewtape_pipeline.ticks.archive.ops import retier as retiering
from skewtape_pipeline.ticks.archive.ops import withdraw as withdrawal
from skewtape_pipeline.ticks.archive.ops.compact_plan import (
    DEFAULT_RUN,
    CompactionRun,
    SymbolDayWrite,
)
from skewtape_pipeline.ticks.archive.ops.read_plan import check_day
from skewtape_pipeline.ticks.archive.ops.reader import ArchiveReader
from skewtape_pipeline.ticks.archive.ops.show import SymbolDayStory, show_symbol_day
from skewtape_pipeline.ticks.archive.store import placement
from skewtape_pipeline.ticks.archive.store.catalog import SymbolDayKey
from skewtape_pipeline.ticks.archive.store.policy import TierPolicy
from skewtape_pipeline.ticks.archive.store.reports_table import read_venue_day_reports
from skewtape_pipeline.ticks.archive.store.tiers import ArchiveTiers
from skewtape_pipeline.ticks.archive.store.versions import AsOf
from skewtape_pipeline.ticks.archive.versions_api import ArchiveVersions
from skewtape_pipeline.ticks.encode.model import TickBatch
from skewtape_pipeline.ticks.encode.options import DEFAULT_ENCODING, TickEncoding
from skewtape_pipeline.ticks.encode.report import TickStorageCompactionReport
from skewtape_pipeline.ticks.encode.sources import SourceTicks, TickStream


class Archive:
    """The tick archive at ``root`` (its hot tier), with its options fixed when built.

    Parameters
    ----------
    root
        The archive root (its hot tier); a first compaction creates it, every other writer
        refuses a root that holds no archive (NotAnArchiveError), creating nothing.
    policy
        The tier policy. None: the one the archive records (``_skewtape_tier_policy.json`` in
        the root, written by the first writer given a policy), else the default
        :class:`TierPolicy`. One moving a tier that holds files, or reaching it where they are
        not, is refused; a safe change is recorded by a write (``store.policy_change``).
    audit_log
        Its audit log (writers refuse it in a missing folder); None: none; default: beside root.
    lock_timeout
        Seconds a writer waits for another to release the archive's one lock; 0: refuse at
        once (a compaction waits at least ``layout.ARCHIVE_LOCK_WAIT_SECONDS``, 600 s).
    books_and_records
        True: write-once mode before the first write, for good; False: as is (else ConfigError).

    Raises
    ------
    ConfigError
        A root that is a file or, new, in another archive or its tiers (NotAnArchiveError), a root
        or audit_log that is no path (None), a policy not a TierPolicy or changing the recorded one
        unsafely (naming both), nested tier roots, a ``lock_timeout`` < 0, nan, inf or no number.
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
        """The tier policy resolved once: stores, each tier's settings and layout, catalog paths."""
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
        """Whether this archive turns write-once mode on before its first write."""
        return self.core.books_and_records

    @property
    def policy(self) -> TierPolicy:
        """The archive's tier policy (the one its tiers resolve)."""
        return self.tiers.policy

    @property
    def versions(self) -> ArchiveVersions:
        """The version verbs (:class:`ArchiveVersions`); reading as of one: ``read(as_of=)``."""
        return ArchiveVersions(self.core)

    def __repr__(self) -> str:
        return f"Archive({str(self.root)!r}, audit_log={self.audit_log!r})"

    def compact(
        self,
        source: SourceTicks | TickStream,
        *,
        as_of: date,
        encoding: TickEncoding = DEFAULT_ENCODING,
        run: CompactionRun = DEFAULT_RUN,
    ) -> list[TickStorageCompactionReport]:
        """Compact every symbol-day of ``source`` into the archive (each sorted, validated,
        written, read back, published under the lock and audited; bad input changes nothing),
        committing one version when it changed anything.

        Parameters
        ----------
        source
            The ticks: a tick file's reader (``ticks.encode.sources``) or a stream of chunks.
        as_of
            The day each symbol-day's age (hence its tier) is counted from.
        encoding
            How the ticks are encoded; fields left None are detected (widened to the archive's).
        run
            Symbol filter, memory limit (routed rows beyond half of it spilled to disk: memory
            stays within it plus the largest symbol-day), progress callbacks.

        Returns
        -------
        list of TickStorageCompactionReport
            One per symbol-day written, in the order written.

        Raises
        ------
        ArchiveSchemaError
            The data needs a finer unit or a larger scale than the archive records.
        ConfigError
            A ``source`` that is no tick reader (a path), a ``run`` or ``encoding`` of another
            type, a vocabulary the data does not follow, no symbol where the input has none.
        TickValidationError
            Invalid input, naming the row and column (PrecisionLossError: a value too fine).
        RoundTripError
            A written file did not read back equal (that symbol-day is not published).
        WriteOnceError
            ``books_and_records`` mode and a symbol-day's file exists.
        CatalogMismatchError
            A symbol-day's file exists and the catalog does not account for the files.
        ArchiveBusyError
            Another writer held the archive's lock for longer than the compaction waits.
        DiskFullError
            The disk filled up while writing; nothing unfinished was published.

        Examples
        --------
        >>> from skewtape_pipeline.ticks.encode.sources import read_canonical
        >>> reports = archive.compact(read_canonical("ticks.csv"), as_of=date(2026, 12, 1))
        >>> [(r.symbol, r.tier) for r in reports][:1]
        [('ES', 'HOT')]
        """
        return compact.compact_source(self.core, source, as_of=as_of, encoding=encoding, run=run)

    def compact_symbol_day(
        self, batch: TickBatch, write: SymbolDayWrite
    ) -> TickStorageCompactionReport:
        """Compact one sorted symbol-day into the archive (atomic: a rewrite replaces its file;
        audited), committed as a version of its own (none when nothing changed).

        Parameters
        ----------
        batch
            Its ticks, sorted (``compact_plan.sort_batch`` counts) and on ``write.day`` (UTC).
        write
            Symbol, day, age in days (hence the tier), what was measured of the input (no raw
            size: the canonical CSV's is measured) and the encoding, of which only the timestamp
            unit (None: the batch's) and the target ratio apply (:class:`SymbolDayWrite`).

        Returns
        -------
        TickStorageCompactionReport
            The file's report (its note says so when the archive held these ticks already).

        Raises
        ------
        ConfigError
            A batch or write of another type, a missing or negative ``age_days``, scales or a
            unit other than the archive's; nothing written.
        TickValidationError
            An empty, unsorted or invalid batch, a tick off the day, a bad symbol
            (PrecisionLossError: a timestamp finer than the encoding's unit); nothing written.
        RoundTripError, WriteOnceError, CatalogMismatchError, ArchiveBusyError
            As :meth:`compact` raises them.
        """
        return compact.compact_committed(self.core, batch, write)

    def retier(
        self, *, as_of: date, months: Collection[str] | None = None
    ) -> retiering.RetierResult:
        """Move every symbol-day to the tier its age at ``as_of`` calls for (each source verified
        first; withdrawn symbol-days purged), under the lock, audited, committing a version;
        idempotent (a rerun finishes an interrupted run). Files a kept version reads are kept
        until it is pruned; in ``books_and_records`` mode, every replaced file (``files_retained``).

        Parameters
        ----------
        as_of
            The day ages are counted from.
        months
            ``YYYY-MM`` months whose symbol-days may move (a backfill partition); None: all.
            Others are carried along when a file they share is rewritten.

        Returns
        -------
        retiering.RetierResult
            The moves made, the files written and removed, the version committed (None when
            every symbol-day reads from where it did and the catalog lists the same files).

        Raises
        ------
        ConfigError
            A bad ``as_of`` or month, a symbol-day after ``as_of``, a tier root's other scales,
            a policy record another writer changed since this archive was opened.
        ArchiveBusyError
            Another writer held the archive's lock beyond ``lock_timeout`` seconds.
        CatalogMismatchError
            The catalog does not account for the files, or a hot source has no record; nothing
            committed.
        DamagedFileError
            A source differing from its record, or whose footer does not decode; nothing committed.
        RoundTripError, DiskFullError
            A new file did not read back equal, the disk filled up (nothing committed, removed).

        Examples
        --------
        >>> archive.plan_retier(as_of=date(2026, 12, 1))  # what would move; reads only
        >>> result = archive.retier(as_of=date(2026, 12, 1), months=["2026-10"])
        """
        return retiering.retier(self.core, as_of=as_of, months=months)

    def prune(self) -> list[Any]:
        """Remove the superseded files (moved hot files, replaced or uncommitted consolidated
        files) no kept version reads: :meth:`retier`'s last step on its own; each audited first.

        Returns
        -------
        list of TierFile
            The files removed.

        Raises
        ------
        WriteOnceError
            ``books_and_records`` mode and something to remove (audited; nothing removed).
        ArchiveBusyError
            Another writer held the archive's lock beyond ``lock_timeout`` seconds.
        CatalogMismatchError
            The catalog does not account for the files on disk (nothing removed).
        """
        return retiering.prune(self.core)

    def withdraw(self, keys: Iterable[SymbolDayKey]) -> list[SymbolDayKey]:
        """Hide catalogued symbol-days' consolidated copies at once (one atomic catalog write,
        audited first; a hot file written later is the live copy); the next :meth:`retier`
        rewrites their files without them. Idempotent: nothing written when nothing is new.

        Parameters
        ----------
        keys
            ``(symbol, datetime.date)`` pairs; those not catalogued or withdrawn are ignored.

        Returns
        -------
        list of (str, date)
            The keys this call withdrew, sorted.

        Raises
        ------
        ConfigError
            ``keys`` not iterable, or a key not a ``(str, date)`` pair; nothing written.
        WriteOnceError
            ``books_and_records`` mode and a key to withdraw (audited; nothing written).
        ArchiveBusyError
            Another writer held the archive's lock beyond ``lock_timeout`` seconds.
        CatalogMismatchError
            The catalog is missing, unreadable or does not account for the files; nothing written.
        """
        return withdrawal.withdraw_symbol_days(self.core, keys)

    def remove(self, keys: Iterable[SymbolDayKey]) -> list[withdrawal.Removal]:
        """Take symbol-days out, under the lock: their consolidated copy withdrawn, then their
        hot file removed (a crash between leaves a day hidden, never half-visible; a rerun
        finishes); audited. Idempotent.

        Parameters
        ----------
        keys
            ``(symbol, datetime.date)`` pairs.

        Returns
        -------
        list of withdraw.Removal
            One per key, sorted: what was withdrawn and removed.

        Raises
        ------
        ConfigError
            ``keys`` not iterable, or a key not a ``(str, date)`` pair; nothing changed.
        WriteOnceError
            ``books_and_records`` mode and a key the archive holds (audited; nothing changed).
        ArchiveBusyError
            Another writer held the archive's lock beyond ``lock_timeout`` seconds.
        CatalogMismatchError
            The catalog does not account for the files on disk; nothing changed.
        """
        return withdrawal.remove_symbol_days(self.core, keys)

    def rebuild_catalog(self, *, allow_fewer: bool = False) -> integrity.RebuildResult:
        """Write the catalog again from the consolidated files in the policy's tier roots (not
        when it says what they say: no version then); withdrawals kept from the old catalog
        while it reads (after a lost one, rerun :meth:`remove`); unrecorded hot files recorded.

        Parameters
        ----------
        allow_fewer
            A bool (else ConfigError): allow fewer symbol-days than the old catalog (lost for good).

        Returns
        -------
        integrity.RebuildResult
            What the new catalog holds and what the rebuild found.

        Raises
        ------
        TickFormatError
            A file that is no consolidated tick file or does not match its digest, two of one
            generation holding one symbol-day, a malformed hot file record; DamagedFileError: a
            consolidated file not holding the bytes its content name records or whose footer
            does not decode, a hot file that does not read, the versions' index cut short (or
            its sums) or the latest version's record changed. Nothing written.
        ArchiveBusyError
            Another writer held the archive's lock beyond ``lock_timeout`` seconds.
        CatalogMismatchError
            Fewer symbol-days without ``allow_fewer`` (nothing written).
        """
        return integrity.rebuild_catalog(self.core, allow_fewer=allow_fewer)

    def waiting(self, seconds: float) -> Archive:
        """This archive with its writers waiting up to ``seconds`` for the lock instead.

        Parameters
        ----------
        seconds
            The new ``lock_timeout``.

        Returns
        -------
        Archive
            A copy (this one unchanged).

        Raises
        ------
        ConfigError
            ``seconds`` negative or not a number.
        """
        other = copy.copy(self)
        other.core = self.core.waiting(seconds)
        return other

    def writing(self) -> AbstractContextManager[ArchiveCore]:
        """Around a compaction outside this class (the Dagster asset's venue-days), as around
        the verbs here (``ArchiveCore.writing``): the policy checked, then recorded once it wrote.

        Returns
        -------
        context manager
            Yields the archive's core, to hand to the operations (``ops/``).
        """
        return self.core.writing(creates=True)

    def read(
        self,
        symbols: Iterable[str] | str | None = None,
        start: date | str | None = None,
        end: date | str | None = None,
        columns: Collection[str] | None = None,
        as_of: AsOf | None = None,
    ) -> pa.Table:
        """Read the ticks of some symbols over some days, now or as of a version, straight
        from the files of those symbol-days (each verified; kept while unchanged).

        Parameters
        ----------
        symbols
            A symbol, a list of them, or None: every symbol.
        start, end
            The first and last day (inclusive): a ``date``, a ``datetime`` or pandas
            ``Timestamp`` (its UTC day), or ISO text; None: open.
        columns
            Columns of the view ``ticks`` (None: all).
        as_of
            A version: a number, a time (the latest version at or before it; a date: its
            midnight UTC), a tag; None: now.

        Returns
        -------
        pyarrow.Table
            Row for row what ``SELECT <columns> FROM ticks ... ORDER BY symbol, date, ts,
            price, quantity, side`` returns, with the view's types but ``side``'s: a
            dictionary (``reader.SIDE_TYPE``; pandas: a Categorical); no rows for a held
            symbol without ticks then.

        Raises
        ------
        NotAnArchiveError
            The root holds no archive.
        UnknownSymbolError
            A symbol the archive does not hold (naming the nearest it holds).
        ConfigError
            An unknown column, a day that is none, or ``start`` after ``end``.
        VersionError
            An ``as_of`` naming no kept version, or one whose record is damaged or files missing.
        DamagedFileError
            A file read that differs from its record (a version's files: from their names).
        CatalogMismatchError
            A file the catalog or the hot index lists is missing.

        Examples
        --------
        >>> table = archive.read("ES", start="2026-11-02", end="2026-11-06", columns=["price"])
        >>> before = archive.read(["ES", "NQ"], as_of="paper-2026").to_pandas()
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
        """:meth:`read` each of ``symbols`` in one call: one look at the archive, one
        verification pass, the files read side by side (as ArcticDB's ``read_batch``).

        Parameters
        ----------
        symbols
            The symbols, each read on its own.
        start, end, columns, as_of
            As :meth:`read` takes them.

        Returns
        -------
        dict of str to pyarrow.Table
            ``{symbol: table}`` in the order given, each table as :meth:`read` returns it.

        Raises
        ------
        SkewtapeError
            As :meth:`read` raises them (NotAnArchiveError, UnknownSymbolError, ...).

        Examples
        --------
        >>> tables = archive.read_batch(["ES", "NQ"], start="2026-11-02", end="2026-11-02")
        >>> {symbol: table.num_rows for symbol, table in tables.items()}
        {'ES': 1200, 'NQ': 900}
        """
        return self.reader.read_batch(symbols, start, end, columns, as_of)

    @property
    def reader(self) -> ArchiveReader:
        """This archive's reader (``reader.ArchiveReader``), made on first use; it keeps what it
        has read (catalog, hot index, footers, verified files) while their files are unchanged."""
        if self._reader is None:
            self._reader = ArchiveReader(self.core)
        return self._reader

    def state(self, as_of: AsOf | None = None) -> placement.ArchiveState:
        """Where every symbol-day lives, now or as of a version.

        Parameters
        ----------
        as_of
            The version read, as :meth:`read` takes it; None: now.

        Returns
        -------
        placement.ArchiveState
            The catalog, the live hot files, the catalogued days they hide.

        Raises
        ------
        NotAnArchiveError
            The root holds no archive.
        VersionError
            An ``as_of`` that names no kept version, or a file of that version that is missing.
        TickFormatError
            A damaged catalog or hot index, or a damaged version file (DamagedFileError).
        """
        self.reader.snapshot(as_of)  # refuses a root without archive
        if as_of is None:
            return placement.archive_state(self.root)
        versions = self.core.versions
        return versions.state(versions.resolve_as_of(as_of))

    def symbols(self, as_of: AsOf | None = None) -> list[str]:
        """The symbols with at least one visible symbol-day, sorted.

        Parameters
        ----------
        as_of
            The version read, as :meth:`read` takes it.

        Returns
        -------
        list of str

        Raises
        ------
        NotAnArchiveError, VersionError, DamagedFileError
            As :meth:`read` raises them.
        """
        return sorted(self.reader.snapshot(as_of).symbols())

    def days(self, symbol: str, as_of: AsOf | None = None) -> list[date]:
        """The days of ``symbol`` the archive holds, sorted (none for a symbol it lacks).

        Parameters
        ----------
        symbol
            The symbol.
        as_of
            The version read, as :meth:`read` takes it.

        Returns
        -------
        list of date

        Raises
        ------
        ConfigError, NotAnArchiveError, VersionError, DamagedFileError
            ``symbol`` is not a string (ConfigError); else as :meth:`read` raises them.
        """
        return self.reader.days(symbol, as_of)

    def report(self, symbol: str, day: date | str) -> placement.Location | None:
        """Where ``symbol`` on ``day`` (UTC) lives now.

        Parameters
        ----------
        symbol
            The symbol looked up.
        day
            The day: a ``date``, a ``datetime`` or pandas ``Timestamp`` (its UTC day when it
            has a time zone), or ISO text (``2026-09-30``), as :meth:`read`'s ``start`` takes.

        Returns
        -------
        placement.Location or None
            Its tier, file, rows and bytes; None when the archive does not hold it.

        Raises
        ------
        ConfigError
            A ``day`` that is none of those, naming it.
        TickFormatError
            A damaged catalog.
        """
        return placement.locate(self.tiers, symbol, check_day(day, "day", required=True))

    def venue_day_reports(self, venue: str, day: date | str) -> pa.Table:
        """The reports table's rows of one venue-day.

        Parameters
        ----------
        venue
            The venue a venue-day run archived.
        day
            Its day, as :meth:`report` takes it (a ``date``, a ``datetime``, ISO text).

        Returns
        -------
        pyarrow.Table
            Rows of ``reports_table.REPORTS_SCHEMA``; empty when no run reported it.

        Raises
        ------
        ConfigError
            A ``day`` that is no day, naming it.
        TickFormatError
            A reports file that does not read.
        """
        return read_venue_day_reports(self.root, venue, check_day(day, "day", required=True))

    def show(self, symbol: str, day: date | str) -> SymbolDayStory:
        """Where ``symbol`` on ``day`` is now, its report and its history from this archive's
        audit log (without one: only its ``written``); reads only. The history is the same
        whatever spelling of the root the handle was built with (``..``, a symbolic link), and
        follows an archive moved or copied with the audit log beside it (``ops.show``).

        Parameters
        ----------
        symbol
            The symbol.
        day
            The day, as :meth:`report` takes it (a ``date``, a ``datetime``, ISO text).

        Returns
        -------
        SymbolDayStory
            Its location, its report, its audited history.

        Raises
        ------
        ConfigError
            A ``day`` that is no day, naming it; the archive knows nothing of the symbol-day
            (a mistyped symbol or date).
        TickFormatError
            A damaged catalog or reports file.
        AuditLogError
            A line of the audit log that is not a record, naming the line.
        """
        return show_symbol_day(self.core, symbol, check_day(day, "day", required=True))

    def verify(self, *, full: bool = False) -> integrity.ArchiveVerification:
        """Check every file against its record (size, sha256, footer) and that the records
        account for every file on disk, the tier roots' archive markers, what the kept versions
        read; reads only, findings looked at again under the lock (a writer waited for).

        Parameters
        ----------
        full
            Also read every page of every file with page checksums verified.

        Returns
        -------
        integrity.ArchiveVerification
            Every problem with a file found (``ok`` False when any), a stray Parquet file in
            the hot tier among them; and the leftovers ``prune`` removes (``leftovers``, which
            leave ``ok`` True): reported, not raised.

        Raises
        ------
        NotAnArchiveError
            A root that holds no archive.
        """
        return integrity.verify_archive(self.core, full=full)

    def query(
        self,
        sql: str,
        *,
        parameters: Sequence[Any] | None = None,
        unrestricted: bool = False,
    ) -> pa.Table:
        """Run ``sql`` over the view ``ticks`` spanning every tier (and ``tick_reports``) in a
        fresh in-memory DuckDB, each file verified first when it changed.

        Parameters
        ----------
        sql
            One statement; read-only unless ``unrestricted``.
        parameters
            Values for its ``?`` placeholders.
        unrestricted
            Lift the read-only checks.

        Returns
        -------
        pyarrow.Table
            The rows; for a statement without results, DuckDB's status (``SET``: a column
            ``Success``, no rows), or no columns when DuckDB gives no relation.

        Raises
        ------
        NotAnArchiveError
            A root that holds no archive.
        ConfigError
            Bad options, a query that is not one read-only statement or that DuckDB rejects.
        DamagedFileError
            A file of the view differs from its record or its footer does not decode.
        CatalogMismatchError
            The catalog is missing while consolidated files exist, or lists a file not on disk.
        ObjectStoreError
            A tier root in an object store that cannot be used (naming it).

        Examples
        --------
        >>> archive.query("SELECT symbol, count(*) AS n FROM ticks WHERE price > ? GROUP BY 1",
        ...               parameters=[0.5]).to_pylist()
        [{'symbol': 'ES', 'n': 1200}]
        """
        options = views.QueryOptions(parameters=parameters or (), unrestricted=unrestricted)
        return views.run_query(sql, self.core, options)

    def open_view(self, con: Any, *, name: str = views.VIEW_NAME) -> Any:
        """Create (or replace) the view over every tier on a DuckDB connection of yours; it
        names files, so open it again after the archive changes.

        Parameters
        ----------
        con
            A ``duckdb.DuckDBPyConnection`` (anything else: ConfigError, nothing read).
        name
            The view's name.

        Returns
        -------
        duckdb.DuckDBPyConnection
            ``con``.

        Raises
        ------
        NotAnArchiveError
            A root that holds no archive.
        ConfigError
            A ``name`` that is not an identifier.
        DamagedFileError, CatalogMismatchError, ObjectStoreError
            As :meth:`query` raises them.
        """
        return views.open_ticks_view(con, self.core, name=name)

    def stats(self) -> placement.ArchiveMetrics:
        """Files, bytes, ticks and symbol-days per tier; reads only.

        Returns
        -------
        placement.ArchiveMetrics
            Hot numbers from the hot files, warm and cold from the catalog, retained files.

        Raises
        ------
        TickFormatError
            A damaged catalog or hot index.
        """
        return placement.archive_metrics(self.tiers)

    def plan_retier(
        self, *, as_of: date, months: Collection[str] | None = None
    ) -> retiering.RetierPlan:
        """What :meth:`retier` would move; reads only.

        Parameters
        ----------
        as_of, months
            As :meth:`retier` takes them.

        Returns
        -------
        retiering.RetierPlan
            The moves, the files they rewrite and where each symbol-day goes.

        Raises
        ------
        ConfigError
            A bad ``as_of`` or month, or a symbol-day dated after ``as_of``.
        TickFormatError
            A damaged catalog or an undecodable partition folder.
        """
        return retiering.plan_retier(self.core, as_of=as_of, months=months)
