"""Symbol-days gathered from a stream of chunks in bounded memory (external partitioning).

A file sorted by time interleaves every symbol, and a symbol-day is complete only once the
whole file was read, so its rows arrive as pieces, chunk after chunk. :class:`SymbolDayRouter`
keeps the pieces of every symbol-day in memory until they exceed ``memory_bytes``, then
writes all of them to one Arrow IPC file (a *run*) in a spill folder of the archive's staging
folder and lets them go, as DuckDB and Polars spill the partitions of an out-of-core group-by.
:meth:`SymbolDayRouter.pieces` hands a symbol-day's pieces back in the order they were added
(runs first, oldest first, then what is still in memory), each with the scales its rows are
expressed in (a chunk's scales are those its own data needed).

The spill folder is named by :func:`~skewtape_pipeline.fsio.unique_temp_name` (host, process):
:func:`remove_orphaned_staging` removes the folders and staged files of crashed processes
before a new compaction, and :meth:`SymbolDayRouter.close` removes its own.
"""

from __future__ import annotations

import shutil
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from skewtape_pipeline import fsio

TICK_COLUMNS = pa.schema(
    [("ts_ns", pa.int64()), ("price", pa.int64()), ("quantity", pa.int64()), ("side", pa.int8())]
)
MARKER_COLUMNS = pa.schema(
    [(name, pa.bool_()) for name in
     ("price_lossy", "quantity_lossy", "price_noise", "quantity_noise")]
)  # fmt: skip
"""Per-row markers of a TickBatch (rounded with loss; float noise rounded away): bit-packed."""
PIECE_SCHEMA = pa.unify_schemas([TICK_COLUMNS, MARKER_COLUMNS])
ROW_BYTES = 26
"""Bytes a routed tick holds in memory (three int64 columns, an int8 side, four bits)."""


@dataclass(frozen=True)
class Piece:
    """Rows of one symbol-day from one chunk (or several, concatenated when spilled), with
    the price and quantity scales their units are at."""

    batch: pa.RecordBatch
    price_scale: int
    quantity_scale: int


@dataclass(frozen=True)
class _Spilled:
    run: int
    index: int
    price_scale: int
    quantity_scale: int


class SymbolDayRouter:
    """Pieces of symbol-days (keyed by an int) held in at most ``memory_bytes`` of memory,
    the rest spilled to runs in the folder ``spill_folder()`` returns (created on the first
    spill). Pieces have the columns of :data:`PIECE_SCHEMA`. Use as a context manager, or call
    :meth:`close`."""

    def __init__(self, spill_folder: Callable[[], Path], *, memory_bytes: int) -> None:
        self.schema = PIECE_SCHEMA
        self.memory_bytes = memory_bytes
        self.held_bytes = 0
        self.spilled_bytes = 0
        self._spill_folder = spill_folder
        self._folder: Path | None = None
        self._memory: dict[int, list[Piece]] = defaultdict(list)
        self._spilled: dict[int, list[_Spilled]] = defaultdict(list)
        self._runs: list[Path] = []
        self._readers: dict[int, pa.ipc.RecordBatchFileReader] = {}

    def __enter__(self) -> SymbolDayRouter:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def add(self, key: int, piece: Piece) -> None:
        """Hold ``piece`` for symbol-day ``key``; spill everything held once over budget."""
        self._memory[key].append(piece)
        self.held_bytes += piece.batch.num_rows * ROW_BYTES
        if self.held_bytes > self.memory_bytes:
            self.spill()

    def spill(self) -> None:
        """Write every piece held in memory to a new run and let them go."""
        if not self._memory:
            return
        if self._folder is None:
            self._folder = self._spill_folder()
            self._folder.mkdir(parents=True)
        run = len(self._runs)
        path = self._folder / f"run-{run}.arrow"
        index = 0
        with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, self.schema) as writer:
            for key, pieces in self._memory.items():
                for piece in _merged(pieces):
                    writer.write_batch(piece.batch)
                    spilled = _Spilled(run, index, piece.price_scale, piece.quantity_scale)
                    self._spilled[key].append(spilled)
                    index += 1
        self._runs.append(path)
        self.spilled_bytes += self.held_bytes
        self._memory.clear()
        self.held_bytes = 0

    def pieces(self, key: int) -> Iterator[Piece]:
        """The pieces of symbol-day ``key`` in the order they were added."""
        for spilled in self._spilled.get(key, ()):
            batch = self._reader(spilled.run).get_batch(spilled.index)
            yield Piece(batch, spilled.price_scale, spilled.quantity_scale)
        yield from self._memory.get(key, ())

    def drop(self, key: int) -> None:
        """Forget symbol-day ``key`` (its memory is let go; its spilled rows stay until
        :meth:`close`)."""
        held = self._memory.pop(key, [])
        self.held_bytes -= sum(piece.batch.num_rows for piece in held) * ROW_BYTES
        self._spilled.pop(key, None)

    def close(self) -> None:
        """Let every piece go and remove the spill folder."""
        self._memory.clear()
        self._readers.clear()
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)
            self._folder = None

    def _reader(self, run: int) -> pa.ipc.RecordBatchFileReader:
        if run not in self._readers:
            self._readers[run] = pa.ipc.open_file(pa.OSFile(str(self._runs[run])))
        return self._readers[run]


def _merged(pieces: list[Piece]) -> Iterator[Piece]:
    """Consecutive pieces at the same scales as one piece each (fewer, larger spilled
    batches)."""
    start = 0
    for stop in range(1, len(pieces) + 1):
        if stop == len(pieces) or _scales(pieces[stop]) != _scales(pieces[start]):
            group = pieces[start:stop]
            batch = (
                group[0].batch
                if len(group) == 1
                else pa.Table.from_batches([p.batch for p in group])
                .combine_chunks()
                .to_batches()[0]
            )
            yield Piece(batch, *_scales(group[0]))
            start = stop


def _scales(piece: Piece) -> tuple[int, int]:
    return piece.price_scale, piece.quantity_scale


SPILL_NAME = "spill"


def new_spill_folder(staging: Path) -> Path:
    """A spill folder's path in ``staging``, unique to this process and call (not created)."""
    return staging / fsio.unique_temp_name(SPILL_NAME)


def remove_orphaned_staging(staging: Path) -> int:
    """Remove the spill folders and staged files a crashed process of this host left in
    ``staging`` (live processes' are kept). Returns how many were removed."""
    orphans = fsio.orphaned_temps(staging)
    for path in orphans:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
    return len(orphans)
