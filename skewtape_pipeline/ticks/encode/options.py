"""``TickEncoding``: how ticks are encoded into one archive file, fixed once per run.

Kept apart from how a compaction run goes (its memory limit, progress callbacks, symbol
filter: ``ops.compact_plan.CompactionRun``), as delta-rs keeps ``WriterProperties`` apart
from ``CommitProperties``. Knows no archive root.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from skewtape_pipeline.errors import ConfigError, checked_flag
from skewtape_pipeline.ticks.encode.model import SchemaRequest
from skewtape_pipeline.ticks.encode.report import DEFAULT_TARGET_RATIO, check_target_ratio
from skewtape_pipeline.ticks.encode.sides import resolve_side_map


@dataclass(frozen=True)
class TickEncoding:
    """How ticks are encoded: the schema the caller fixes (``schema``; a field left None is
    detected from the data, see :class:`SchemaRequest`), the side vocabulary of the input
    (``side_map``; None: the canonical BUY/SELL/UNKNOWN), whether a price or quantity finer
    than its scale may be rounded (``allow_precision_loss``; else it is refused, naming the
    row) and the compression ratio each report is measured against (``target_ratio``).

    Validated when built: ConfigError naming the field (a bad unit or scale, an empty or
    unknown side vocabulary, a target that is not a finite number > 0).
    """

    schema: SchemaRequest = field(default_factory=SchemaRequest)
    side_map: Mapping[str, str] | None = None
    allow_precision_loss: bool = False
    target_ratio: float = DEFAULT_TARGET_RATIO

    def __post_init__(self) -> None:
        if not isinstance(self.schema, SchemaRequest):
            raise ConfigError(f"schema = {self.schema!r}: expected a SchemaRequest")
        if self.side_map is not None:
            resolve_side_map(self.side_map)
        checked_flag(self.allow_precision_loss, "allow_precision_loss")
        check_target_ratio(self.target_ratio)


DEFAULT_ENCODING = TickEncoding()
"""Every schema field detected, the canonical sides, no rounding, the default target."""
