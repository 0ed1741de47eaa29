"""The skewtape-pipeline command line: a thin shell over the core functions.

Exit codes: 0 on success, 2 when the input is refused (a one-line ``error: ...`` on stderr, nothing
changed on disk), 1 on an operating-system error (a full disk, ...; one line naming the file).
``--json`` prints the result object.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import math
import os
import re
import select
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from datetime import date
from pathlib import Path
from typing import Any

from skewtape_pipeline import progress
from skewtape_pipeline.audit import AUDIT_LOG_NAME
from skewtape_pipeline.errors import ConfigError, SkewtapeError, printable, quoted
from skewtape_pipeline.ticks.input_formats import INPUT_FORMATS


def default_audit_log(history: Path) -> Path:
    """The data root's audit log: ``<root>/audit.jsonl`` for snapshots in ``<root>/history/``."""
    return history.resolve().parent / AUDIT_LOG_NAME


def _audit_log(args: argparse.Namespace, history: Path) -> Path | None:
    if args.no_audit:
        return None
    return Path(args.audit_log) if args.audit_log else default_audit_log(history)


def _print_result(args: argparse.Namespace, result: Any, summary: str) -> None:
    if args.json:
        print(json.dumps(_as_json(result), indent=2, default=str))
    else:
        print(summary)


@contextlib.contextmanager
def _progress(args: argparse.Namespace) -> Iterator[None]:
    """Progress of the command's core call on standard error: a bar on a terminal, a line every
    few seconds otherwise, nothing with ``--json``."""
    line = progress.ProgressLine(sys.stderr, "files", label=args.command, enabled=not args.json)
    try:
        with progress.reporting(line.update):
            yield
    finally:
        line.finish()


def _as_json(result: Any) -> Any:
    if isinstance(result, list):
        return [_as_json(item) for item in result]
    return result.to_dict() if hasattr(result, "to_dict") else result


# --- mirror commands ------------------------------------------------------------------------


def cmd_apply_delta(args: argparse.Namespace) -> None:
    from skewtape_pipeline.mirror.apply import apply_delta

    snapshot = Path(args.snapshot)
    into = Path(args.into) if args.into else None
    with _progress(args):
        result = apply_delta(
            snapshot,
            Path(args.delta),
            into=into,
            audit_log=_audit_log(args, (into or snapshot).resolve().parent),
            lock_timeout=args.wait,
            link_sources=not args.copy,
        )
    _print_result(args, result, _describe_apply(result))


def _describe_apply(result: Any) -> str:
    if result.already_applied:
        return f"{result.snapshot}: already holds {result.next_bundle_id}; nothing to do"
    rows = sum(result.rows_upserted.values()), sum(result.rows_deleted.values())
    return (
        f"{result.snapshot}: {result.parent_bundle_id} -> {result.next_bundle_id} ({result.mode}); "
        f"files +{len(result.files_added)} ~{len(result.files_replaced)} "
        f"-{len(result.files_deleted)}; rows upserted {rows[0]}, deleted {rows[1]}; "
        f"{sum(result.seconds.values()):.2f} s"
    )


def cmd_verify(args: argparse.Namespace) -> None:
    from skewtape_pipeline.mirror.folder_kinds import check_snapshot_folder
    from skewtape_pipeline.mirror.verify import verify_snapshot

    check_snapshot_folder(Path(args.snapshot))
    with _progress(args):
        result = verify_snapshot(Path(args.snapshot), full=args.full)
    summary = (
        f"{result.snapshot}: {result.bundle_id} verified ({result.files_checked} files, "
        f"{result.files_hashed} hashed{', full scrub' if args.full else ''})"
    )
    lines = _rows_compared_lines(result, full=args.full)
    _print_result(args, result, "\n".join([summary, *lines]))


def _rows_compared_lines(result: Any, *, full: bool) -> list[str]:
    """What ``verify`` compared by rows rather than bytes, and why (none: nothing to say)."""
    tables = result.compared_by_rows
    if not tables:
        return []
    covered = (
        "this check covers"
        if full
        else "`skewtape-pipeline verify --full` is the check that covers"
    )
    return [
        f"{len(tables)} reference tables compared by their rows, keys and columns, not their "
        f"bytes: {', '.join(tables)}",
        "  an apply merged row changes into them with DuckDB, which writes new Parquet bytes, so "
        f"`sha256sum -c CHECKSUMS.sha256` lists them as FAILED; {covered} every file",
    ]


def cmd_catch_up(args: argparse.Namespace) -> None:
    from skewtape_pipeline.mirror.catchup import catch_up

    history = Path(args.history)
    with _progress(args):
        results = catch_up(
            history,
            Path(args.deltas),
            mode="in_place" if args.in_place else "versioned",
            audit_log=_audit_log(args, history),
            lock_timeout=args.wait,
            link_sources=not args.copy,
        )
    lines = [_describe_apply(result) for result in results] or [f"{history}: already current"]
    _print_result(args, results, "\n".join(lines))


def _data_root(args: argparse.Namespace) -> Path:
    """``--root``, else ``$SKEWTAPE_HOME``, else ``./data``. ConfigError naming SKEWTAPE_HOME,
    creating nothing, when it is a ``scheme://`` URL (``--root`` is refused as every path is,
    by :func:`refuse_url_arguments`), never a folder named after the scheme."""
    from skewtape_pipeline.locations import DATA_ROOT_EXPECTED, HOME_VARIABLE, refuse_url

    home = os.environ.get(HOME_VARIABLE)
    if args.root or not home:
        return Path(args.root or "data")
    return Path(refuse_url(home, HOME_VARIABLE, DATA_ROOT_EXPECTED))


def _fetch(args: argparse.Namespace, *, first_snapshot: bool) -> tuple[Any, SkewtapeError | None]:
    """Run ``fetch`` (or ``sync``'s fetch): the first snapshot when asked for (or, for
    ``first_snapshot``, when the root holds none: the publisher's newest), then the deltas.

    Returns what was fetched and None; or, when a delta fails (the network, a refused answer:
    ``fetch.REFUSALS``), what was fetched before it and that failure. Any other failure, and
    the snapshot's, is raised."""
    from skewtape_pipeline.mirror.fetch import FetchResult, holds_snapshot
    from skewtape_pipeline.mirror.remote import newest_snapshot_month
    from skewtape_pipeline.mirror.sources import open_source

    root = _data_root(args)
    refuse_missing_folder_above(f"--root {root}", root, "the data root is created")
    source = open_source(args.source, _transfer_settings(args))
    shown = TransferProgress(sys.stderr, enabled=not args.json)
    options = {
        "dry_run": getattr(args, "dry_run", False),
        "on_progress": shown.update,
        "lock_timeout": args.wait,
    }
    fetched = FetchResult(source.location, [], dry_run=options["dry_run"])
    try:
        with (
            progress.reporting(shown.line.update),
            progress.noticing(shown.notice),
        ):  # a lock wait; retries
            month = args.snapshot
            if month is None and first_snapshot and not holds_snapshot(root):
                month = newest_snapshot_month(source)
            failure = _fetch_months(source, root, month, first_snapshot, fetched, options)
    finally:
        shown.finish()
    return fetched, failure


def _fetch_months(
    source: Any,
    root: Path,
    month: str | None,
    first_snapshot: bool,
    fetched: Any,
    options: dict[str, Any],
) -> SkewtapeError | None:
    """Fetch ``month``'s snapshot when one is named (its failure raised: a month that cannot be
    the first is refused whole), then (unless only the snapshot was asked for) the deltas,
    adding each month to ``fetched`` once it is in place; a delta's failure (the network, a
    refused answer) is returned, the months before it in ``fetched``."""
    from skewtape_pipeline.errors import TransferError
    from skewtape_pipeline.mirror.fetch import REFUSALS, fetch_deltas, fetch_snapshot

    if month is not None:
        fetched.months += fetch_snapshot(source, root, _check_month(month), **options).months
        if not first_snapshot:
            return None
    try:
        deltas = fetch_deltas(source, root, on_month=fetched.months.append, **options)
    except (TransferError, *REFUSALS) as exc:
        return exc
    fetched.next_unpublished = deltas.next_unpublished
    return None


def _transfer_settings(args: argparse.Namespace) -> Any:
    """The fetch's TransferSettings from ``--connections``, ``--speed-limit`` and
    ``--speed-time`` (the ones not given keep their defaults); ConfigError naming the flag for
    a value that is not a finite number of 0 or more."""
    from skewtape_pipeline.mirror.sources import TransferSettings

    limits = {}
    for name, unit in (("speed_limit", "bytes/s"), ("speed_time", "seconds")):
        text = getattr(args, name)
        if text is None:
            continue
        try:
            limits[name] = float(text)
        except ValueError:
            limits[name] = math.nan
        if not 0 <= limits[name] < math.inf:
            raise ConfigError(
                f"--{name.replace('_', '-')} {text!r}: expected a number of {unit}, 0 or more "
                "(0 turns the low-speed limit off)"
            )
    return TransferSettings(connections=args.connections, **limits)


def _check_month(month: str, *, option: str = "--snapshot") -> str:
    from skewtape_pipeline.mirror.format import MONTH_RE

    if not MONTH_RE.match(month):
        raise ConfigError(f"{option} {month!r}: expected a month YYYY-MM")
    return month


def _describe_fetch(result: Any) -> str:
    lines = []
    for month in result.months:
        if month.already_present:
            lines.append(f"{month.folder}: already in place; nothing to fetch")
        elif result.dry_run:
            lines.append(f"{month.folder}: would fetch {month.files} files, {month.bytes} bytes")
        else:
            lines.append(
                f"{month.folder}: {month.files} files verified; {month.bytes_fetched} bytes "
                f"fetched, {month.bytes_resumed} resumed, {month.retries} retries, "
                f"{month.seconds:.1f} s ({month.mean_rate / 1e6:.1f} MB/s)"
            )
    if result.next_unpublished:
        lines.append(f"{result.source}: {result.next_unpublished} is not published yet")
    return "\n".join(lines) or f"{result.source}: nothing to fetch"


def cmd_fetch(args: argparse.Namespace) -> None:
    """``fetch``: the months placed, then, when a later month failed (the network, a refused
    answer), that failure (its exit code); the months before it stay in place, verified."""
    result, failure = _fetch(args, first_snapshot=False)
    if failure is None or result.months:
        _print_result(args, result, _describe_fetch(result))
    if failure is not None:
        raise failure


def cmd_sync(args: argparse.Namespace) -> None:
    """``fetch``, then ``catch-up`` of the months pending. A fetch that fails on a month (the
    network, a refused answer) still leaves the months before it verified in place: those are
    applied and reported (text and JSON), then the failure is (its exit code). With no month
    pending no catch-up runs, so a refused fetch creates nothing (no ``deltas/``, no lock); the
    audit log is still checked to take records (AuditLogError now, not at the next month)."""
    from skewtape_pipeline.audit import AuditLog
    from skewtape_pipeline.mirror.catchup import catch_up, has_pending
    from skewtape_pipeline.mirror.fetch import holds_snapshot

    root = _data_root(args)
    fetched, failure = _fetch(args, first_snapshot=True)
    if failure is not None and not holds_snapshot(root):
        raise failure
    history, applied = root / "history", []
    audit_log = _audit_log(args, history)
    if has_pending(history, root / "deltas"):
        with _progress(args):
            applied = catch_up(
                history,
                root / "deltas",
                mode="in_place" if args.in_place else "versioned",
                audit_log=audit_log,
                lock_timeout=args.wait,
            )
    elif audit_log is not None and failure is None:  # refused now, not at the next month
        AuditLog(audit_log).check_appendable()
    _print_sync(args, history, fetched, applied, failure)
    if failure is not None:
        raise failure


def _print_sync(
    args: argparse.Namespace,
    history: Path,
    fetched: Any,
    applied: list[Any],
    failure: SkewtapeError | None,
) -> None:
    """What ``sync`` fetched and applied (before ``failure``, when the fetch failed on a month:
    then never "already current", and nothing when nothing was done)."""
    if args.json:
        print(json.dumps({"fetch": fetched.to_dict(), "catch_up": _as_json(applied)},
                         indent=2, default=str))  # fmt: skip
        return
    lines = [_describe_fetch(fetched)] if fetched.months or failure is None else []
    lines += [_describe_apply(result) for result in applied]
    if not applied and failure is None:
        lines.append(f"{history}: already current")
    if lines:
        print("\n".join(lines))


def cmd_sample(args: argparse.Namespace) -> None:
    from skewtape_pipeline.sample.publisher import publish_sample

    if args.keep_snapshots:
        refuse_missing_folder_above(
            f"--keep-snapshots {args.keep_snapshots}", Path(args.keep_snapshots),
            "the snapshots are kept",
        )  # fmt: skip
    result = publish_sample(
        Path(args.root),
        seed=args.seed,
        months=args.months,
        snapshots_dir=Path(args.keep_snapshots) if args.keep_snapshots else None,
    )
    _print_result(args, result, f"sample written to {Path(args.root).resolve()}")


def cmd_diff(args: argparse.Namespace) -> None:
    from skewtape_pipeline.fsio import load_json
    from skewtape_pipeline.mirror.diff import build_delta

    out = Path(args.out)
    refuse_missing_folder_above(args.out, out, "the delta is written")
    manifest = build_delta(Path(args.parent), Path(args.next), out)
    counts: dict[str, int] = {}
    for entry in manifest.files:
        counts[entry.op] = counts.get(entry.op, 0) + 1
    summary = ", ".join(f"{op} {n}" for op, n in sorted(counts.items()))
    _print_result(
        args,
        load_json(manifest.to_json(), Path(args.out) / "manifest.json"),
        f"{args.out}: {manifest.parent.bundle_id} -> {manifest.next.bundle_id} ({summary})",
    )


def cmd_audit_verify(args: argparse.Namespace) -> None:
    from skewtape_pipeline.audit import check_audit_log

    check = check_audit_log(Path(args.log), require_head=args.require_head)
    _print_result(args, check, check.describe())


# --- tick archive commands ------------------------------------------------------------------


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

    root = _data_root(args)
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
            month = _check_month(args.month, option="MONTH")
            result = archive_month(root / "history", month, options, on_progress=line.update)
    finally:  # an error after a bar starts on a line of its own
        line.finish()
    _print_result(args, result, describe_month(result, root / "archive"))


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
    symbol-days (ticks, raw and archived bytes, ratio, the tier whose codec the day's age chose:
    every day is written hot, and moves only when re-tiered), then how many were left out,
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
    table = [("symbol", "date", "ticks", "raw bytes", "bytes", "ratio", "codec of")]
    table += [
        (printable(r.symbol), r.date, str(r.tick_count), str(r.raw_size_bytes),
         str(r.compacted_size_bytes), f"{r.compression_ratio:.2f}x", r.tier)
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


class TransferProgress:
    """A fetch's progress on ``stream`` through :class:`~skewtape_pipeline.progress.ProgressLine`
    (a bar on a terminal, a line every ``interval`` seconds otherwise): bytes on disk of the
    month's total, the mean rate and the time left. Called from the transfer threads."""

    def __init__(self, stream: Any, *, enabled: bool = True, interval: float | None = None):
        self.line = progress.ProgressLine(
            stream, "bytes", label="fetch", enabled=enabled, interval=interval
        )
        self.lock, self.last = threading.Lock(), 0.0

    def update(self, stats: Any) -> None:
        now = time.monotonic()
        if now - self.last < PROGRESS_REDRAW_SECONDS:
            return
        with self.lock:
            self.last = now
            done, total, seconds = stats.bytes_done, stats.bytes_total, stats.seconds
            rate = stats.bytes_fetched / seconds if seconds > 0 else 0.0
            left = f"{(total - done) / rate:.0f} s left" if rate > 0 else "-- s left"
            self.line.update(done, total, f"{rate / 1e6:.1f} MB/s, {left},", "bytes")

    def notice(self, text: str) -> None:
        """A line of news (a retry, and why) under the bar, any URL in it redacted."""
        from skewtape_pipeline.locations import redact_urls

        self.line.notice(redact_urls(one_line(printable(text))))

    def finish(self) -> None:
        self.line.finish()


PROGRESS_REDRAW_SECONDS = 0.2


def cmd_retier(args: argparse.Namespace) -> None:
    from skewtape_pipeline.ticks.archive.store.layout import check_archive_root

    archive = _archive(args, check_archive_root(args.archive, empty_ok=False))
    as_of = _parse_day(args.as_of)
    with _progress(args):
        result = archive.retier(as_of=as_of)
    metrics = result.metrics()
    _print_result(args, metrics, describe_retier(args.archive, metrics))


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
    with _progress(args):
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
    _print_result(args, rows, f"{args.archive}: {changed} of {len(removals)} symbol-days taken out")


def cmd_verify_archive(args: argparse.Namespace) -> None:
    from skewtape_pipeline.errors import ArchiveVerificationError

    archive = _archive(args, args.archive)
    with _progress(args):
        result = archive.verify(full=args.full)
    if result.problems:  # every finding on standard output, one per line; then the error line
        _print_result(args, result, "\n".join(error_line(p) for p in result.problems))
        raise ArchiveVerificationError(result.archive_root, result.problems)
    _print_result(args, result, result.describe())


def cmd_rebuild_catalog(args: argparse.Namespace) -> None:
    from skewtape_pipeline.ticks.archive.store.layout import check_archive_root

    archive = _archive(args, check_archive_root(args.archive, empty_ok=False))
    with _progress(args):
        result = archive.rebuild_catalog(allow_fewer=args.allow_fewer)
    _print_result(
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
    _print_result(args, story, "\n".join(story.describe()))


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
    _print_result(args, rows, "\n".join(lines) or f"{args.archive}: no versions yet")


def cmd_tag(args: argparse.Namespace) -> None:
    from skewtape_pipeline.ticks.archive.store.layout import check_archive_root

    archive = _archive(args, check_archive_root(args.archive, empty_ok=False))
    with _progress(args):
        version = archive.versions.tag(args.name, version=args.version)
    result = {"tag": args.name, "version": version}
    _print_result(args, result, f"{args.archive}: tag {args.name} pins version {version}")


def cmd_prune_versions(args: argparse.Namespace) -> None:
    from skewtape_pipeline.ticks.archive.store.layout import check_archive_root

    archive = _archive(args, check_archive_root(args.archive, empty_ok=False))
    older_than = _parse_day(args.older_than, option="--older-than") if args.older_than else None
    with _progress(args):
        result = archive.versions.prune(keep_last=args.keep_last, older_than=older_than)
    _print_result(
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


# --- parser ---------------------------------------------------------------------------------


def _add_audit_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--audit-log",
        help="append-only audit log (default: audit.jsonl in the data root, the folder "
        "that holds history/)",
    )
    parser.add_argument("--no-audit", action="store_true", help="do not write an audit log")
    parser.add_argument(
        "--wait",
        type=wait_seconds,
        default=0.0,
        metavar="SECONDS",
        help="wait this long for another apply (or fetch) to release the lock (default: refuse "
        "at once)",
    )


def _add_source_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "source",
        help="the publisher: https://host/path, s3://bucket/prefix (endpoint and credentials "
        "from the environment) or a local folder",
    )
    parser.add_argument(
        "--root", help="data root (history/ and deltas/; default: $SKEWTAPE_HOME, else ./data)"
    )
    parser.add_argument(
        "--connections",
        type=int,
        default=4,
        metavar="N",
        help="parallel transfers (default: 4)",
    )
    parser.add_argument(
        "--speed-limit",
        metavar="BYTES_PER_S",
        help="the low-speed limit, as curl's: a file whose bytes come slower than this over "
        "--speed-time is asked for again from where it stopped, within the retries, then the "
        "fetch fails naming it (default: 1024; 0: no limit)",
    )
    parser.add_argument(
        "--speed-time",
        metavar="SECONDS",
        help="the window of --speed-limit, in seconds; a connection silent that long is given "
        "up too (default: 30; 0: no limit)",
    )


ARCHIVE_WAIT = (
    "wait this long for another writer to release the archive's lock (default: refuse; "
    "compact-ticks waits at least 10 minutes)"
)


def wait_seconds(text: str) -> float:
    """A ``--wait`` value: seconds, a finite number of 0 or more (``nan`` or ``inf`` would wait
    for ever); a usage error naming the value otherwise."""
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not 0 <= seconds < math.inf:
        raise argparse.ArgumentTypeError(f"{text!r}: expected seconds, a number of 0 or more")
    return seconds


def count_of_one_or_more(text: str) -> int:
    """A count option's value (``--keep-last``): an integer of 1 or more; a usage error naming
    the value otherwise."""
    try:
        count = int(text)
    except ValueError:
        count = 0
    if count < 1:
        raise argparse.ArgumentTypeError(f"{quoted(text)}: expected an integer of 1 or more")
    return count


def _add_archive_options(parser: argparse.ArgumentParser, *, writes: bool) -> None:
    """``--tier-policy`` (the tier roots and settings) of every archive command; for the
    commands that take the archive's lock to change it (``writes``), ``--audit-log`` and
    ``--wait`` too."""
    parser.add_argument(
        "--tier-policy",
        help="tier policy file (TOML or JSON): the tier roots (default: the one the archive "
        "records)",
    )
    if writes:
        parser.add_argument(
            "--audit-log", help="audit log (default: audit.jsonl beside the archive)"
        )
        parser.add_argument(
            "--wait", type=wait_seconds, default=0.0, metavar="SECONDS", help=ARCHIVE_WAIT
        )


class _Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors name any URL argument redacted."""

    def error(self, message: str):  # type: ignore[override]
        from skewtape_pipeline.locations import redact_urls

        super().error(redact_urls(message))


def _add_command(
    commands: argparse._SubParsersAction,
    name: str,
    handler: Callable[[argparse.Namespace], None],
    help_text: str,
) -> argparse.ArgumentParser:
    """Add the subcommand ``name`` to ``commands`` (the subparsers): ``help_text`` its summary and
    description, ``--json`` its first option, and its handler and own parser (for usage errors)
    set as defaults. The command builders below get it bound to the subparsers, as ``command``."""
    sub = commands.add_parser(name, help=help_text, description=help_text)
    sub.add_argument("--json", action="store_true", help="print the result object as JSON")
    sub.set_defaults(handler=handler, command_parser=sub)
    return sub


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="skewtape-pipeline", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    command = functools.partial(_add_command, commands)
    # in the order the help lists the commands
    _add_mirror_commands(command)
    _add_publisher_commands(command)
    _add_mirror_tool_commands(command)
    _add_compact_ticks_command(command)
    _add_archive_month_command(command)
    _add_archive_write_commands(command)
    _add_query_command(command)
    _add_archive_repair_commands(command)
    _add_version_commands(command)
    _add_show_command(command)
    return parser


def _add_mirror_commands(command: Callable[..., argparse.ArgumentParser]) -> None:
    """``apply-delta``, ``verify`` and ``catch-up``: a mirror's snapshots and deltas."""
    apply = command("apply-delta", cmd_apply_delta, "apply a monthly delta to a snapshot")
    apply.add_argument("snapshot", help="the parent snapshot folder (changed in place by default)")
    apply.add_argument("delta", help="the delta folder")
    apply.add_argument("--into", help="build the next snapshot in this new folder (versioned)")
    apply.add_argument(
        "--copy", action="store_true", help="copy delta files, never clone or hard-link"
    )
    _add_audit_options(apply)

    verify = command("verify", cmd_verify, "verify a snapshot against its checksums and manifest")
    verify.add_argument("snapshot", help="a snapshot folder (history/YYYY-MM/)")
    verify.add_argument("--full", action="store_true", help="re-hash every file (a scrub)")

    catch = command("catch-up", cmd_catch_up, "apply every pending delta in month order")
    catch.add_argument("history", help="folder of month snapshots (history/YYYY-MM/)")
    catch.add_argument("deltas", help="folder of deltas (deltas/YYYY-MM/)")
    catch.add_argument("--in-place", action="store_true", help="advance the newest month in place")
    catch.add_argument(
        "--copy", action="store_true", help="copy delta files, never clone or hard-link"
    )
    _add_audit_options(catch)


def _add_publisher_commands(command: Callable[..., argparse.ArgumentParser]) -> None:
    """``fetch`` and ``sync`` (from a publisher) and ``sample`` (a publisher's history and
    deltas, written)."""
    fetch = command("fetch", cmd_fetch, "fetch the publisher's new deltas (or a first snapshot)")
    _add_source_options(fetch)
    fetch.add_argument(
        "--snapshot",
        metavar="YYYY-MM",
        help="fetch this month's whole snapshot into history/ (a new subscriber's start)",
    )
    fetch.add_argument(
        "--dry-run", action="store_true", help="print what would be fetched and its bytes"
    )
    fetch.add_argument(
        "--wait",
        type=wait_seconds,
        default=0.0,
        metavar="SECONDS",
        help="wait this long for another fetch into the root to finish (default: refuse at once)",
    )
    sync = command("sync", cmd_sync, "fetch from the publisher, then catch-up: a current mirror")
    _add_source_options(sync)
    sync.add_argument(
        "--snapshot",
        metavar="YYYY-MM",
        help="the first snapshot to start an empty root from (default: the newest published)",
    )
    sync.add_argument("--in-place", action="store_true", help="advance the newest month in place")
    _add_audit_options(sync)

    sample = command("sample", cmd_sample, "write the sample Skewtape history and delta chain")
    sample.add_argument("root", help="data root to create (history/ and deltas/ inside)")
    sample.add_argument("--seed", type=int, default=7, help="random seed of the fills (default: 7)")
    sample.add_argument(
        "--months", type=int, default=4, help="months in the chain (>= 4; default: 4)"
    )
    sample.add_argument("--keep-snapshots", help="also keep every month's full snapshot here")


def _add_mirror_tool_commands(command: Callable[..., argparse.ArgumentParser]) -> None:
    """``diff`` (the delta between two snapshots) and ``audit-verify`` (the audit log)."""
    diff = command("diff", cmd_diff, "build the delta between two snapshot folders")
    diff.add_argument("parent", help="the earlier snapshot folder")
    diff.add_argument("next", help="the later snapshot folder")
    diff.add_argument("out", help="the new delta folder")

    audit = command("audit-verify", cmd_audit_verify, "check the audit log's hash chain")
    audit.add_argument("log", help="the audit log (audit.jsonl in the data root)")
    audit.add_argument(
        "--require-head",
        action="store_true",
        help="refuse a log without its head file (whose last lines could be gone unnoticed)",
    )


def _add_compact_ticks_command(command: Callable[..., argparse.ArgumentParser]) -> None:
    """``compact-ticks``: a file of trades into the archive."""
    ticks = command("compact-ticks", cmd_compact_ticks, "compact trades into the Parquet archive")
    ticks.add_argument(
        "input",
        help="CSV or Parquet: timestamp_nanos,price,quantity,side[,symbol]; or a raw file of "
        "--input-format",
    )
    ticks.add_argument(
        "--input-format",
        choices=INPUT_FORMATS,
        help="raw venue files are mapped exactly (Kalshi trades API, Tardis trades, LOBSTER, a "
        "Skewtape mirror's fills month file); default: detected from the file "
        "(a fills file by its columns), else canonical",
    )
    ticks.add_argument("--out", required=True, help="archive root")
    ticks.add_argument("--as-of", required=True, help="today's date for tiering (YYYY-MM-DD)")
    _add_tick_reading_options(ticks)
    _add_archive_options(ticks, writes=False)
    ticks.add_argument(
        "--audit-log",
        help="audit log of rewrites of symbol-days already archived (default: audit.jsonl "
        "beside the archive)",
    )
    ticks.add_argument(
        "--wait", type=wait_seconds, default=0.0, metavar="SECONDS", help=ARCHIVE_WAIT
    )
    ticks.add_argument(
        "--memory-limit",
        default="2G",
        metavar="BYTES",
        help="memory the compaction may use, e.g. 2G or 512M (default 2G): rows beyond half of "
        "it spill to the archive's staging folder; one symbol-day is encoded whole",
    )
    ticks.add_argument(
        "--allow-precision-loss",
        action="store_true",
        help="round digits beyond the scales that are not float noise (counted in the report "
        "as precision loss) instead of refusing",
    )


def _add_tick_reading_options(ticks: argparse.ArgumentParser) -> None:
    """``compact-ticks``'s options of how its input is read: scales, sides, symbol, day and
    timestamp unit."""
    ticks.add_argument(
        "--price-scale", type=int, help="decimals of price (default: the fewest that are exact)"
    )
    ticks.add_argument(
        "--quantity-scale",
        type=int,
        help="decimals of quantity (default: the fewest that are exact)",
    )
    ticks.add_argument("--side-map", help="e.g. yes=BUY,no=SELL (default: BUY/SELL/UNKNOWN)")
    ticks.add_argument(
        "--symbol",
        help="the symbol when the input has no symbol column (LOBSTER: when the file name "
        "does not give it)",
    )
    ticks.add_argument(
        "--session-date",
        metavar="YYYY-MM-DD",
        help="LOBSTER: the trading day when the file name does not give it (LOBSTER names "
        "files TICKER_YYYY-MM-DD_start_end_message_LEVEL.csv)",
    )
    ticks.add_argument(
        "--timestamp-unit",
        choices=("ns", "us", "ms", "s"),
        help="unit ts is stored at; a finer timestamp is refused (default: the coarsest exact)",
    )


def _add_archive_month_command(command: Callable[..., argparse.ArgumentParser]) -> None:
    """``archive-month``: a month of the mirror into its archive, as the tick archive asset."""
    month = command(
        "archive-month",
        cmd_archive_month,
        "archive every venue-day of a month of the mirror as the tick archive asset does "
        "(corrections of earlier months and withdrawals included), without Dagster",
    )
    month.add_argument("month", metavar="YYYY-MM", help="the month of fills to archive")
    month.add_argument(
        "--root",
        help="data root (history/ in, archive/ out; default: $SKEWTAPE_HOME, else ./data)",
    )
    month.add_argument(
        "--as-of",
        help="today's date (YYYY-MM-DD; default: today, UTC): the days before it are archived, "
        "and tiers follow from ages at it",
    )
    _add_archive_options(month, writes=True)
    month.add_argument(
        "--memory-limit", default="2G", metavar="BYTES",
        help="memory each venue-day's reads may use, e.g. 2G or 512M (default 2G)",
    )  # fmt: skip


def _add_archive_write_commands(command: Callable[..., argparse.ArgumentParser]) -> None:
    """``retier`` and ``remove-days``: an archive's symbol-days moved or taken out."""
    retier = command("retier", cmd_retier, "move symbol-days to the tier their age calls for")
    retier.add_argument("archive", help="archive root (its hot tier)")
    retier.add_argument("--as-of", required=True, help="today's date for ages (YYYY-MM-DD)")
    _add_archive_options(retier, writes=True)

    remove = command(
        "remove-days",
        cmd_remove_days,
        "take symbol-days whose ticks were all corrected away out of the archive",
    )
    remove.add_argument("archive", help="archive root (its hot tier)")
    remove.add_argument(
        "--day",
        nargs=2,
        action="append",
        required=True,
        metavar=("SYMBOL", "DATE"),
        help="a symbol-day to take out (repeatable)",
    )
    _add_archive_options(remove, writes=True)


def _add_query_command(command: Callable[..., argparse.ArgumentParser]) -> None:
    """``query``: SQL over one or more archives."""
    query = command(
        "query",
        cmd_query,
        "run SQL over the view `ticks` spanning every tier (and `tick_reports`, a row per "
        "symbol-day a venue-day run looked at)",
    )
    query.add_argument("sql", help="e.g. \"SELECT count(*) FROM ticks WHERE symbol = 'X'\"")
    query.add_argument(
        "--archive",
        action="append",
        required=True,
        help="archive root (repeatable: each read through the tier policy it records)",
    )
    query.add_argument(
        "--unrestricted",
        action="store_true",
        help="run any SQL with DuckDB's full access (by default: one SELECT, reading only the "
        "archives' own files)",
    )
    query.add_argument(
        "--as-of",
        metavar="VERSION|TIMESTAMP|TAG",
        help="read the archive's ticks as they were right after that version committed (one "
        "--archive; tick_reports has no versions: it holds each venue-day's latest run)",
    )
    _add_archive_options(query, writes=False)


def _add_version_commands(command: Callable[..., argparse.ArgumentParser]) -> None:
    """``versions``, ``tag`` and ``prune-versions``."""
    versions = command("versions", cmd_versions, "list a tick archive's kept versions")
    versions.add_argument("archive", help="archive root (its hot tier)")

    tag = command("tag", cmd_tag, "pin a version of a tick archive by name (never pruned)")
    tag.add_argument("archive", help="archive root (its hot tier)")
    tag.add_argument("name", help="the tag: a letter, then letters, digits, '.', '_' or '-'")
    tag.add_argument(
        "--version",
        type=int,
        help="the version to pin (default: what a query shows now; changes no version holds "
        "yet are recorded as one first)",
    )
    _add_archive_options(tag, writes=True)

    prune = command(
        "prune-versions",
        cmd_prune_versions,
        "remove old versions of a tick archive, then the files no kept version reads",
    )
    prune.add_argument("archive", help="archive root (its hot tier)")
    rule = prune.add_mutually_exclusive_group(required=True)
    rule.add_argument(
        "--keep-last", type=count_of_one_or_more, metavar="N", help="keep the N newest versions"
    )
    rule.add_argument("--older-than", metavar="DATE", help="prune versions before this day")
    _add_archive_options(prune, writes=True)


def _add_show_command(command: Callable[..., argparse.ArgumentParser]) -> None:
    """``show``: one symbol-day's place, report and history."""
    show = command(
        "show",
        cmd_show,
        "say where one symbol-day is now (tier, file, rows), its report and its history",
    )
    show.add_argument("archive", help="archive root (its hot tier)")
    show.add_argument("symbol", help="e.g. kalshi:KXBTC-26OCT05")
    show.add_argument("date", help="the symbol-day's UTC date (YYYY-MM-DD)")
    show.add_argument("--audit-log", help="audit log (default: audit.jsonl beside the archive)")
    _add_archive_options(show, writes=False)


def _add_archive_repair_commands(command: Callable[..., argparse.ArgumentParser]) -> None:
    """``verify-archive`` and ``rebuild-catalog``: an archive root and one flag each."""
    repairs = (
        ("verify-archive", cmd_verify_archive, False,
         "check a tick archive against its catalog (presence, sizes, sha256; --full: pages)",
         "--full",
         "also read every page of every file, verifying its checksum (CRC) through pyarrow"),
        ("rebuild-catalog", cmd_rebuild_catalog, True,
         "rebuild a tick archive's catalog from its consolidated files' own metadata",
         "--allow-fewer",
         "rebuild even when the files found hold fewer symbol-days than the catalog"),
    )  # fmt: skip
    for name, handler, writes, summary, flag, flag_help in repairs:
        repair = command(name, handler, summary)
        repair.add_argument("archive", help="archive root (its hot tier)")
        repair.add_argument(flag, action="store_true", help=flag_help)
        _add_archive_options(repair, writes=writes)


def one_line(message: str) -> str:
    """``message`` on one line: its lines joined with ``; `` (DuckDB's errors span several, with
    a line of carets under the offending text, which is dropped)."""
    lines = [line.strip() for line in message.splitlines()]
    return "; ".join(line for line in lines if line and set(line) != {"^"})


NOT_PATHS = frozenset({"source", "sql", "handler", "command"})
"""The arguments that are no local path (or plain word): the publisher, which
``mirror.sources.open_source`` reads, and ``query``'s SQL."""
INTERRUPTED = "interrupted; run again to resume"
"""The one line Ctrl-C prints (exit 130): every command resumes or redoes on its next run."""
EXIT_INTERRUPTED = 130
EXIT_READER_GONE = 141
"""The exit status when what read standard output stopped reading (``| head``): a shell's for
a command ended by SIGPIPE (128 + 13); no error line, as for any command cut short that way."""


def refuse_url_arguments(args: argparse.Namespace) -> None:
    """Refuse (ConfigError) an argument other than the source and the SQL that is a
    ``scheme://`` URL (a folder, a file, a month or a name given as one): it would be taken for
    a relative path and its words echoed; the message names it redacted
    (:mod:`skewtape_pipeline.locations`)."""
    from skewtape_pipeline.locations import refuse_url

    for name, value in vars(args).items():
        if name in NOT_PATHS:
            continue
        for item in value if isinstance(value, list) else [value]:
            for text in item if isinstance(item, list) else [item]:
                if isinstance(text, str):
                    refuse_url(text, name.replace("_", "-"), "a local path")


def refuse_audit_log_below_missing_folder(args: argparse.Namespace) -> None:
    """ConfigError naming ``--audit-log`` when the folder it would be written in does not
    exist (the log itself may be new)."""
    log = getattr(args, "audit_log", None)
    if log:
        refuse_missing_folder_above(f"--audit-log {log}", Path(log), "the audit log is written")


def refuse_missing_folder_above(named: str, path: Path, made: str) -> None:
    """ConfigError naming ``named`` when the folder ``path`` would be made in does not exist:
    a missing folder is refused, never created; ``made`` says what is made only inside one."""
    folder = path.absolute().parent
    if not folder.is_dir():
        raise ConfigError(
            f"{named}: its folder {folder} does not exist; {made} only inside an existing "
            "folder (a missing folder is refused, never created)"
        )


def refuse_undecodable(argv: Sequence[str]) -> None:
    """ConfigError naming the first argument that is not UTF-8 text (bytes the command line
    could not decode: no path, symbol or query of the archive can hold them), before any
    command runs."""
    for text in argv:
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise ConfigError(f"argument {text!r}: not valid UTF-8 text") from None


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (130 on Ctrl-C, after one line)."""
    try:
        refuse_undecodable(sys.argv[1:] if argv is None else argv)
        args, unknown = build_parser().parse_known_args(argv)
        if unknown:  # answered with the subcommand's usage, not the top-level one
            args.command_parser.error(f"unrecognized arguments: {' '.join(unknown)}")
        refuse_url_arguments(args)
        refuse_audit_log_below_missing_folder(args)
        args.handler(args)
    except KeyboardInterrupt:
        print(INTERRUPTED, file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError as exc:
        if _reader_gone():
            return EXIT_READER_GONE
        print(f"error: {error_line(exc)}", file=sys.stderr)  # a socket's, say: an OS error
        return 1
    except OSError as exc:  # before SkewtapeError: a StorageError is an OS error
        print(f"error: {error_line(exc)}", file=sys.stderr)
        return 1
    except SkewtapeError as exc:
        print(f"error: {error_line(exc)}", file=sys.stderr)
        return 2
    return 0


def _reader_gone() -> bool:
    """True when standard output is a pipe whose reader has gone (the pipe reports an error to
    a poll); standard output then points at the null device, so the exit flush writes nowhere,
    silently."""
    try:
        fd = sys.stdout.fileno()
    except (OSError, ValueError):  # no file behind it (a test's capture)
        return False
    poll = select.poll()
    poll.register(fd, select.POLLOUT)
    if not any(events & select.POLLERR for _, events in poll.poll(0)):
        return False
    os.dup2(os.open(os.devnull, os.O_WRONLY), fd)
    return True


ERROR_LINE_HEAD, ERROR_LINE_TAIL = 600, 300
"""Characters an error line keeps of a longer message: its start and its end."""


def error_line(exc: BaseException) -> str:
    """The one line an error prints: its message on one line, any URL in it redacted (the
    messages name sources redacted already; a library's own words might not), and a message
    longer than :data:`ERROR_LINE_HEAD` + :data:`ERROR_LINE_TAIL` characters cut to its start
    and end (a value quoted whole, a megabytes-long symbol, say, never floods the terminal;
    messages of this package quote values by ``errors.quoted``). Control characters, which a
    library's words may quote from the input, are printed as their escapes (``\\x1b``:
    ``errors.printable``), never obeyed by the terminal."""
    from skewtape_pipeline.locations import redact_urls

    line = redact_urls(one_line(printable(str(exc))))
    cut = len(line) - ERROR_LINE_HEAD - ERROR_LINE_TAIL
    if cut <= 0:
        return line
    return f"{line[:ERROR_LINE_HEAD]} ... ({cut} characters cut) ... {line[-ERROR_LINE_TAIL:]}"


if __name__ == "__main__":
    sys.exit(main())
