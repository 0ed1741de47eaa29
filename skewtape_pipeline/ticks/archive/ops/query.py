"""One logical table over every tier: the DuckDB view ``ticks``.

Columns: ``symbol`` (VARCHAR), ``date`` (DATE, the UTC day), ``ts``, ``price``, ``quantity``,
``side`` (as stored), ``tier`` (HOT, WARM or COLD), and ``year``, ``month`` (INTEGER, of
``date``). So::

    SELECT ts, price FROM ticks WHERE symbol = ? AND date BETWEEN ? AND ?

answers whatever tier each day is in. ``year`` and ``month`` are the files' folder names where
the layout has them (``year=`` for every file, ``month=`` for hot and month-layout files): adding
``AND year = 2025`` (and ``month``) to a query lets DuckDB skip a consolidated file of another
period without opening it, which a filter on ``date`` alone cannot (it is checked against each
opened file's statistics). Where a folder above the partition folders is itself named
``key=value``, ``year`` and ``month`` are computed from ``date`` instead (and consolidated files
are read without Hive keys), since DuckDB would read that folder's value for them.

The view is built from one reading of the archive's state (``placement.archive_state``): the hot
symbol-day files that are the current copy of their day, read with Hive partitioning (a
``symbol``/``date`` filter skips files by their folder names, without opening them), and the warm
and cold consolidated files the catalog lists (a filter skips row groups by their
``symbol``/``date`` statistics). Files the catalog does not list and hot files it supersedes are
never read, and the catalogued symbol-days whose consolidated copy is hidden (overridden by a newer
hot file, or withdrawn) are left out of their file's branch by an anti-join against a ``VALUES``
list (one hash join, however many; filters still reach the Parquet scan), so every tick appears
exactly once and a withdrawn one never.

A tier whose root is an S3 prefix (``skewtape_pipeline.storage``) is scanned through a pyarrow
dataset of its catalogued objects registered on the connection (DuckDB pushes projections and
filters into it): ``year`` and ``month`` come from the object keys below the tier root, so a filter
on them skips objects unopened, and ``symbol``/``date`` filters skip row groups by their statistics.
Such a view exists only on the connection :func:`open_ticks_view` registered it on, so
:func:`ticks_view_sql` refuses it. An unusable store is an ``ObjectStoreError`` naming the URI.

An archive whose catalog is missing while consolidated files exist is refused
(``CatalogMismatchError``, naming the files and the rebuild command), as is a catalogued file
missing from disk; a file whose Parquet footer does not decode is a ``DamagedFileError``
naming it. Consolidated files are found under the tier roots of each archive's resolved tiers
(``core.tiers``): every function here takes archives' cores (``Archive(root).core``, a
``core.ArchiveCore``), one archive's or several, and none resolves a tier policy itself or
builds a version log of its own (an as-of view reads ``core.versions``).

Every file the view names is verified against the record made when it was written before the
view is created, unless its stamp is unchanged since it last was (``trust.verify_before_reading``:
the mirror's trust model); a file that differs is a ``DamagedFileError`` naming it.

:func:`run_query` and its siblings run the caller's SQL read-only by default: exactly one
``SELECT`` (:func:`check_read_only`), on a connection that may read only the archives' own folders
(:func:`restrict`); ``unrestricted=True`` lifts both.

The view lists files; open it again (or use :func:`run_query`, which does) after the archive
changes, e.g. after re-tiering removed the files an older view names.

Plain DuckDB equivalent of one archive's view (what :func:`ticks_view_sql` returns)::

    CREATE VIEW ticks AS
    SELECT symbol, date, ts, price, quantity, side, 'HOT' AS tier, year, month
      FROM read_parquet([<hot files>], hive_partitioning = true,
                        hive_types = {'symbol': VARCHAR, 'year': INTEGER, 'month': INTEGER,
                                      'date': DATE})
    UNION ALL BY NAME
    SELECT symbol, date, ts, price, quantity, side, 'COLD' AS tier, year,
           CAST(month(date) AS INTEGER) AS month
      FROM read_parquet([<cold files of year=YYYY/>], hive_partitioning = true,
                        hive_types = {'year': INTEGER})
      ANTI JOIN (VALUES ('<symbol>', DATE '<day>'), ...) AS hidden(symbol, date)
      USING (symbol, date)
    ...
"""

from __future__ import annotations

import os
import re
import tempfile
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any, TypeVar

import duckdb
import pyarrow as pa
import pyarrow.dataset as ds

from skewtape_pipeline.duckdb_interrupt import interruptible
from skewtape_pipeline.errors import (
    CatalogMismatchError,
    ConfigError,
    DamagedFileError,
    checked_flag,
    quoted,
)
from skewtape_pipeline.fsio import load_json
from skewtape_pipeline.storage import LocalTier, ObjectFile, ObjectTier, exists
from skewtape_pipeline.ticks.archive.core import ArchiveCore
from skewtape_pipeline.ticks.archive.store.catalog import Catalog
from skewtape_pipeline.ticks.archive.store.consolidate import read_footer
from skewtape_pipeline.ticks.archive.store.layout import (
    check_archive_root,
    empty_ticks_select,
)
from skewtape_pipeline.ticks.archive.store.placement import ArchiveState, archive_state
from skewtape_pipeline.ticks.archive.store.policy import COLD, HOT, WARM
from skewtape_pipeline.ticks.archive.store.reports_table import PLACES_SCHEMA, reports_view_sql
from skewtape_pipeline.ticks.archive.store.tiers import ArchiveTiers, normalized
from skewtape_pipeline.ticks.archive.store.trust import (
    ChangedUnderRead,
    check_catalog_present,
    repair_hint,
    settled,
    verify_before_reading,
)
from skewtape_pipeline.ticks.archive.store.versions import AsOf, verify_version

VIEW_NAME = "ticks"
VIEW_COLUMNS = ("symbol", "date", "ts", "price", "quantity", "side", "tier", "year", "month")
HIVE_TYPES = "{'symbol': 'VARCHAR', 'year': 'INTEGER', 'month': 'INTEGER', 'date': 'DATE'}"

Archives = ArchiveCore | Sequence[ArchiveCore]
"""One archive's core (``Archive(root).core``), or several archives' (one view over all)."""
Narrow = Callable[[ArchiveState], ArchiveState]
"""What :func:`open_ticks_view`'s ``narrow`` is: the state cut down to the symbol-days wanted,
before any file is named or verified (``versions.symbol_days``)."""


def ticks_view_sql(archives: Archives, *, name: str = VIEW_NAME, as_of: AsOf | None = None) -> str:
    """The ``CREATE OR REPLACE VIEW`` statement of the archive(s) whose cores are
    ``archives`` (``Archive(root).core``; reads only); with ``as_of`` (a version number, a time
    or a tag: ``VersionLog.resolve_as_of``; one archive only), the view as it read right after
    that version committed.

    Raises
    ------
    ConfigError
        No archive, an item that is not an ``ArchiveCore`` (a bare path: pass
        ``Archive(root).core``), a root that is not a folder or lies below a folder named
        ``symbol=...`` or ``date=...`` (which DuckDB would read as those columns), a view name
        that is not an identifier, or a tier in an object store (its files are scanned
        through Arrow datasets that only :func:`open_ticks_view` can register on a connection).
    TickFormatError
        A damaged catalog.
    CatalogMismatchError
        The catalog is missing while consolidated files exist, or lists a file not on disk, or
        a hot file has no record of its size and sha256 (written before hot files were recorded).
    DamagedFileError
        A file of the view differs from its record (``trust.verify_before_reading``), or a
        version's snapshot from its content name.
    ObjectStoreError
        A tier root in an object store cannot be used (names the URI).
    VersionError
        ``as_of`` names no kept version, or a file the version reads is missing.
    """
    view = _view(archives, name, as_of)
    if view.datasets:
        raise ConfigError(
            f"{', '.join(sorted(view.uris))}: a tier in an object store is read through Arrow "
            "datasets registered on a connection; use open_ticks_view (or run_query) instead "
            "of the SQL text"
        )
    return view.sql


@dataclass(frozen=True)
class _View:
    """The view's statement and the Arrow datasets it names (the object-store tiers' files)."""

    sql: str
    datasets: dict[str, ds.Dataset]
    uris: frozenset[str]


def _view(
    archives: Archives, name: str, as_of: AsOf | None = None, narrow: Narrow | None = None
) -> _View:
    if not isinstance(name, str) or not name.isidentifier():
        raise ConfigError(f"name = {name!r}: expected an SQL identifier")
    branches, datasets, uris = [], {}, set()
    checked = _archives(archives)
    if as_of is not None and len(checked) != 1:
        raise ConfigError(f"as_of = {as_of!r}: a version names one archive; pass one archive")
    for core in checked:
        tiers = core.tiers
        state = _verified_state(core, as_of, narrow)
        hot = [str(normalized(h.path)) for h in state.hot_live]  # as allowed: `..` folded
        if hot:
            folders = "year, month" if _no_keys_above(normalized(tiers.root)) else _YEAR_MONTH
            branches.append(
                f"SELECT {_COMMON}, '{HOT}' AS tier, {folders} "
                f"FROM read_parquet({_list(hot)}, hive_partitioning = true, "
                f"hive_types = {HIVE_TYPES})"
            )
        for tier in (WARM, COLD):
            hidden = sorted(k for k in state.hidden if state.catalog.partitions[k].tier == tier)
            store = tiers.stores[tier]
            by_folders = _files_by_folder_keys(tiers, state.catalog, tier)
            for (monthly, hive), files in sorted(by_folders.items()):
                if isinstance(store, ObjectTier):
                    table = f"_skewtape_{tier.lower()}_{len(datasets)}"
                    datasets[table] = _object_dataset(store, files, monthly=monthly)
                    branch = _dataset_branch(tier, table, monthly=monthly)
                    uris.add(store.root)
                else:
                    branch = _consolidated_branch(tier, files, monthly=monthly, hive=hive)
                branches.append(branch + _hide(hidden))
    if not branches:
        branches.append(empty_ticks_select([core.root for core in checked]))
    sql = f"CREATE OR REPLACE VIEW {name} AS\n" + "\nUNION ALL BY NAME\n".join(branches)
    return _View(sql, datasets, frozenset(uris))


def _verified_state(core: ArchiveCore, as_of: AsOf | None, narrow: Narrow | None) -> ArchiveState:
    """The state the view reads (now, or as of a version), narrowed, its files verified."""
    tiers = core.tiers
    if as_of is None:
        check_catalog_present(tiers)
        state = archive_state(core.root)
        number = None
    else:
        version = core.versions.resolve_as_of(as_of)  # the archive's version log, read only
        state, number = core.versions.state(version), version.version
    if narrow is not None:
        state = narrow(state)
    if number is None:
        verify_before_reading(tiers, state)
    else:
        verify_version(tiers, state, number)
    return state


_COMMON = "symbol, date, ts, price, quantity, side"
_YEAR_MONTH = "CAST(year(date) AS INTEGER) AS year, CAST(month(date) AS INTEGER) AS month"


def _no_keys_above(folder: Path) -> bool:
    """True when no folder of ``folder``'s path is named like ``key=value``. DuckDB reads Hive
    keys from the whole path, the first of a repeated key winning: such a folder above the
    partition folders would replace ``symbol``, ``date``, ``year`` ... with its value."""
    return "=" not in str(folder)


def _files_by_folder_keys(
    tiers: ArchiveTiers, catalog: Catalog, tier: str
) -> dict[tuple[bool, bool], list[str]]:
    """The tier's consolidated files by (monthly, hive): whether their folders name a month
    (``year=/month=``) or a year only (``year=``), and whether the folders above those are
    free of ``key=value`` names (:func:`_no_keys_above`; always, for an object store, whose
    keys are read from the tier root down); one scan cannot mix them. Files are local paths,
    or keys in the object store."""
    out: dict[tuple[bool, bool], list[str]] = {}
    for item in sorted(catalog.files.values(), key=lambda f: f.path):
        if item.tier == tier:
            path = tiers.resolve(item.path)
            if not exists(path):
                raise CatalogMismatchError(
                    f"{path}: the catalog lists it ({tier} {item.period}) but it is not on "
                    f"disk; restore it from a copy, or {repair_hint(tiers.root)}",
                    paths=[path],
                )
            monthly = "-" in item.period
            if isinstance(path, ObjectFile):
                out.setdefault((monthly, True), []).append(path.key)
            else:
                hive = _no_keys_above(path.parents[2 if monthly else 1])
                out.setdefault((monthly, hive), []).append(str(path))
    return out


def _object_dataset(store: ObjectTier, keys: list[str], *, monthly: bool) -> ds.Dataset:
    """An Arrow dataset of consolidated objects, ``year`` (and ``month``) read from their keys
    below the tier root (Hive style), so a filter on them skips objects unopened; filters on
    ``symbol`` and ``date`` skip row groups by their statistics."""
    keys_schema = [pa.field("year", pa.int32())]
    keys_schema += [pa.field("month", pa.int32())] if monthly else []
    return ds.dataset(
        keys,
        filesystem=store.filesystem,
        format="parquet",
        partitioning=ds.partitioning(pa.schema(keys_schema), flavor="hive"),
        partition_base_dir=store.base,
    )


def _dataset_branch(tier: str, table: str, *, monthly: bool) -> str:
    """One scan of a registered dataset of consolidated objects (see :func:`_object_dataset`)."""
    folders = "year, month" if monthly else "year, CAST(month(date) AS INTEGER) AS month"
    return f"SELECT {_COMMON}, '{tier}' AS tier, {folders} FROM {table}"


def _consolidated_branch(tier: str, files: list[str], *, monthly: bool, hive: bool) -> str:
    """One scan of consolidated files: ``year`` (and ``month``) from their folders, so a filter
    on them skips files unopened; a yearly file's ``month`` is computed from ``date``. Without
    ``hive`` (a ``key=value`` folder above theirs) both are computed and no file is skipped."""
    if not hive:
        folders, options = _YEAR_MONTH, "hive_partitioning = false"
    elif monthly:
        folders = "year, month"
        options = "hive_partitioning = true, hive_types = {'year': 'INTEGER', 'month': 'INTEGER'}"
    else:
        folders = "year, CAST(month(date) AS INTEGER) AS month"
        options = "hive_partitioning = true, hive_types = {'year': 'INTEGER'}"
    return (
        f"SELECT {_COMMON}, '{tier}' AS tier, {folders} "
        f"FROM read_parquet({_list(files)}, {options})"
    )


def open_ticks_view(
    con: duckdb.DuckDBPyConnection,
    archives: Archives,
    *,
    name: str = VIEW_NAME,
    as_of: AsOf | None = None,
    narrow: Narrow | None = None,
) -> duckdb.DuckDBPyConnection:
    """Create (or replace) the view ``name`` on ``con`` (the contract: ``Archive.open_view``)."""
    if not isinstance(con, duckdb.DuckDBPyConnection):  # checked before any file is verified
        raise ConfigError(f"con = {con!r}: expected a duckdb.DuckDBPyConnection")
    if narrow is not None and not callable(narrow):
        raise ConfigError(f"narrow = {narrow!r}: expected a function of the state, or None")
    view = _view(archives, name, as_of, narrow)
    for table, dataset in view.datasets.items():
        con.register(table, dataset)
    try:
        con.execute(view.sql)
    except duckdb.Error:
        _raise_if_damaged(archives)
        raise
    return con


@dataclass(frozen=True)
class QueryOptions:
    """How a query runs, fixed once and checked when built.

    ``parameters`` fill ``?`` placeholders (kept as a tuple); ``threads`` caps DuckDB's
    threads (None: DuckDB's default); ``unrestricted`` lifts the read-only checks
    (:func:`check_read_only`, :func:`restrict`); ``as_of`` reads the view as of a version
    (:func:`ticks_view_sql`). Where the tiers are is not an option: the archives' cores (their
    resolved tiers) are given beside the options.

    Raises
    ------
    ConfigError
        Naming the option: parameters that are not a list or tuple, threads that are not an
        integer >= 1, unrestricted that is not a bool, or
        as_of that is not a version number, a time or a tag.
    """

    parameters: Sequence[Any] = ()
    threads: int | None = None
    unrestricted: bool = False
    as_of: AsOf | None = None

    def __post_init__(self) -> None:
        parameters = () if self.parameters is None else self.parameters
        if not isinstance(parameters, list | tuple):
            raise ConfigError(f"parameters = {parameters!r}: expected a list of values")
        object.__setattr__(self, "parameters", tuple(parameters))
        threads = self.threads
        if threads is not None and (type(threads) is not int or threads < 1):
            raise ConfigError(f"threads = {threads!r}: expected an integer >= 1 (or unset)")
        checked_flag(self.unrestricted, "unrestricted")
        if isinstance(self.as_of, bool) or not isinstance(self.as_of, int | str | date | None):
            raise ConfigError(
                f"as_of = {self.as_of!r}: expected a version number, a time or a tag (or unset)"
            )


def run_query(sql: str, archives: Archives, options: QueryOptions | None = None) -> pa.Table:
    """Run ``sql`` over the view ``ticks`` of ``archives`` (the contract: ``Archive.query``)."""

    def answer(relation: duckdb.DuckDBPyRelation | None) -> pa.Table:
        return pa.table({}) if relation is None else relation.to_arrow_table()

    return _answered(sql, archives, options, answer)


def _raise_if_damaged(archives: Archives) -> None:
    """Raise DamagedFileError for the first file of the view whose footer does not decode
    (DuckDB's own message names neither the file nor the damage); return if none. Called
    when DuckDB fails other than on the SQL's syntax: it reads every footer once."""
    for core in _archives(archives):
        state = archive_state(core.root)
        paths = [hot.path for hot in state.hot_live]
        paths += [core.tiers.resolve(item.path) for item in state.catalog.files.values()]
        for path in paths:
            try:
                read_footer(path)  # raises DamagedFileError naming the file
            except OSError:
                continue  # gone meanwhile: DuckDB's own error stands


@dataclass(frozen=True)
class QueryText:
    """A query's result as DuckDB prints it: every value cast to VARCHAR inside DuckDB (no
    Python or Arrow type in between, so nanoseconds, decimals, HUGEINTs, intervals, lists,
    structs, maps and blobs keep every digit), None for NULL."""

    columns: list[str]
    types: list[str]
    """DuckDB's name of each column's type (``TIMESTAMP_NS``, ``DECIMAL(18,4)`` ...)."""
    rows: list[tuple[str | None, ...]]


def run_query_text(sql: str, archives: Archives, options: QueryOptions | None = None) -> QueryText:
    """Run ``sql`` like :func:`run_query` (read-only unless ``unrestricted``); return every
    value as DuckDB's own text.

    Columns are cast by position, so repeated or odd column names are fine. A statement
    without a result set (``unrestricted``) gives what DuckDB answers for it: no columns when
    it gives no relation, else its status (DuckDB 2 answers ``SET`` with one column
    ``Success`` and no rows, ``CREATE TABLE ... AS`` with ``Count``). Raises ConfigError naming
    the query when DuckDB rejects it.
    """

    def answer(relation: duckdb.DuckDBPyRelation | None) -> QueryText:
        if relation is None:
            return QueryText([], [], [])
        casts = ", ".join(f"CAST(#{i + 1} AS VARCHAR)" for i in range(len(relation.columns)))
        rows = relation.project(casts).fetchall() if casts else []
        return QueryText(list(relation.columns), [str(t) for t in relation.types], rows)

    return _answered(sql, archives, options, answer)


def run_query_json(sql: str, archives: Archives, options: QueryOptions | None = None) -> str:
    """Run ``sql`` like :func:`run_query` (read-only unless ``unrestricted``); return a JSON
    array of one object per row, each written by DuckDB's ``to_json`` (numbers stay exact,
    HUGEINTs included; timestamps, intervals and blobs are DuckDB's text; a repeated column
    name gets a ``_1`` suffix; a float that is not finite is the string ``"Infinity"``,
    ``"-Infinity"`` or ``"NaN"``, which JSON has no number for). Raises ConfigError naming the
    query when DuckDB rejects it."""

    def answer(relation: duckdb.DuckDBPyRelation | None) -> str:
        if relation is None:
            return "[]"
        name = "_skewtape_row"
        while name in relation.columns:  # the alias must not be a result column's name
            name += "_"
        rows = relation.query(name, f"SELECT to_json({name}) FROM {name}").fetchall()
        return "[" + ",\n".join(_strict_json(row[0]) for row in rows) + "]"

    return _answered(sql, archives, options, answer)


_NON_FINITE = re.compile(r'"(?:[^"\\]|\\.)*"|(-?Infinity|NaN)')
"""A JSON string (passed over), or a non-finite number DuckDB's ``to_json`` writes bare."""


def _strict_json(text: str) -> str:
    """``text`` (one row's JSON) with each bare ``Infinity``, ``-Infinity`` or ``NaN`` (no JSON
    number) written as a string; the text as it is when it has none (one search, linear)."""
    if "Infinity" not in text and "NaN" not in text:
        return text
    return _NON_FINITE.sub(lambda m: f'"{m.group(1)}"' if m.group(1) else m.group(), text)


_Answer = TypeVar("_Answer")


def _answered(
    sql: str,
    archives: Archives,
    options: QueryOptions | None,
    answer: Callable[[duckdb.DuckDBPyRelation | None], _Answer],
) -> _Answer:
    """``answer`` of the relation of ``sql`` (:func:`_query`), asked again on a fresh view while
    a file of the view changes under it (``trust.settled``)."""

    def once() -> _Answer:
        with _query(sql, archives, _options(options)) as (con, relation):
            return interruptible(con, lambda: answer(relation))

    return settled(once)


@contextmanager
def _query(
    sql: str, archives: Archives, options: QueryOptions
) -> Iterator[tuple[duckdb.DuckDBPyConnection, duckdb.DuckDBPyRelation | None]]:
    """The connection and the relation of ``sql`` (checked: :func:`check_read_only`) on a fresh
    connection with the view, closed afterwards; DuckDB's errors (while planning or fetching) become
    ConfigError naming the query, or DamagedFileError naming a file of the view whose footer
    does not decode. A file of the view that differs from its record or is missing, and one
    DuckDB cannot open, is ``trust.ChangedUnderRead`` (a writer may have just replaced or
    removed it: the callers look again, ``trust.settled``)."""
    check_read_only(sql, unrestricted=options.unrestricted)
    try:
        con = _connect(archives, options)
    except (DamagedFileError, CatalogMismatchError) as exc:
        raise ChangedUnderRead(exc) from None
    try:
        yield con, con.sql(sql, params=list(options.parameters) or None)
    except duckdb.IOException as exc:  # a file of the view gone or replaced under the query
        raise ChangedUnderRead(ConfigError(f"query {sql!r}: {exc}")) from None
    except duckdb.Error as exc:
        if not isinstance(exc, duckdb.ParserException):
            _raise_if_damaged(archives)
        raise ConfigError(f"query {sql!r}: {exc}") from None
    finally:
        con.close()


@dataclass(frozen=True)
class ScanStats:
    """What DuckDB read to answer one query (its EXPLAIN ANALYZE profile).

    ``files_scanned``/``files_total`` count the files each Parquet scan opened and was given
    (a Hive-partitioned scan skips files by their folder names without opening them; a scan
    without Hive partitioning opens every file it is given), ``row_groups_*`` the row groups
    after statistics pruning, summed over every scan; ``bytes_read`` is all bytes read from
    disk (footers included).
    """

    files_scanned: int
    files_total: int
    row_groups_scanned: int
    row_groups_total: int
    bytes_read: int
    rows: int


def scan_stats(
    sql: str, archives: Archives, *, parameters: Sequence[Any] | None = None
) -> ScanStats:
    """Run ``sql`` (one read-only statement: :func:`check_read_only`) under ``EXPLAIN ANALYZE``
    on one thread and report what it read."""
    check_read_only(sql)
    con = _connect(archives, QueryOptions(threads=1))
    try:
        (row,) = con.execute(f"EXPLAIN (ANALYZE, FORMAT json) {sql}", parameters or []).fetchall()
        profile = load_json(row[1], "EXPLAIN ANALYZE output", error=ConfigError)
        rows = len(con.execute(sql, parameters or []).fetchall())
    except duckdb.Error as exc:
        if not isinstance(exc, duckdb.ParserException):
            _raise_if_damaged(archives)
        raise ConfigError(f"query {sql!r}: {exc}") from None
    finally:
        con.close()
    scans = list(_parquet_scans(profile.get("operator", [])))
    files = [_files_read(s.get("extra_info", {})) for s in scans]
    return ScanStats(
        files_scanned=sum(f[0] for f in files),
        files_total=sum(f[1] for f in files),
        row_groups_scanned=sum(int(s.get("row_groups_scanned", 0)) for s in scans),
        row_groups_total=sum(int(s.get("total_row_groups_to_scan", 0)) for s in scans),
        bytes_read=int(profile.get("io", {}).get("total_bytes_read", 0)),
        rows=rows,
    )


def _parquet_scans(operators: list[dict[str, Any]]):
    for op in operators:
        if op.get("type") == "TABLE_SCAN" and "row_groups_scanned" in op:
            yield op
        yield from _parquet_scans(op.get("children", []))


def _files_read(extra_info: dict[str, Any]) -> tuple[int, int]:
    """(files opened, files given) of one scan: ``Scanning Files: "1/6"`` when DuckDB pruned
    by Hive partitions, else ``Total Files Read`` for both (nothing was skipped)."""
    pruned = extra_info.get("Scanning Files")
    if pruned and "/" in pruned:
        scanned, total = pruned.split("/", 1)
        return int(scanned), int(total)
    read = int(extra_info.get("Total Files Read", 0))
    return read, read


def _connect(archives: Archives, options: QueryOptions) -> duckdb.DuckDBPyConnection:
    """A fresh in-memory connection with the view (as of ``options.as_of`` when given), its
    time zone UTC (the archive's days are UTC days, and timestamps print the same on every
    machine), restricted to reading the archives' own files (:func:`restrict`) unless
    ``options.unrestricted``."""
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    con.execute(f"SET temp_directory = {_quote(_private_spill_folder())}")
    if options.threads is not None:
        con.execute(f"SET threads = {options.threads}")
    try:
        open_ticks_view(con, archives, as_of=options.as_of)
        checked = _archives(archives)
        roots = [core.root for core in checked]
        places = []
        if options.as_of is None:  # as of a version, a report names where its run put the day
            for index, core in enumerate(checked):
                places.append(f"_skewtape_places_{index}")
                con.register(places[-1], current_places(core))
        con.execute(reports_view_sql(roots, places=places or None))
        if not options.unrestricted:
            restrict(con, _allowed_folders(archives))
    except BaseException:
        con.close()
        raise
    return con


def _private_spill_folder() -> str:
    """A folder of this connection's own, not there yet, for what DuckDB spills to disk: DuckDB
    adds its ``temp_directory`` to the folders a restricted query may read, and its default
    (``.tmp`` under the current folder) would let a query read whatever a user keeps there.
    DuckDB creates it when it first spills and removes it when the connection closes."""
    return os.path.join(tempfile.gettempdir(), f"skewtape-query-{uuid.uuid4().hex}")


def current_places(core: ArchiveCore) -> pa.Table:
    """Where each symbol-day of the archive of ``core`` is now
    (:data:`reports_table.PLACES_SCHEMA`): a live hot file's path, or the consolidated file the
    catalog names; hidden copies left out."""
    root = core.root
    state = archive_state(root)
    rows = [(h.symbol, h.day, HOT, h.path.relative_to(root).as_posix()) for h in state.hot_live]
    rows += [
        (p.symbol, p.date, p.tier, p.file)
        for key, p in state.catalog.partitions.items()
        if key not in state.hidden
    ]
    columns = list(zip(*rows, strict=True)) if rows else [[], [], [], []]
    return pa.table([list(c) for c in columns], schema=PLACES_SCHEMA)


READ_ONLY_STATEMENTS = frozenset({duckdb.StatementType.SELECT})
"""What a query may be unless unrestricted: one ``SELECT`` (``WITH ...``, ``FROM ...``,
``DESCRIBE``, ``SHOW``, ``SUMMARIZE`` and ``VALUES`` are SELECTs to DuckDB)."""


def check_read_only(sql: str, *, unrestricted: bool = False) -> None:
    """Refuse, before anything is opened, SQL that is not exactly one read-only statement
    (:data:`READ_ONLY_STATEMENTS`): a second statement after ``;``, ``COPY ... TO``,
    ``ATTACH``, ``EXPORT``, ``INSTALL``/``LOAD``, ``SET``, ``CREATE``, ``INSERT`` ...;
    anything passes with ``unrestricted``.

    Raises ConfigError naming the query and what was found (a query that is not a str: so).
    """
    if not isinstance(sql, str):
        raise ConfigError(f"query = {quoted(sql)}: expected SQL text (a str)")
    if unrestricted:
        return
    try:
        statements = duckdb.extract_statements(sql)
    except (duckdb.Error, TypeError) as exc:  # TypeError: text that is not UTF-8
        raise ConfigError(f"query {sql!r}: {_not_sql(exc)}") from None
    if len(statements) != 1:
        raise ConfigError(
            f"query {sql!r}: {len(statements)} statements; expected exactly one SELECT "
            "(queries are read-only; --unrestricted runs any SQL)"
        )
    kind = statements[0].type
    if kind not in READ_ONLY_STATEMENTS:
        raise ConfigError(
            f"query {sql!r}: {_statement_named(statements[0].query, kind.name)}; expected a "
            "SELECT (queries are read-only; --unrestricted runs any SQL)"
        )


def _not_sql(exc: Exception) -> str:
    """Why DuckDB could not split the query: its parser's message, or, for text that is not
    UTF-8 (bytes the command line could not decode), that."""
    if isinstance(exc, TypeError):
        return "not valid UTF-8 text"
    return str(exc)


def _statement_named(text: str, kind: str) -> str:
    """The statement named as its text begins (``an INSTALL statement``: DuckDB types INSTALL
    and FORCE INSTALL as LOAD), else by DuckDB's type name ``kind``."""
    words = [word.upper() for word in text.split()[:2]]
    name = " ".join(words if words[:1] == ["FORCE"] else words[:1]) or kind
    name = name if name.replace(" ", "").isalpha() else kind
    return f"{'an' if name[0] in 'AEIOU' else 'a'} {name} statement"


def restrict(con: duckdb.DuckDBPyConnection, folders: Sequence[Path]) -> None:
    """Let ``con`` read files inside ``folders`` only, for the rest of its life: DuckDB's
    ``allowed_directories`` with ``enable_external_access = false`` (no other local file, no
    URL, no extension installed or loaded), then ``lock_configuration`` so no statement can
    undo it. Arrow datasets registered before (object-store tiers) stay readable. DuckDB adds
    its ``temp_directory`` to the folders: the connection's must be its own
    (:func:`_private_spill_folder`)."""
    listed = ", ".join(_quote(str(folder) + os.sep) for folder in folders)
    con.execute(f"SET allowed_directories = [{listed}]")
    con.execute("SET autoinstall_known_extensions = false")
    con.execute("SET autoload_known_extensions = false")
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")


def _allowed_folders(archives: Archives) -> list[Path]:
    """Each archive root and its local warm and cold roots (normalized absolute paths)."""
    folders = []
    for core in _archives(archives):
        folders.append(normalized(core.root))
        for tier in (WARM, COLD):
            store = core.tiers.stores[tier]
            if isinstance(store, LocalTier):
                folders.append(store.folder)
    return folders


def _options(options: QueryOptions | None) -> QueryOptions:
    """``options`` (None: the defaults); ConfigError for anything but a QueryOptions."""
    if options is None:
        return QueryOptions()
    if not isinstance(options, QueryOptions):
        raise ConfigError(f"options = {options!r}: expected a QueryOptions or None")
    return options


def _archives(archives: Archives) -> list[ArchiveCore]:
    """``archives`` as a list, each checked: an ``ArchiveCore`` whose root is an archive root
    (``layout.check_archive_root``: an empty folder is refused) below no
    ``symbol=``/``date=`` folder, each archive once (by its resolved root). ConfigError naming
    the item otherwise (a bare path included: its core is ``Archive(root).core``)."""
    if isinstance(archives, ArchiveCore | str | Path):
        items = [archives]
    elif isinstance(archives, Iterable):
        items = list(archives)
    else:
        raise ConfigError(f"archives = {archives!r}: expected an archive's core or a list of them")
    if not items:
        raise ConfigError("archives: expected at least one archive's core")
    seen: dict[Path, Path] = {}
    for item in items:
        if not isinstance(item, ArchiveCore):
            raise ConfigError(
                f"{item}: expected an archive's core (Archive(root).core), not a "
                f"{type(item).__name__}"
            )
        check_archive_root(item.root)
        _check_no_partition_keys_above(item)
        folder = item.root.resolve()
        if folder in seen:
            same = seen[folder]
            raise ConfigError(
                f"{item.root}: the same archive as {same}, given twice; its ticks would be "
                "counted twice (give each archive once)"
            )
        seen[folder] = item.root
    return items


def _check_no_partition_keys_above(core: ArchiveCore) -> None:
    """Refuse an archive (of ``core``) whose root lies below a folder named ``symbol=...`` or
    ``date=...``: DuckDB reads Hive keys from the whole path, the first of a repeated key
    winning, so every hot tick would get that folder's value (the hot files hold ``symbol`` and
    ``date`` only in their folder names)."""
    root = core.root
    for part in normalized(root).parts:
        key = part.partition("=")[0]
        if "=" in part and key in ("symbol", "date"):
            raise ConfigError(
                f"{root}: the folder {part!r} above the archive would be read as its "
                f"{key} column; move the archive out of it (or rename that folder)"
            )


def _list(paths: Sequence[str]) -> str:
    return "[" + ", ".join(_quote(p) for p in paths) + "]"


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _hide(keys: Sequence[tuple[str, Any]]) -> str:
    """An anti-join leaving out catalogued symbol-days whose consolidated copy is hidden
    (overridden by a newer hot file, or withdrawn); empty when there are none."""
    if not keys:
        return ""
    rows = ", ".join(f"({_quote(symbol)}, DATE '{day.isoformat()}')" for symbol, day in keys)
    return f" ANTI JOIN (VALUES {rows}) AS hidden(symbol, date) USING (symbol, date)"
