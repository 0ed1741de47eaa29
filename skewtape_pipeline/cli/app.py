"""The skewtape-pipeline command line: a thin shell over the core functions.

Exit codes: 0 on success, 2 when the input is refused (a one-line ``error: ...`` on stderr, nothing
changed on disk), 1 on an operating-system error (a full disk, ...; one line naming the file).
``--json`` prints the result object.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import select
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

from skewtape_pipeline.cli.output import error_line
from skewtape_pipeline.cli.parser import build_parser
from skewtape_pipeline.errors import ConfigError, SkewtapeError
from skewtape_pipeline.fsio import refuse_missing_folder_above

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
    with _noting_ctrl_c() as ctrl_c:
        try:
            return _run(argv)
        except RuntimeError:
            if not ctrl_c:
                raise
            # Ctrl-C inside DuckDB: it stops the statement and raises its own error (a
            # RuntimeError, "Query interrupted") in place of the KeyboardInterrupt; any other
            # error after a Ctrl-C is still shown as the error it is
            print(INTERRUPTED, file=sys.stderr)
            return EXIT_INTERRUPTED


@contextlib.contextmanager
def _noting_ctrl_c() -> Iterator[list[int]]:
    """A list that holds the signal once Ctrl-C (SIGINT) arrived while the block ran; Python's
    handler still raises KeyboardInterrupt. Left alone where SIGINT is not Python's (ignored,
    as in a non-interactive shell's background) or off the main thread."""
    seen: list[int] = []
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    ):
        yield seen
        return

    def note(signum: int, frame: object) -> None:
        seen.append(signum)
        signal.default_int_handler(signum, frame)

    signal.signal(signal.SIGINT, note)
    try:
        yield seen
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def _run(argv: Sequence[str] | None) -> int:
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
