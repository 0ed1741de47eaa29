"""What every command shares: its result printed (text or ``--json``), its progress shown, its
error as one line, and the data root and month arguments read alike.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from skewtape_pipeline import progress
from skewtape_pipeline.audit import AUDIT_LOG_NAME
from skewtape_pipeline.errors import printable


def default_audit_log(history: Path) -> Path:
    """The data root's audit log: ``<root>/audit.jsonl`` for snapshots in ``<root>/history/``."""
    return history.resolve().parent / AUDIT_LOG_NAME


def audit_log_of(args: argparse.Namespace, history: Path) -> Path | None:
    if args.no_audit:
        return None
    return Path(args.audit_log) if args.audit_log else default_audit_log(history)


def print_result(args: argparse.Namespace, result: Any, summary: str) -> None:
    if args.json:
        print(json.dumps(as_json(result), indent=2, default=str))
    else:
        print(summary)


@contextlib.contextmanager
def showing_progress(args: argparse.Namespace) -> Iterator[None]:
    """Progress of the command's core call on standard error: a bar on a terminal, a line every
    few seconds otherwise, nothing with ``--json``."""
    line = progress.ProgressLine(sys.stderr, "files", label=args.command, enabled=not args.json)
    try:
        with progress.reporting(line.update):
            yield
    finally:
        line.finish()


def as_json(result: Any) -> Any:
    if isinstance(result, list):
        return [as_json(item) for item in result]
    return result.to_dict() if hasattr(result, "to_dict") else result


def data_root(args: argparse.Namespace) -> Path:
    """``--root``, else ``$SKEWTAPE_HOME``, else ``./data``. ConfigError naming SKEWTAPE_HOME,
    creating nothing, when it is a ``scheme://`` URL (``--root`` is refused as every path is,
    by :func:`refuse_url_arguments`), never a folder named after the scheme."""
    from skewtape_pipeline.locations import DATA_ROOT_EXPECTED, HOME_VARIABLE, refuse_url

    home = os.environ.get(HOME_VARIABLE)
    if args.root or not home:
        return Path(args.root or "data")
    return Path(refuse_url(home, HOME_VARIABLE, DATA_ROOT_EXPECTED))


def one_line(message: str) -> str:
    """``message`` on one line: its lines joined with ``; `` (DuckDB's errors span several, with
    a line of carets under the offending text, which is dropped)."""
    lines = [line.strip() for line in message.splitlines()]
    return "; ".join(line for line in lines if line and set(line) != {"^"})


def printed_line(text: str) -> str:
    """``text`` as one line a terminal may print: on one line (:func:`one_line`), control
    characters escaped (``errors.printable``), any URL in it redacted."""
    from skewtape_pipeline.locations import redact_urls

    return redact_urls(one_line(printable(text)))


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

    line = printed_line(str(exc))
    cut = len(line) - ERROR_LINE_HEAD - ERROR_LINE_TAIL
    if cut <= 0:
        return line
    return f"{line[:ERROR_LINE_HEAD]} ... ({cut} characters cut) ... {line[-ERROR_LINE_TAIL:]}"
