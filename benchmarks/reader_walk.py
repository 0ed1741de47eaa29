"""What a reader following ``Archive.retier`` (or ``Archive.compact``) through the code has to
open: the files entered and the returns to a file already left (issue 29's walk).

The walk is traced from a real run on a small archive (three symbols over six days, re-tiered
from hot to warm and cold), read as a person reads code:

- each call site is followed once (a loop's second pass, or a second call from the same line,
  is already read);
- only the package's own functions are followed; properties, dunder methods but ``__init__``
  and the mapping protocol (``items``, ``values``, ``keys``, ``get``) are read as data, not
  entered; ``faults.checkpoint`` and ``progress`` hooks are skipped (``--all`` follows them);
- a package function reached through another library's Python code (the body of a
  ``with core.locked(...)``'s context manager, through ``contextlib``) is followed from the
  package line that led there; the work the compaction hands to threads (its executors, its
  read-ahead) runs in the calling thread, at the line handing it over, as a reader reads it;
- ``store/`` is the floor: a store method is entered (its file counts) but not descended into,
  its contract read from its signature and docstring (``--full`` descends everywhere).

Printed: the files in the order first entered, how many, and the returns per file (entering a
file again after leaving it, by a call or by a return). Runs with the project's own
dependencies: ``python benchmarks/reader_walk.py [--verb compact] [--full] [--all]``.
"""

from __future__ import annotations

import argparse
import gc
import inspect
import sys
import tempfile
from collections import Counter
from concurrent.futures import Future
from datetime import date, timedelta
from pathlib import Path
from types import FrameType

from skewtape_pipeline.ticks.archive.handle import Archive
from skewtape_pipeline.ticks.archive.ops import compact, compact_plan
from skewtape_pipeline.ticks.archive.store.policy import TierPolicy, TierSettings
from skewtape_pipeline.ticks.encode.model import SchemaRequest
from skewtape_pipeline.ticks.encode.options import TickEncoding
from skewtape_pipeline.ticks.encode.sources import read_canonical

PACKAGE = str(Path(__import__("skewtape_pipeline").__file__).parent) + "/"
FIRST_DAY = date(2026, 1, 27)
DAYS = [FIRST_DAY + timedelta(days=3 * i) for i in range(6)]
POLICY = TierPolicy(
    hot_max_age_days=2,
    warm_max_age_days=10,
    warm=TierSettings(compression_level=3, consolidated_row_group_size=8),
    cold=TierSettings(compression_level=9, consolidated_row_group_size=8),
)
ENCODING = TickEncoding(SchemaRequest(price_scale=2))
MAPPING_PROTOCOL = {"items", "values", "keys", "get"}
HOOK_FILES = {"faults.py", "progress.py"}


class ReaderWalk:
    """A profile hook recording the files a reader enters from the first call of ``verb``."""

    def __init__(self, verb: str, *, full: bool, hooks: bool):
        self.verb, self.full, self.hooks = verb, full, hooks
        self.sites: set[tuple] = set()
        self.files: list[str] = []  # as the reader goes, consecutive repeats folded
        self.stack: list[tuple[str, bool, bool] | None] = []
        """(file, followed, its callees not) per package frame; None: another library's frame,
        seen through (its callees judged by the package frame below it)."""
        self._properties: dict = {}

    def __call__(self, frame: FrameType, event: str, _arg: object) -> None:
        if event == "call":
            self._call(frame)
        elif event == "return" and self.stack:
            self._return()

    def _call(self, frame: FrameType) -> None:
        path = frame.f_code.co_filename
        if not self.stack:
            if path.startswith(PACKAGE) and frame.f_code.co_name == self.verb:
                self._enter(path, floor=False)
            return
        if not path.startswith(PACKAGE):
            self.stack.append(None)
            return
        _, followed, closed = next(entry for entry in reversed(self.stack) if entry)
        caller = frame.f_back
        while not caller.f_code.co_filename.startswith(PACKAGE):  # the package line it came from
            caller = caller.f_back
        site = (caller.f_code, caller.f_lineno, frame.f_code)
        if followed and not closed and self._read(frame) and site not in self.sites:
            self.sites.add(site)
            self._enter(path, floor=not self.full and "/ticks/archive/store/" in path)
        else:
            self.stack.append((path, False, True))

    def _enter(self, path: str, *, floor: bool) -> None:
        self._step(path)
        self.stack.append((path, True, floor))

    def _return(self) -> None:
        popped = self.stack.pop()
        if popped and popped[1]:
            back = next((e[0] for e in reversed(self.stack) if e and e[1]), None)
            if back is not None:
                self._step(back)

    def _step(self, path: str) -> None:
        name = path[len(PACKAGE) :]
        if not self.files or self.files[-1] != name:
            self.files.append(name)

    def _read(self, frame: FrameType) -> bool:
        """Whether a reader opens this callee of the package: not data access, not a hook."""
        path, name = frame.f_code.co_filename, frame.f_code.co_name
        if not self.hooks and path[len(PACKAGE) :] in HOOK_FILES:
            return False
        if name in MAPPING_PROTOCOL or (name.startswith("__") and name != "__init__"):
            return False
        return not self._is_property(frame.f_code)

    def _is_property(self, code) -> bool:
        if code not in self._properties:
            functions = [f for f in gc.get_referrers(code) if inspect.isfunction(f)]
            self._properties[code] = any(
                isinstance(holder, property) for f in functions for holder in gc.get_referrers(f)
            )
        return self._properties[code]

    def returns(self) -> Counter:
        """Per file, how often the reader came back to it after leaving it."""
        seen: set[str] = set()
        back: Counter = Counter()
        for before, name in zip([None, *self.files], self.files, strict=False):
            if name in seen:
                back[name] += 1
            if before is not None:
                seen.add(before)
        return back


class InlineExecutor:
    """A ``ThreadPoolExecutor`` running each task at its ``submit``, in the calling thread."""

    def __init__(self, *_args: object, **_kwargs: object):
        pass

    def __enter__(self) -> InlineExecutor:
        return self

    def __exit__(self, *_exc: object) -> None:
        return None

    def submit(self, fn, /, *args, **kwargs) -> Future:
        future: Future = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # as a worker's error: raised by result()
            future.set_exception(exc)
        return future


def in_one_thread() -> None:
    """The compaction's threads run in the calling one (``sys.setprofile`` traces one thread):
    its executors' tasks at their ``submit``, its read-ahead in step with the reading."""
    compact.ThreadPoolExecutor = compact_plan.ThreadPoolExecutor = InlineExecutor
    compact_plan.read_ahead = lambda items, *, depth: items


def write_ticks(path: Path, symbols: tuple[str, ...], days: list[date]) -> Path:
    """A canonical CSV of 1 to 5 ticks per symbol-day (the tests' thin archive's shape)."""
    lines = ["timestamp_nanos,price,quantity,side,symbol"]
    for symbol in symbols:
        for day in days:
            start = (day - date(1970, 1, 1)).days * 86_400 * 10**9 + 36_000 * 10**9
            for i in range(1 + (len(symbol) + day.day) % 5):
                side = ("BUY", "SELL", "UNKNOWN")[i % 3]
                lines.append(f"{start + 1_000 * i},50.{10 + i},{1 + i},{side},{symbol}")
    path.write_text("\n".join(lines) + "\n")
    return path


def build(folder: Path, as_of: date) -> Archive:
    """An archive of three symbols over :data:`DAYS`, compacted hot at ``as_of``."""
    archive = Archive(folder / "archive", policy=POLICY)
    csv = write_ticks(folder / "ticks.csv", ("CL/F", "ES", "KX-25MAR"), DAYS)
    archive.compact(read_canonical(csv), as_of=as_of, encoding=ENCODING)
    return archive


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--verb", choices=("retier", "compact"), default="retier")
    parser.add_argument("--full", action="store_true", help="descend below store/ too")
    parser.add_argument("--all", action="store_true", help="follow the faults/progress hooks")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        archive = build(folder, as_of=DAYS[-1] + timedelta(days=1))
        walk = ReaderWalk(args.verb, full=args.full, hooks=args.all)
        in_one_thread()
        sys.setprofile(walk)
        try:
            if args.verb == "retier":
                archive.retier(as_of=DAYS[-1] + timedelta(days=14))
            else:
                source = read_canonical(write_ticks(folder / "zz.csv", ("ZZ",), DAYS[-1:]))
                archive.compact(source, as_of=DAYS[-1], encoding=ENCODING)
        finally:
            sys.setprofile(None)
    entered = list(dict.fromkeys(walk.files))
    returns = walk.returns()
    print(f"Archive.{args.verb}: {len(entered)} files entered, {sum(returns.values())} returns")
    for name in entered:
        print(f"  {name:45} returns {returns[name]}")


if __name__ == "__main__":
    main()
