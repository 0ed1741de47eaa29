"""One symbol-day of a tick archive, told whole: where it is now, its report, its history.

:func:`show_symbol_day` reads (never writes) three things: the archive's placement (the
catalog and the hot files: the tier, the file and, in a consolidated file, the row range the
``ticks`` view reads), its report (the reports table's row of the symbol-day,
``reports_table``, else the main numbers its latest audited compaction recorded, as a day
compacted by ``compact-ticks`` has; its tier and path replaced by where the day is now, the
report's own kept as ``reported_tier`` and ``reported_path``) and the audit log's records
about it, in order:

- ``written``: its first compaction (``tick-archive-write``: its time and the report's main
  numbers; with the batch of the venue-day run that archived it when the reports table has a
  row for it, the only ``written`` of a symbol-day written before writes were audited);
- ``recompacted``: compacted again (``tick-archive-recompact``: the hot file or consolidated
  copy it replaced);
- ``moved`` / ``rewritten``: re-tiering wrote it into a consolidated file of another tier / of
  the same tier (``tick-archive-rewrite`` records whose sources hold it);
- ``hot-file-removed``: its hot file removed once superseded (``tick-archive-remove``);
- ``withdrawn`` and ``purged``: corrected away (``tick-archive-withdraw``), then taken out of
  its consolidated file by re-tiering.

Without an audit log (None, or one not written yet) the history holds only the report's
``written``. A record is this archive's when the archive it names is the same folder however it
is spelled (``..``, a symbolic link); and, when the audit log sits beside the archive (where
the writers put it by default, so it moves or is copied with it), when it names a folder of the
archive's name: the archive where it was written before it moved (:class:`_ThisArchive`). The
contract is the front door's (``Archive.show``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any

from skewtape_pipeline.audit import AUDIT_LOG_NAME, is_repair, parse_record
from skewtape_pipeline.errors import AuditLogError, ConfigError, printable
from skewtape_pipeline.ticks.archive.store.books import (
    EVENT_RECOMPACT,
    EVENT_REMOVE,
    EVENT_REWRITE,
    EVENT_WITHDRAW,
    EVENT_WRITE,
    default_audit_log,
)
from skewtape_pipeline.ticks.archive.store.catalog import Catalog
from skewtape_pipeline.ticks.archive.store.layout import partition_file
from skewtape_pipeline.ticks.archive.store.placement import archive_state, locate
from skewtape_pipeline.ticks.archive.store.policy import HOT
from skewtape_pipeline.ticks.archive.store.reports_table import symbol_day_report
from skewtape_pipeline.ticks.archive.store.tiers import ArchiveTiers
from skewtape_pipeline.ticks.encode.parquet_file import read_file_facts
from skewtape_pipeline.ticks.encode.report import TickStorageCompactionReport, compression_ratio

if TYPE_CHECKING:
    from skewtape_pipeline.ticks.archive.core import ArchiveCore


@dataclass(frozen=True)
class Place:
    """Where a symbol-day's rows are now: tier, file (a hot file's path relative to the archive
    root; a consolidated file's catalog path, ``<TIER>/<path inside the tier root>``) and, in a
    consolidated file, rows ``first_row`` .. ``first_row + rows - 1`` (0-based, in file order)."""

    tier: str
    file: str
    rows: int
    bytes: int
    first_row: int | None = None


@dataclass(frozen=True)
class SymbolDayStory:
    """What :func:`show_symbol_day` found (``place`` None: not in the view)."""

    archive_root: Path
    symbol: str
    date: date
    place: Place | None
    withdrawn: bool
    report: dict[str, Any] | None
    history: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "archive_root": str(self.archive_root),
            "symbol": self.symbol,
            "date": self.date.isoformat(),
            "place": None if self.place is None else vars(self.place),
            "withdrawn": self.withdrawn,
            "report": self.report,
            "history": self.history,
        }

    def describe(self) -> list[str]:
        """Lines for a terminal: the place, the report's main numbers, the history; a control
        character of the symbol (a newline too) is written as its escape (``\\x1b``), never
        obeyed by the terminal."""
        symbol = printable(self.symbol).replace("\n", "\\x0a")
        head = f"{symbol} {self.date.isoformat()} in {self.archive_root}"
        lines = [head + ": " + _describe_place(self.place, self.withdrawn)]
        if self.report is None:
            lines.append("report: none (neither the reports table nor the audit log has one)")
        else:
            r = self.report
            batch = f"batch {r['batch']}" if r.get("batch") else "from the audit log"
            lines.append(
                f"report: {r['status']}, {r['tick_count']} ticks, {r['compacted_size_bytes']} "
                f"bytes ({_ratio(r['compression_ratio'])}), {batch}"
            )
        lines.append("history:" if self.history else "history: none in the audit log")
        for item in self.history:
            when = item.get("time") or "-"
            details = _item_words(item)
            lines.append(f"  {when}  {item['event']}" + (f": {details}" if details else ""))
        return lines


def _item_words(item: dict[str, Any]) -> str:
    """A history item's details in words: counts, tiers and files, never a Python repr."""
    parts = []
    for key, value in item.items():
        if key in ("time", "event") or value in (None, [], {}):
            continue
        if key == "report":
            ratio = _ratio(value["compression_ratio"])
            parts.append(f"{value['tick_count']} ticks, {value['compacted_size_bytes']} bytes "
                         f"({ratio}, codec of {value['tier']})")  # fmt: skip
        elif key == "replaced":
            parts.append("replaced " + "; ".join(_copy_words(copy) for copy in _listed(value)))
        elif key == "rows" and not item.get("report"):
            parts.append(f"{value} ticks")
        elif key in _WORDS:
            parts.append(_WORDS[key].format(", ".join(str(v) for v in _listed(value))))
    return " ".join(parts) if item["event"] in ("moved", "rewritten") else ", ".join(parts)


_WORDS = {"from": "from {}", "to": "to {}", "file": "into {}", "reason": "{}",
          "batch": "batch {}", "status": "{}"}  # fmt: skip
"""How a history item's other details read."""


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _copy_words(copy: Any) -> str:
    """A replaced copy in words: a hot file (bytes, sha256) or a consolidated copy (tier, rows)."""
    if not isinstance(copy, dict):
        return str(copy)
    if "sha256" in copy:
        return f"its hot file ({copy.get('bytes')} bytes, sha256 {str(copy['sha256'])[:16]})"
    return f"its {copy.get('tier')} copy in {copy.get('file')} ({copy.get('rows')} ticks)"


def _describe_place(place: Place | None, withdrawn: bool) -> str:
    if place is None:
        return "withdrawn (not in the view)" if withdrawn else "not in the view"
    where = f"{place.tier}, {place.file}"
    if place.first_row is not None:
        where += f" rows {place.first_row}..{place.first_row + place.rows - 1}"
    return f"{where} ({place.rows} ticks, {place.bytes} bytes)"


def _ratio(value: float | None) -> str:
    return "no ratio" if value is None else f"{value:.2f}x"


def show_symbol_day(core: ArchiveCore, symbol: str, day: date) -> SymbolDayStory:
    """Where a symbol-day is now, its report and its history (``Archive.show``; the history
    from the core's audit log, ``core.audit_log``)."""
    root, tiers = core.root, core.tiers
    catalog = archive_state(root).catalog
    location = locate(tiers, symbol, day)
    place = None
    if location is not None:
        place = _place(tiers, catalog, symbol, day, location)
    report = _report(tiers, symbol, day, place)
    history = _history(core, symbol, day, report)
    if report is None:
        report = _audited_report(history, place)
    withdrawn = (symbol, day) in catalog.withdrawn
    if place is None and report is None and not history and not withdrawn:
        raise ConfigError(
            f"{symbol} {day.isoformat()}: not in the archive {root} (no file, no catalog "
            "entry, no report, no audit record); check the symbol and the date"
        )
    return SymbolDayStory(root, symbol, day, place, withdrawn, report, history)


def _place(tiers: ArchiveTiers, catalog: Catalog, symbol: str, day: date, location: Any) -> Place:
    """Where ``location`` (the symbol-day's, in the archive of ``tiers``) is: a hot file by its
    path below the archive root, a consolidated file by its catalog entry."""
    if not location.consolidated:
        rel = Path(location.path).relative_to(tiers.root).as_posix()
        return Place(HOT, rel, location.rows, location.bytes)
    entry = catalog.partitions[(symbol, day)]
    first = sum(
        p.rows for p in catalog.partitions.values() if p.file == entry.file and p.key < entry.key
    )
    return Place(entry.tier, entry.file, entry.rows, entry.byte_share, first)


def _report(
    tiers: ArchiveTiers, symbol: str, day: date, place: Place | None
) -> dict[str, Any] | None:
    """The reports table's row of the symbol-day (in the archive of ``tiers``), its tier and
    path where the day is now."""
    row = symbol_day_report(tiers.root, symbol, day)
    if row is None:
        return None
    row["date"] = row["date"].isoformat()
    row["reported_tier"], row["reported_path"] = row["tier"], row["path"]
    row["tier"] = None if place is None else place.tier
    row["path"] = None if place is None else place.file
    return row


def _audited_report(history: list[dict[str, Any]], place: Place | None) -> dict[str, Any] | None:
    """The report the latest audited compaction of the symbol-day recorded, where it is now
    (None: no audited compaction carries one)."""
    audited = [item["report"] for item in history if item.get("report")]
    if not audited:
        return None
    return {
        **audited[-1],
        "status": "archived",
        "batch": None,
        "reported_tier": audited[-1]["tier"],
        "tier": None if place is None else place.tier,
        "path": None if place is None else place.file,
    }


def _history(
    core: ArchiveCore, symbol: str, day: date, report: dict[str, Any] | None
) -> list[dict[str, Any]]:
    """The records of the core's audit log about the symbol-day (of the core's archive, however
    its root is spelled or wherever it moved: :class:`_ThisArchive`), followed through the files
    it lived in, its last write carrying the report's status and, when that run wrote it, its
    batch (no log, or a day written before writes were audited: the report's ``written``
    alone, without a time)."""
    root, log = core.root, core.audit_log
    hot = partition_file(root, symbol, day).relative_to(root).as_posix()
    follower = _Follower(_ThisArchive.of(core), symbol, day.isoformat(), hot)
    history: list[dict[str, Any]] = []
    for record in _records(Path(log)) if log is not None else []:
        item = follower.see(record)
        if item is not None:
            history.append({"time": record.get("time"), **item})
    if report is None:
        return history
    reported = {"batch": report["batch"], "status": report["status"]}
    if report.get("unchanged"):  # that run found the day as held and wrote nothing
        reported["batch"] = None
    writes = [item for item in history if item["event"] in ("written", "recompacted")]
    if writes:
        writes[-1].update(reported)  # the report is the last run's: the last write, if it wrote
        return history
    return [{"event": "written", **reported}, *history]


def _records(log: Path) -> list[dict[str, Any]]:
    """The records of the audit log ``log`` (none when it does not exist yet), each line read
    as the log's appender reads it (``audit.parse_record``). A line that is not a record is
    skipped only where a crash leaves one (``audit``'s crash policy): the last line, or a torn
    line the next append covered with a ``repair`` record (``audit.is_repair``) right after it.
    AuditLogError naming the log and the line for any other."""
    if not log.is_file():
        return []
    records = [parse_record(line) for line in log.read_bytes().splitlines()]
    for number, record in enumerate(records, start=1):
        if number == len(records) or record is not None:
            continue  # a record, or the last line (a crash's torn tail)
        following = records[number]
        if following is None or not is_repair(following):
            raise AuditLogError(
                f"{log}: line {number}: not a JSON record, and not a line cut short by a crash "
                "(neither the last line nor followed by a repair record)"
            )
    return [record for record in records if record is not None]


def _name(path: Path) -> str:
    """The last part of ``path`` once ``.`` and ``..`` are folded away (no file read)."""
    return Path(os.path.normpath(path)).name


@dataclass
class _ThisArchive:
    """Which archive paths the audit log's records name are this archive's (the core's root).

    The writers record the archive as they were given it, made absolute (never resolved), so a
    record is this archive's when the path it names resolves to the same folder as ``root``
    (another spelling: ``..``, a symbolic link). When the audit log sits beside the archive
    (``books.default_audit_log``, or beside the root as spelled: a link), it is taken to
    have moved or been copied with the archive, the archives it was written for beside it then
    (as the default log is): a record naming a folder of the archive's name is this archive's,
    wherever that folder was (its location before the archive moved, or the original of a
    copy); a record an archive elsewhere with that name wrote to this log is taken for it too.
    An archive renamed beside its log is not followed back to its old name (a sibling may hold
    that name now).
    """

    folder: Path
    names: frozenset[str]
    seen: dict[str, bool] = field(default_factory=dict)

    @classmethod
    def of(cls, core: ArchiveCore) -> _ThisArchive:
        """The matcher of the core's archive and audit log."""
        root, log = core.root, core.audit_log
        folder = root.resolve()
        # the default log, and the log beside the root as spelled (a link's older default)
        beside = {default_audit_log(root), (root.absolute().parent / AUDIT_LOG_NAME).resolve()}
        names = {_name(root.absolute()), folder.name}
        mine = log is not None and Path(log).resolve() in beside
        return cls(folder, frozenset(names if mine else ()))

    def __call__(self, archive: Any) -> bool:
        """Whether the path ``archive`` (a record's ``archive`` field) is this archive."""
        if not isinstance(archive, str):
            return False
        if archive not in self.seen:
            path = Path(archive)
            self.seen[archive] = _name(path) in self.names or path.resolve() == self.folder
        return self.seen[archive]


@dataclass
class _Follower:
    """Follows one symbol-day through the audit log: the files that hold it now (``places``:
    its hot file, then the consolidated files re-tiering wrote it into) and its tier; records
    about another archive (``mine`` False for their ``archive``) are passed over."""

    mine: _ThisArchive
    symbol: str
    date: str
    hot: str
    places: set[str] = field(default_factory=set)
    tier: str = HOT
    copy_tier: str | None = None
    withdrawn: bool = False

    def __post_init__(self) -> None:
        self.places = {self.hot}

    def see(self, record: dict[str, Any]) -> dict[str, Any] | None:
        """The history item ``record`` makes, or None when it is not about this symbol-day."""
        if not self.mine(record.get("archive")):
            return None
        event = record.get("event")
        mine = (record.get("symbol"), record.get("date")) == (self.symbol, self.date)
        if event == EVENT_WRITE and mine:
            self.places, self.tier, self.withdrawn = self.places | {self.hot}, HOT, False
            return {"event": "written", "rows": record.get("rows"), "report": record.get("report")}
        if event == EVENT_RECOMPACT and mine:
            if self.tier != HOT:
                self.copy_tier = self.tier  # the consolidated copy, if its ticks come back
            self.places, self.tier, self.withdrawn = self.places | {self.hot}, HOT, False
            replaced = record.get("replaces") or record.get("supersedes") or None
            return {"event": "recompacted", "rows": record.get("rows"), "replaced": replaced,
                    "report": record.get("report")}  # fmt: skip
        if event == EVENT_REWRITE:
            return self._rewrite(record)
        if event == EVENT_REMOVE and record.get("file") == self.hot:
            if self.tier == HOT and self.copy_tier is not None:
                self.tier = self.copy_tier  # the same ticks: the consolidated copy serves
            return {"event": "hot-file-removed", "reason": record.get("reason")}
        if event == EVENT_WITHDRAW and [self.symbol, self.date] in record.get("symbol_days", []):
            self.withdrawn = True
            return {"event": "withdrawn", "reason": record.get("reason")}
        return None

    def _rewrite(self, record: dict[str, Any]) -> dict[str, Any] | None:
        sources = {s.get("file") for s in record.get("sources", []) if isinstance(s, dict)}
        if not sources & self.places:
            return None
        if self.withdrawn:
            self.places = set()
            return {"event": "purged", "from": sorted(sources & set(record.get("replaces", [])))}
        kind = "moved" if record.get("tier") != self.tier else "rewritten"
        item = {"event": kind, "from": self.tier, "to": record.get("tier"), "file": record["file"]}
        self.places, self.tier = {record["file"]}, record.get("tier", self.tier)
        self.copy_tier = None
        return item


def relocated_report(
    report: TickStorageCompactionReport, core: ArchiveCore
) -> TickStorageCompactionReport:
    """``report`` updated to where its symbol-day's rows live now.

    ``path`` and ``tier`` name the file and tier holding the rows; for a consolidated file,
    ``compacted_size_bytes`` is the symbol-day's byte share (see ``CatalogPartition``) and the
    ratio is recomputed from it; codec, level and encodings are read from that file's footer.
    A note says where the rows went. The report is returned unchanged when they are still in
    the file it names.

    Raises ConfigError when the archive holds no rows for the report's symbol-day.
    """
    if report.date is None:
        raise ConfigError(f"report of {report.symbol}: has no date; expected a symbol-day report")
    day = date.fromisoformat(report.date)
    location = locate(core.tiers, report.symbol, day)
    if location is None:
        raise ConfigError(
            f"{report.symbol} {report.date}: the archive at {core.root} holds no rows for it"
        )
    if not location.consolidated:
        return report
    facts = read_file_facts(location.path)
    ratio = compression_ratio(report.raw_size_bytes, location.bytes)
    note = (
        f"rows moved to the {location.tier} consolidated file {location.path}; "
        f"compacted_size_bytes is this symbol-day's share of it ({location.bytes} of "
        f"{facts.size_bytes} bytes: row groups split by rows, footer spread by rows)"
    )
    return replace(
        report,
        tier=location.tier,
        path=str(location.path),
        compacted_size_bytes=location.bytes,
        compression_ratio=ratio,
        meets_compression_target=ratio >= report.target_compression_ratio,
        codec=facts.codec,
        compression_level=facts.compression_level,
        encodings=facts.encodings,
        notes=[*report.notes, note],
    )
