"""The tick archive's commands: compact-ticks, archive-month, retier, remove-days, verify-archive,
rebuild-catalog, show, query, versions, tag, prune-versions (each a thin call of the core's
``Archive``, its result described).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import date
from pathlib import Path
from typing import Any

from skewtape_pipeline import progress
from skewtape_pipeline.cli.output import (
    data_root,
    error_line,
    print_result,
    showing_progress,
)
from skewtape_pipeline.errors import ConfigError, printable
from skewtape_pipeline.mirror.format import checked_month


def parse_side_map(text: str | None) -> dict[str, str] | None:
    """``yes=BUY,no=SELL`` -> {"yes": "BUY", "no": "SELL"}. A raw value given twice to the same
    side is taken once. ConfigError on a malformed pair, or a raw value given to two sides
    (naming it and both: no entry silently wins)."""
    if not text:
        return None
    mapping: dict[str, str] = {}
    for pair in text.split(","):
        raw, sep, side = pair.partition("=")
        if not sep or not raw or side not in ("BUY", "SELL", "UNKNOWN"):
            raise ConfigError(
                f"--side-map entry {pair!r}: expected RAW=BUY, RAW=SELL or RAW=UNKNOWN"
            )
        if mapping.setdefault(raw, side) != side:
            raise ConfigError(
                f"--side-map maps {raw!r} to both {mapping[raw]} and {side}; map each raw "
                "value to one side"
            )
    return mapping


def _parse_day(text: str, *, option: str = "--as-of") -> date:
    """``text`` as a date when it is one written ``YYYY-MM-DD`` (not ``20270101``, which
    Python's ``date.fromisoformat`` also takes); ConfigError naming ``option`` otherwise."""
    try:
        if not _DAY_TEXT.fullmatch(text):
            raise ValueError(text)
        return date.fromisoformat(text)
    except ValueError:
        raise ConfigError(f"{option} is {text!r}; expected a date YYYY-MM-DD") from None


_DAY_TEXT = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


def _read_ticks(args: argparse.Namespace, side_map: dict[str, str] | None) -> Any:
    """The input file as a stream of chunks, read by the reader of ``--input-format`` (default:
    detected from the file) in chunks sized for ``--memory-limit``."""
    from skewtape_pipeline.ticks.archive.ops.compact_plan import block_bytes_for
    from skewtape_pipeline.ticks.input_formats import InputOptions, open_input

    limit = parse_bytes(args.memory_limit)
    options = InputOptions(
        side_map=side_map,
        symbol=args.symbol,
        session_date=_session_date(args.session_date),
        block_bytes=block_bytes_for(limit),
        memory_limit=limit,
    )
    return open_input(Path(args.input), args.input_format, options)


BYTE_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def parse_bytes(text: str) -> int:
    """``2G``, ``512M``, ``64MiB``, ``1.5G`` or a plain number of bytes, as bytes (binary
    units). Raises ConfigError naming the value unless it is a finite number of bytes above 0."""
    raw = text.strip().upper().removesuffix("IB").removesuffix("B")
    unit = raw[-1:] if raw[-1:] in BYTE_UNITS else ""
    number = raw[: len(raw) - len(unit)]
    try:
        value = float(number) * BYTE_UNITS[unit]
        if not 0 < value < math.inf:  # nan, inf, 1e999G, 0 and negatives
            raise ValueError(text)
    except ValueError:
        raise ConfigError(
            f"--memory-limit {text!r}: expected bytes, more than 0, e.g. 2G, 512M or 1073741824"
        ) from None
    return int(value)


def _session_date(text: str | None) -> date | None:
    return None if text is None else _parse_day(text, option="--session-date")


def _archive(args: argparse.Namespace, root: Path | str) -> Any:
    """The one ``Archive`` of an archive command, built from its options: ``--tier-policy``
    (default: the policy the archive records), ``--audit-log`` (default: audit.jsonl beside
    the archive) and ``--wait``; Arrow allocates from jemalloc from here on
    (:func:`~skewtape_pipeline.arrow_memory.use_lean_pool`)."""
    from skewtape_pipeline.arrow_memory import use_lean_pool
    from skewtape_pipeline.ticks.archive.handle import Archive
    from skewtape_pipeline.ticks.archive.store.policy import TierPolicy

    use_lean_pool()  # before the command allocates: see its notes
    audit_log = getattr(args, "audit_log", None)
    options: dict[str, Any] = {"lock_timeout": getattr(args, "wait", 0.0)}
    if audit_log:
        options["audit_log"] = Path(audit_log)
    policy_file = getattr(args, "tier_policy", None)
    policy = TierPolicy.load(Path(policy_file)) if policy_file else None
    return Archive(root, policy=policy, **options)


def cmd_compact_ticks(args: argparse.Namespace) -> None:
    from skewtape_pipeline.ticks.archive.ops.compact_plan import CompactionRun
    from skewtape_pipeline.ticks.archive.store.layout import recorded_schema
    from skewtape_pipeline.ticks.encode.model import SchemaRequest
    from skewtape_pipeline.ticks.encode.options import TickEncoding
    from skewtape_pipeline.ticks.input_formats import input_schema_request

    side_map = parse_side_map(args.side_map)
    archive = _archive(args, _archive_out(args.out))
    source = _read_ticks(args, side_map)
    line = progress.ProgressLine(
        sys.stderr, "symbol-days", label=args.command, enabled=not args.json
    )
    reading = ReadingRate(
        progress.ProgressLine(sys.stderr, "bytes", label=args.command, enabled=not args.json)
    )
    schema = input_schema_request(
        Path(args.input),
        args.input_format,
        SchemaRequest(args.timestamp_unit, args.price_scale, args.quantity_scale),
        archive_has_schema=recorded_schema(archive.root) is not None,
    )
    encoding = TickEncoding(
        schema, side_map=side_map, allow_precision_loss=args.allow_precision_loss
    )
    run = CompactionRun(
        symbol=args.symbol,
        memory_limit=parse_bytes(args.memory_limit),
        on_progress=line.update,
        on_read=reading.update,
    )
    try:
        with progress.reporting(line.update):  # a wait for the archive's lock
            reports = archive.compact(
                source, as_of=_parse_day(args.as_of), encoding=encoding, run=run
            )
    finally:  # an error after a bar starts on a line of its own
        reading.line.finish()
        line.finish()
    if args.json:
        for report in reports:
            print(json.dumps(report.to_dict(), default=str))
        return
    retier = f"skewtape-pipeline retier {args.out} --as-of {args.as_of}"
    if args.tier_policy:
        retier += f" --tier-policy {args.tier_policy}"
    print("\n".join(compaction_summary(reports, Path(args.out), retier_command=retier)))


def _archive_out(out: str) -> Path:
    """``compact-ticks --out``: an archive root, an empty folder (or one holding only the empty
    staging folder a refused run left), or a folder not there yet (the first compaction makes
    it, and the folders above it, an archive).
    NotAnArchiveError, creating nothing, for any other folder: a warm or cold tier folder, the
    mirror's ``history/``, a folder of other files; and (when the ``Archive`` is built:
    ``tiers.check_apart_from_other_archives``) for an empty or new one inside another archive's
    root or tier root."""
    from skewtape_pipeline.ticks.archive.store.layout import check_archive_root, holds_nothing

    path = Path(out)
    if not path.exists() or (path.is_dir() and holds_nothing(path)):
        return path
    return check_archive_root(path)


def cmd_archive_month(args: argparse.Namespace) -> None:
    import uuid

    from skewtape_pipeline.ticks.fills.month_archive import archive_month
    from skewtape_pipeline.ticks.fills.snapshot_fills import today_utc
    from skewtape_pipeline.ticks.fills.venue_days import VenueDayOptions

    root = data_root(args)
    archive = _archive(args, root / "archive")  # audit.jsonl in the data root, as the asset's
    as_of = _parse_day(args.as_of) if args.as_of else today_utc()
    options = VenueDayOptions(
        archive=archive,
        as_of=as_of,
        batch=f"archive-month-{uuid.uuid4().hex[:12]}",
        memory_limit=parse_bytes(args.memory_limit),
    )
    line = progress.ProgressLine(sys.stderr, "venue-days", label=args.command,
                                 enabled=not args.json)  # fmt: skip
    try:
        with archive.writing(), progress.reporting(line.update):  # a wait for the lock too
            month = checked_month(args.month, f"MONTH {args.month!r}")
            result = archive_month(root / "history", month, options, on_progress=line.update)
    finally:  # an error after a bar starts on a line of its own
        line.finish()
    print_result(args, result, describe_month(result, root / "archive"))


def describe_month(result: Any, archive: Path) -> str:
    """``archive-month``'s summary: the venue-days and what became of their symbol-days."""
    n = result.counts()
    return (
        f"{archive}: {result.month}: {n['venue_days']} venue-days; {n['symbol_days_archived']} "
        f"symbol-days archived ({n['ticks']} ticks), {n['symbol_days_skipped']} skipped (no "
        f"trades), {n['symbol_days_removed']} removed; {n['corrected_symbol_days']} symbol-days "
        f"of earlier months archived again for corrections; {n['symbol_days_changed']} "
        "symbol-days changed"
    )


SUMMARY_ROWS = 10
"""Symbol-days listed by ``compact-ticks``' summary; the rest are counted, not listed."""


def compaction_summary(
    reports: Sequence[Any],
    out: Path,
    *,
    rows: int = SUMMARY_ROWS,
    retier_command: str | None = None,
) -> list[str]:
    """``compact-ticks``' default output: a totals line, a line counting the float noise
    rounded away and the precision lost (when any), then a table of the first ``rows``
    symbol-days (ticks, raw and archived bytes, ratio, the codec written with and the tier whose
    settings the day's age chose: every day is written hot, and moves only when re-tiered),
    then how many were left out,
    what recompacted symbol-days replaced, and, when some symbol-days are old enough for a
    colder tier, ``retier_command`` (they stay hot until it runs)."""
    raw = sum(report.raw_size_bytes for report in reports)
    packed = sum(report.compacted_size_bytes for report in reports)
    ticks = sum(report.tick_count for report in reports)
    lines = [
        f"compacted {ticks} ticks in {len(reports)} symbol-days into {out}: "
        f"{raw} -> {packed} bytes ({raw / packed if packed else 0.0:.2f}x)"
    ]
    lines.append(_changed_line(reports))
    noise = sum(report.float_noise_normalized for report in reports)
    loss = sum(report.precision_loss_ticks for report in reports)
    if noise or loss:
        lines.append(
            f"float_noise_normalized: {noise} value(s) stored rounded to the scale (float "
            f"representation noise, not loss); precision_loss_ticks: {loss}"
        )
    table = [("symbol", "date", "ticks", "raw bytes", "bytes", "ratio", "written with")]
    table += [
        (printable(r.symbol), r.date, str(r.tick_count), str(r.raw_size_bytes),
         str(r.compacted_size_bytes), f"{r.compression_ratio:.2f}x", _written_with(r))
        for r in reports[:rows]
    ]  # fmt: skip
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    lines += ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
              for row in table]  # fmt: skip
    if len(reports) > rows:
        lines.append(
            f"({len(reports) - rows} more symbol-days not shown; --json prints every report)"
        )
    return lines + _recompacted_lines(reports) + _retier_hint(reports, retier_command)


def _written_with(report: Any) -> str:
    """The codec and level the symbol-day's file was written with, as its footer records them,
    and the tier they are the settings of: ``ZSTD-9 (warm)``."""
    level = "" if report.compression_level is None else f"-{report.compression_level}"
    return f"{report.codec}{level} ({report.tier.lower()})"


def _changed_line(reports: Sequence[Any]) -> str:
    """How many symbol-days the compaction changed, and how many the archive already held with
    the same ticks (nothing written for them)."""
    from skewtape_pipeline.ticks.archive.ops.compact import is_unchanged

    held = sum(is_unchanged(report) for report in reports)
    return (
        f"{len(reports) - held} symbol-days changed; {held} already held with the same ticks "
        "(nothing written for them)"
    )


def _recompacted_lines(reports: Sequence[Any]) -> list[str]:
    """What the symbol-days the archive already held were compacted over (the first few,
    those now holding fewer ticks first, with a line saying why that happens)."""
    from skewtape_pipeline.ticks.archive.ops.compact import FEWER_TICKS, RECOMPACTED

    again = [(r, n) for r in reports for n in r.notes if n.startswith(RECOMPACTED)]
    if not again:
        return []
    again.sort(key=lambda pair: FEWER_TICKS not in pair[1])  # stable: input order otherwise
    lines = [f"recompacted {len(again)} symbol-days the archive already held (audited):"]
    fewer = sum(FEWER_TICKS in note for _, note in again)
    if fewer:
        lines.append(
            f"  {fewer} of them now hold fewer ticks than before: each symbol-day of the input "
            "replaces all the archive held of it (an input holding part of a day replaces the "
            "whole day); `versions` lists the versions, `query --as-of` reads the one before"
        )
    lines += [f"  {printable(r.symbol)} {r.date}: {note.removeprefix(RECOMPACTED)}"
              for r, note in again[:3]]  # fmt: skip
    if len(again) > 3:
        lines.append(f"  ({len(again) - 3} more; --json prints every report's notes)")
    return lines


def _retier_hint(reports: Sequence[Any], retier_command: str | None) -> list[str]:
    """The line saying how many symbol-days in hot files are old enough for a colder tier (none
    for those held unchanged in their consolidated copies)."""
    from skewtape_pipeline.ticks.archive.ops.compact import held_in_its_tier
    from skewtape_pipeline.ticks.archive.store.policy import HOT

    older = Counter(r.tier for r in reports if r.tier != HOT and not held_in_its_tier(r))
    if not older or retier_command is None:
        return []
    counts = ", ".join(f"{n} {tier}" for tier, n in sorted(older.items()))
    return [
        f"{sum(older.values())} symbol-days are old enough for a colder tier ({counts}) and stay "
        f"hot until re-tiering: {retier_command}"
    ]


class ReadingRate:
    """``compact-ticks``' reading progress on a :class:`~skewtape_pipeline.progress.
    ProgressLine` counted in bytes: the bytes read of the file's size, with the ticks read and
    their rate per second as the stage."""

    def __init__(self, line: progress.ProgressLine, clock: Callable[[], float] = time.monotonic):
        self.line, self.clock = line, clock
        self.started = clock()

    def update(self, bytes_read: int, file_bytes: int, ticks: int) -> None:
        rate = ticks / max(self.clock() - self.started, 1e-9)
        stage = f"reading, {ticks:,} ticks at {rate:,.0f} ticks/s:"
        self.line.update(bytes_read, file_bytes, stage=stage, unit="bytes")


def cmd_retier(args: argparse.Namespace) -> None:
    from skewtape_pipeline.ticks.archive.store.layout import check_archive_root

    archive = _archive(args, check_archive_root(args.archive, empty_ok=False))
    as_of = _parse_day(args.as_of)
    with showing_progress(args):
        result = archive.retier(as_of=as_of)
    metrics = result.metrics()
    print_result(args, metrics, describe_retier(args.archive, metrics))


def describe_retier(archive: str, metrics: dict[str, Any]) -> str:
    """``retier``'s summary: what moved, its bytes before and after, the files written and
    removed, the catalog generation (unchanged when nothing moved)."""
    before, after = metrics["bytes_before"], metrics["bytes_after"]
    sizes = f"{before} -> {after} bytes"
    if 0 < after <= before:
        sizes += f", {before / after:.2f}x smaller"
    return (
        f"{archive}: moved {metrics['symbol_days_moved']} symbol-days "
        f"({metrics['ticks_moved']} ticks; {sizes}); files written {metrics['files_written']}, "
        f"removed {metrics['files_removed']}; catalog generation {metrics['generation']}"
        + ("" if metrics["committed"] else " (nothing to commit)")
    )


def cmd_remove_days(args: argparse.Namespace) -> None:
    from skewtape_pipeline.ticks.archive.store.layout import check_archive_root

    archive = _archive(args, check_archive_root(args.archive, empty_ok=False))
    keys = [(symbol, _parse_day(day, option="--day")) for symbol, day in args.day]
    _check_symbol_days_archived(archive, keys)
    with showing_progress(args):
        removals = archive.remove(keys)
    rows = [
        {
            "symbol": r.symbol,
            "date": r.day.isoformat(),
            "removed_file": r.removed_file,
            "withdrawn": r.withdrawn,
        }
        for r in removals
    ]
    changed = sum(r.removed_file or r.withdrawn for r in removals)
    print_result(args, rows, f"{args.archive}: {changed} of {len(removals)} symbol-days taken out")


def cmd_verify_archive(args: argparse.Namespace) -> None:
    from skewtape_pipeline.errors import ArchiveVerificationError

    archive = _archive(args, args.archive)
    with showing_progress(args):
        result = archive.verify(full=args.full)
    findings = [*result.problems, *result.leftovers]  # leftovers: named, yet no failure
    if result.problems:  # every finding on standard output, one per line; then the error line
        print_result(args, result, "\n".join(error_line(p) for p in findings))
        raise ArchiveVerificationError(result.archive_root, result.problems)
    print_result(args, result, "\n".join([*map(error_line, findings), result.describe()]))


def cmd_rebuild_catalog(args: argparse.Namespace) -> None:
    from skewtape_pipeline.ticks.archive.store.layout import check_archive_root

    archive = _archive(args, check_archive_root(args.archive, empty_ok=False))
    with showing_progress(args):
        result = archive.rebuild_catalog(allow_fewer=args.allow_fewer)
    print_result(
        args,
        result,
        f"{args.archive}: catalog generation {result.generation} rebuilt from {result.files} "
        f"files ({result.symbol_days} symbol-days; {len(result.superseded)} superseded files "
        f"left out; {result.hot_files_recorded} hot files without a record recorded as they are)",
    )


def _check_symbol_days_archived(archive: Any, keys: Sequence[tuple[str, date]]) -> None:
    """ConfigError naming the first symbol-day that has neither a hot file, a hot index entry
    nor a catalogued copy in ``archive`` (an ``Archive``), nor any audited history there (a
    mistyped symbol or day, not one a run cut short had already removed), before anything is
    removed; first CatalogMismatchError when the catalog is gone while consolidated files are
    on disk (the catalog is to blame then, not the day)."""
    from skewtape_pipeline.ticks.archive.store.hot_index import HotIndex
    from skewtape_pipeline.ticks.archive.store.layout import partition_file
    from skewtape_pipeline.ticks.archive.store.trust import check_catalog_present

    check_catalog_present(archive.tiers)
    root = archive.root
    catalogued = archive.core.catalog.read().partitions
    listed = HotIndex.read(root)
    for symbol, day in keys:
        if (symbol, day) in catalogued or partition_file(root, symbol, day).exists():
            continue
        if listed is not None and listed.present((symbol, day)) is not None:
            continue  # listed, its file gone: a removal cut short
        if _has_history(archive, symbol, day):
            continue  # removed already (by a run cut short before its version)
        raise ConfigError(
            f"{symbol} {day.isoformat()}: not in the archive {root} (no hot file, not "
            "catalogued, no history in its audit log); nothing removed"
        )


def _has_history(archive: Any, symbol: str, day: date) -> bool:
    """Whether the archive's audit log tells anything of ``symbol`` on ``day``."""
    try:
        return bool(archive.show(symbol, day).history)
    except ConfigError:
        return False


def cmd_show(args: argparse.Namespace) -> None:
    from skewtape_pipeline.ticks.archive.store.layout import check_archive_root

    archive = _archive(args, check_archive_root(args.archive, empty_ok=False))
    story = archive.show(args.symbol, _parse_day(args.date, option="DATE"))
    print_result(args, story, "\n".join(story.describe()))


def cmd_query(args: argparse.Namespace) -> None:
    from skewtape_pipeline.ticks.archive.ops.query import (
        QueryOptions,
        run_query_json,
        run_query_text,
    )

    archives = [_archive(args, root).core for root in args.archive]  # each its own core
    options = QueryOptions(unrestricted=args.unrestricted, as_of=args.as_of)
    if args.json:
        print(run_query_json(args.sql, archives, options))
        return
    result = run_query_text(args.sql, archives, options)
    print("\t".join(_tsv_field(name) for name in result.columns))
    for row in result.rows:
        print("\t".join(_tsv_field(value) for value in row))


def cmd_versions(args: argparse.Namespace) -> None:
    from skewtape_pipeline.ticks.archive.store.layout import check_archive_root

    archive = _archive(args, check_archive_root(args.archive, empty_ok=False))
    versions = archive.versions.list()
    tags: dict[int, list[str]] = {}
    for name, number in archive.versions.tags().items():
        tags.setdefault(number, []).append(name)
    rows = [v.to_dict() | {"tags": tags.get(v.version, [])} for v in versions]
    lines = [
        f"{v.version}\t{row['time']}\t{v.operation}\t{len(v.changed)} symbol-days changed"
        + (f"\ttags: {', '.join(row['tags'])}" if row["tags"] else "")
        for v, row in zip(versions, rows, strict=True)
    ]
    print_result(args, rows, "\n".join(lines) or f"{args.archive}: no versions yet")


def cmd_tag(args: argparse.Namespace) -> None:
    from skewtape_pipeline.ticks.archive.store.layout import check_archive_root

    archive = _archive(args, check_archive_root(args.archive, empty_ok=False))
    with showing_progress(args):
        version = archive.versions.tag(args.name, version=args.version)
    result = {"tag": args.name, "version": version}
    print_result(args, result, f"{args.archive}: tag {args.name} pins version {version}")


def cmd_prune_versions(args: argparse.Namespace) -> None:
    from skewtape_pipeline.ticks.archive.store.layout import check_archive_root

    archive = _archive(args, check_archive_root(args.archive, empty_ok=False))
    older_than = _parse_day(args.older_than, option="--older-than") if args.older_than else None
    with showing_progress(args):
        result = archive.versions.prune(keep_last=args.keep_last, older_than=older_than)
    print_result(
        args,
        result,
        f"{args.archive}: pruned {len(result.pruned)} versions, kept {len(result.kept)}; "
        f"removed {len(result.files_removed)} files no kept version reads",
    )


_TSV_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})


def _tsv_field(value: str | None) -> str:
    """One field of ``query``'s tab-separated output (PostgreSQL's text format): backslash,
    tab, newline and carriage return escaped, any other control character as ``\\xNN`` (a
    terminal never obeys a value), NULL as ``\\N``."""
    return "\\N" if value is None else printable(value.translate(_TSV_ESCAPES))
