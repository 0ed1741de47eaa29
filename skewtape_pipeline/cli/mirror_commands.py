"""The mirror's commands: apply-delta, verify, catch-up, fetch, sync, sample, diff, audit-verify
(each a thin call of the core, its result described in a line or two).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import threading
import time
from pathlib import Path
from typing import Any

from skewtape_pipeline import progress
from skewtape_pipeline.cli.output import (
    as_json,
    audit_log_of,
    data_root,
    print_result,
    printed_line,
    showing_progress,
)
from skewtape_pipeline.errors import ConfigError, SkewtapeError
from skewtape_pipeline.fsio import refuse_missing_folder_above
from skewtape_pipeline.mirror.format import checked_month


def cmd_apply_delta(args: argparse.Namespace) -> None:
    from skewtape_pipeline.mirror.apply import apply_delta

    snapshot = Path(args.snapshot)
    into = Path(args.into) if args.into else None
    with showing_progress(args):
        result = apply_delta(
            snapshot,
            Path(args.delta),
            into=into,
            audit_log=audit_log_of(args, (into or snapshot).resolve().parent),
            lock_timeout=args.wait,
            link_sources=not args.copy,
        )
    print_result(args, result, _describe_apply(result))


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
    with showing_progress(args):
        result = verify_snapshot(Path(args.snapshot), full=args.full)
    named = f" {result.bundle_id}" if result.bundle_id else ""  # optional in a manifest
    summary = (
        f"{result.snapshot}:{named} verified ({result.files_checked} files, "
        f"{result.files_hashed} hashed{', full scrub' if args.full else ''})"
    )
    lines = _rows_compared_lines(result, full=args.full)
    print_result(args, result, "\n".join([summary, *lines]))


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
    with showing_progress(args):
        results = catch_up(
            history,
            Path(args.deltas),
            mode="in_place" if args.in_place else "versioned",
            audit_log=audit_log_of(args, history),
            lock_timeout=args.wait,
            link_sources=not args.copy,
        )
    lines = [_describe_apply(result) for result in results] or [f"{history}: already current"]
    print_result(args, results, "\n".join(lines))


def _fetch(args: argparse.Namespace, *, first_snapshot: bool) -> tuple[Any, SkewtapeError | None]:
    """Run ``fetch`` (or ``sync``'s fetch): the first snapshot when asked for (or, for
    ``first_snapshot``, when the root holds none: the publisher's newest), then the deltas.

    Returns what was fetched and None; or, when a delta fails (the network, a refused answer:
    ``fetch.REFUSALS``), what was fetched before it and that failure. Any other failure, and
    the snapshot's, is raised."""
    from skewtape_pipeline.mirror.fetch import FetchResult, holds_snapshot
    from skewtape_pipeline.mirror.remote import newest_snapshot_month
    from skewtape_pipeline.mirror.sources import open_source

    root = data_root(args)
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
        month = checked_month(month, f"--snapshot {month!r}")
        fetched.months += fetch_snapshot(source, root, month, **options).months
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
        print_result(args, result, _describe_fetch(result))
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

    root = data_root(args)
    fetched, failure = _fetch(args, first_snapshot=True)
    if failure is not None and not holds_snapshot(root):
        raise failure
    history, applied = root / "history", []
    audit_log = audit_log_of(args, history)
    if has_pending(history, root / "deltas"):
        with showing_progress(args):
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
        print(json.dumps({"fetch": fetched.to_dict(), "catch_up": as_json(applied)},
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
    print_result(args, result, f"sample written to {Path(args.root).resolve()}")


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
    print_result(
        args,
        load_json(manifest.to_json(), Path(args.out) / "manifest.json"),
        f"{args.out}: {manifest.parent.bundle_id} -> {manifest.next.bundle_id} ({summary})",
    )


def cmd_audit_verify(args: argparse.Namespace) -> None:
    from skewtape_pipeline.audit import check_audit_log

    check = check_audit_log(Path(args.log), require_head=args.require_head)
    print_result(args, check, check.describe())


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
        """A line of news (a retry, and why) under the bar, printable (:func:`printed_line`)."""
        self.line.notice(printed_line(text))

    def finish(self) -> None:
        self.line.finish()


PROGRESS_REDRAW_SECONDS = 0.2
