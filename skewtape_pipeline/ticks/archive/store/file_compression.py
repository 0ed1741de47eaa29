"""How well a consolidated (warm or cold) file compresses its ticks, measured, never estimated.

The compression target (5x by default) is about the archive's consolidated files: a hot file
holds one symbol-day (a median of 3 trades on prediction markets) and carries its own Parquet
footer, so it cannot reach the target, and is not meant to (it is cheap to rewrite). A
consolidated file's ratio is the canonical CSV bytes of its symbol-days (each serialized as a
compaction report measures it, header included) over the file's bytes. Below
:data:`MIN_TICKS_JUDGED` ticks a file's fixed costs (footer, page headers, dictionaries) still
decide its ratio, so a file that small is measured but not judged.
"""

from __future__ import annotations

from dataclasses import dataclass

from skewtape_pipeline.storage import TierFile, size_of
from skewtape_pipeline.ticks.archive.store.consolidate import read_consolidated_file
from skewtape_pipeline.ticks.encode.sources import canonical_csv_size_bytes

MIN_TICKS_JUDGED = 10_000
"""Fewest ticks a consolidated file must hold for the target to be judged on it (the real
Kalshi file's 16,281 ticks make three yearly cold files of 2,715 to 9,605 ticks at 6.0x to 6.5x;
the sample's 781 ticks, 3x)."""


@dataclass(frozen=True)
class FileCompression:
    """One consolidated file's measured compression."""

    path: TierFile
    ticks: int
    symbol_days: int
    raw_size_bytes: int
    """Canonical CSV bytes of its symbol-days, one CSV (with its header) per symbol-day."""
    size_bytes: int

    @property
    def ratio(self) -> float:
        return self.raw_size_bytes / self.size_bytes if self.size_bytes else 0.0

    def judged(self, min_ticks: int = MIN_TICKS_JUDGED) -> bool:
        """Whether the file holds enough ticks for the target to mean something."""
        return self.ticks >= min_ticks


def file_compression(path: TierFile) -> FileCompression:
    """Read the consolidated file at ``path`` (local or an object; page checksums verified) and
    measure it.

    Raises TickFormatError when it is not a consolidated tick file or is damaged.
    """
    parts = read_consolidated_file(path)
    return FileCompression(
        path=path,
        ticks=sum(len(part.batch) for part in parts),
        symbol_days=len(parts),
        raw_size_bytes=sum(canonical_csv_size_bytes(part.batch) for part in parts),
        size_bytes=size_of(path),
    )
