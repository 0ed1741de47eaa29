"""The command line's parser: one builder per group of commands, and the options they share
(the audit log, the publisher's transfer, the archive's).
"""

from __future__ import annotations

import argparse
import functools
import math
from collections.abc import Callable

from skewtape_pipeline.cli.mirror_commands import (
    cmd_apply_delta,
    cmd_audit_verify,
    cmd_catch_up,
    cmd_diff,
    cmd_fetch,
    cmd_sample,
    cmd_sync,
    cmd_verify,
)
from skewtape_pipeline.cli.tick_commands import (
    cmd_archive_month,
    cmd_compact_ticks,
    cmd_prune_versions,
    cmd_query,
    cmd_rebuild_catalog,
    cmd_remove_days,
    cmd_retier,
    cmd_show,
    cmd_tag,
    cmd_verify_archive,
    cmd_versions,
)
from skewtape_pipeline.errors import quoted
from skewtape_pipeline.ticks.input_formats import INPUT_FORMATS


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


DESCRIPTION = "The skewtape-pipeline command line: a thin shell over the core functions."
"""The first line of ``--help``."""


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="skewtape-pipeline", description=DESCRIPTION)
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
