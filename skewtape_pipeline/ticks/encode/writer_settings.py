"""How a Parquet tick file is written: the codec and its level, how candidate encodings are
measured, row group size; and the writer settings of each storage tier by default.

Hot favours speed (a low zstd level, encodings chosen on a small sample), cold favours size
(a high level, encodings chosen on a large sample). Which tier a batch goes to, where the
tier's files live and how they are laid out are the archive's business
(``ticks.archive.store.policy``); the archive's per-tier settings extend these.

Imports only the standard library and ``skewtape_pipeline.errors``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from skewtape_pipeline.errors import ConfigError, checked_flag

COMPRESSION_LEVELS: Mapping[str, tuple[int, int] | None] = {
    "zstd": (1, 22),
    "gzip": (1, 9),
    "brotli": (0, 11),
    "lz4": None,
    "snappy": None,
    "none": None,
}
"""Parquet codecs a writer may use, with their level range (None: the codec takes no level)."""


@dataclass(frozen=True)
class WriterSettings:
    """How one Parquet tick file is written.

    Parameters
    ----------
    compression
        Parquet codec, one of :data:`COMPRESSION_LEVELS` (default ``zstd``).
    compression_level
        Codec level; must be None for codecs without levels.
    encoding_sample_rows
        Rows (from the start of the batch) on which candidate encodings of price and quantity
        are measured; 0 measures on the whole batch.
    row_group_size
        Maximum rows per Parquet row group.
    byte_stream_split
        Offer BYTE_STREAM_SPLIT as a measured candidate for price and quantity (INT64 columns,
        plain integers and INT64-backed decimals alike; DuckDB 2.0 and pyarrow read both
        exactly). Turn it off when the archive must be read by engines that predate Parquet
        format 2.11's integer BYTE_STREAM_SPLIT (e.g. Spark before 4.0).

    Raises
    ------
    ConfigError
        On an unknown codec, a level outside the codec's range, or a negative/zero size.
    """

    compression: str = "zstd"
    compression_level: int | None = 3
    encoding_sample_rows: int = 65_536
    row_group_size: int = 1_048_576
    byte_stream_split: bool = True

    def __post_init__(self) -> None:
        self._check_codec()
        if not is_int(self.encoding_sample_rows) or self.encoding_sample_rows < 0:
            raise ConfigError(
                f"encoding_sample_rows = {self.encoding_sample_rows!r}: "
                "expected an integer >= 0 (0: the whole batch)"
            )
        if not is_int(self.row_group_size) or self.row_group_size < 1:
            raise ConfigError(f"row_group_size = {self.row_group_size!r}: expected an integer >= 1")
        checked_flag(self.byte_stream_split, "byte_stream_split")

    def _check_codec(self) -> None:
        if not isinstance(self.compression, str) or self.compression not in COMPRESSION_LEVELS:
            raise ConfigError(
                f"compression = {self.compression!r}: expected one of "
                f"{', '.join(COMPRESSION_LEVELS)}"
            )
        level_range = COMPRESSION_LEVELS[self.compression]
        level = self.compression_level
        if level_range is None:
            if level is not None:
                raise ConfigError(
                    f"compression_level = {level!r}: {self.compression} takes no level; omit it"
                )
        elif not is_int(level) or not level_range[0] <= level <= level_range[1]:
            raise ConfigError(
                f"compression_level = {level!r}: expected an integer in "
                f"{level_range[0]}..{level_range[1]} for {self.compression}"
            )


def is_int(value: object) -> bool:
    """True for an int that is not a bool (a TOML ``true`` is no row count)."""
    return isinstance(value, int) and not isinstance(value, bool)


HOT_WRITER = WriterSettings(compression_level=1, encoding_sample_rows=65_536)
"""The hot tier's writer by default: zstd 1, encodings measured on 64 Ki rows."""
WARM_WRITER = WriterSettings(compression_level=9, encoding_sample_rows=262_144)
"""The warm tier's writer by default: zstd 9, encodings measured on 256 Ki rows."""
COLD_WRITER = WriterSettings(compression_level=19, encoding_sample_rows=1_048_576)
"""The cold tier's writer by default: zstd 19, encodings measured on 1 Mi rows."""
