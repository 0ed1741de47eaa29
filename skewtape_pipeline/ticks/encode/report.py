"""The per-symbol-day compaction report, and the honest compression ratio it carries.

A ratio is a statement about two measured numbers; the report says which baseline the raw size
is (``raw_size_basis``) and whether the stated target was met. Standard library only.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any

from skewtape_pipeline.errors import ConfigError

DEFAULT_TARGET_RATIO = 5.0

RAW_SIZE_BASIS_SOURCE_FILE = "source_file"
"""The whole source file's bytes (the file held exactly this symbol-day)."""
RAW_SIZE_BASIS_SOURCE_ROWS = "source_file_rows"
"""The bytes of the source file's lines that hold this symbol-day's ticks (header excluded)."""
RAW_SIZE_BASIS_SUPPLIED = "supplied"
"""A size the caller measured and passed in."""
RAW_SIZE_BASIS_CANONICAL_CSV = "canonical_csv"
"""The canonical CSV (``timestamp_nanos,price,quantity,side``, header) serialized and measured."""

RAW_SIZE_BASES = (
    RAW_SIZE_BASIS_SOURCE_FILE,
    RAW_SIZE_BASIS_SOURCE_ROWS,
    RAW_SIZE_BASIS_SUPPLIED,
    RAW_SIZE_BASIS_CANONICAL_CSV,
)


@dataclass(frozen=True)
class TickStorageCompactionReport:
    """What one compaction wrote, measured from the written bytes.

    ``codec``, ``compression_level`` and ``encodings`` come from the written file's own metadata
    (Parquet footer; for TKC1 the blob's recorded codec), never from what was requested.
    ``compression_ratio`` is ``raw_size_bytes / compacted_size_bytes`` and means nothing without
    ``raw_size_basis``. ``timestamp_unit`` is the unit the file stores timestamps at, read from
    the written file (``ns`` for TKC1, which always stores nanoseconds).
    ``price_float_noise_normalized``/``quantity_float_noise_normalized`` count the ticks whose
    digits beyond the scale were float noise (stored rounded to the scale; not loss).
    """

    symbol: str
    date: str | None
    tick_count: int
    raw_size_bytes: int
    raw_size_basis: str
    compacted_size_bytes: int
    compression_ratio: float
    target_compression_ratio: float
    meets_compression_target: bool
    archive_format: str
    codec: str
    compression_level: int | None
    encodings: dict[str, list[str]]
    price_scale: int
    quantity_scale: int
    price_precision_loss_ticks: int
    quantity_precision_loss_ticks: int
    reordered_ticks: int
    tier: str
    age_days: int
    tier_policy: dict[str, Any]
    round_trip_verified: bool
    path: str | None
    seconds: float
    timestamp_unit: str = "ns"
    notes: list[str] = field(default_factory=list)
    price_float_noise_normalized: int = 0
    quantity_float_noise_normalized: int = 0

    @property
    def precision_loss_ticks(self) -> int:
        """Ticks whose price or quantity was rounded to the configured scale (loss allowed)."""
        return self.price_precision_loss_ticks + self.quantity_precision_loss_ticks

    @property
    def float_noise_normalized(self) -> int:
        """Prices plus quantities whose float noise was rounded away (not precision loss)."""
        return self.price_float_noise_normalized + self.quantity_float_noise_normalized

    @property
    def space_savings_pct(self) -> float:
        """``(1 - compacted / raw) * 100``."""
        return (1.0 - self.compacted_size_bytes / self.raw_size_bytes) * 100.0

    def noted(self, *extra: str) -> TickStorageCompactionReport:
        """This report with its notes: :func:`report_notes` of its own fields, then ``extra``
        (e.g. what a recompaction replaced)."""
        return replace(self, notes=[*report_notes(self), *extra])

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of every field plus the derived savings, the total loss count and
        the total float noise count."""
        data = asdict(self)
        data["space_savings_pct"] = self.space_savings_pct
        data["precision_loss_ticks"] = self.precision_loss_ticks
        data["float_noise_normalized"] = self.float_noise_normalized
        return data


def report_notes(report: TickStorageCompactionReport) -> list[str]:
    """One line for each thing a reader of ``report`` should not miss: float noise rounded
    away, precision lost by the caller's leave, ticks reordered, a ratio below its target."""
    notes = []
    for count, what, scale in (
        (report.price_float_noise_normalized, "price(s)", report.price_scale),
        (report.quantity_float_noise_normalized, "quantity(ies)", report.quantity_scale),
    ):
        if count:
            notes.append(
                f"{count} {what} carried float noise beyond {scale} decimals (e.g. "
                "150.15000000000003); stored rounded to the scale, not precision loss"
            )
    if report.price_precision_loss_ticks:
        notes.append(
            f"{report.price_precision_loss_ticks} price(s) rounded half-even to "
            f"{report.price_scale} decimals (loss allowed by the caller; the dropped digits "
            "are not recoverable)"
        )
    if report.quantity_precision_loss_ticks:
        notes.append(
            f"{report.quantity_precision_loss_ticks} quantity(ies) rounded half-even to "
            f"{report.quantity_scale} decimals (loss allowed by the caller)"
        )
    if report.reordered_ticks:
        notes.append(f"{report.reordered_ticks} tick(s) moved by the explicit timestamp sort")
    ratio, target = report.compression_ratio, report.target_compression_ratio
    if ratio < target:
        notes.append(
            f"compression ratio {ratio:.2f} is below the target {target:.2f} "
            f"(baseline: {report.raw_size_basis})"
        )
    return notes


def check_raw_size(raw_size_bytes: object) -> int:
    """Return ``raw_size_bytes`` if it is a positive integer, else raise ConfigError."""
    if (
        not isinstance(raw_size_bytes, int)
        or isinstance(raw_size_bytes, bool)
        or raw_size_bytes <= 0
    ):
        raise ConfigError(
            f"raw_size_bytes = {raw_size_bytes!r}: expected a measured size, an integer > 0"
        )
    return raw_size_bytes


def check_target_ratio(target: object) -> float:
    """Return ``target`` as a float if it is a finite number > 0, else raise ConfigError."""
    if (
        not isinstance(target, int | float)
        or isinstance(target, bool)
        or not 0 < float(target) < float("inf")
    ):
        raise ConfigError(f"target_ratio = {target!r}: expected a finite number > 0")
    return float(target)


def compression_ratio(raw_size_bytes: int, compacted_size_bytes: int) -> float:
    """``raw / compacted``; both must be positive (ConfigError otherwise)."""
    check_raw_size(raw_size_bytes)
    if compacted_size_bytes <= 0:
        raise ConfigError(f"compacted_size_bytes = {compacted_size_bytes!r}: expected > 0")
    return raw_size_bytes / compacted_size_bytes
