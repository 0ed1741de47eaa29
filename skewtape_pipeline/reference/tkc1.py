"""TKC1: the reference model of the encoding step (delta + column-major + general codec).

This is a model for reasoning about and testing the encoding mechanics, and a yardstick for
benchmarks; it is NOT the archive format. No query engine reads a TKC1 blob. The archive is
Parquet (:mod:`skewtape_pipeline.ticks.encode.parquet_file`), which specifies the same techniques
natively (DELTA_BINARY_PACKED, ZSTD) and stays readable by DuckDB, pyarrow and Spark.

Layout (big-endian), exactly ``14 + n * 25`` bytes::

    header   magic b"TKC1" (4) | format version (1) | price scale decimals (1) | tick count (8)
    column   n x int64 timestamp deltas  (first element absolute)
    column   n x int64 scaled-price deltas (first element absolute)
    column   n x int64 quantities
    column   n x uint8 side codes (0 UNKNOWN, 1 BUY, 2 SELL)

Prices are integers scaled by ``10**price_scale``. A float or decimal-string price is judged with
the float-noise rule of :mod:`skewtape_pipeline.ticks.encode.decimals` (``150.15000000000003`` at 4
decimals is representation noise, not loss; ``1.23456`` at 4 decimals is loss); a Decimal or int
is exact. Loss is refused with
:class:`~skewtape_pipeline.errors.PrecisionLossError` unless allowed, and then counted.

The codec wrappers record the codec actually used and never fall back: asking for zstd
without the ``zstandard`` package is a :class:`~skewtape_pipeline.errors.ConfigError`.

It uses the product's exact decimals (:mod:`skewtape_pipeline.ticks.encode.decimals`) and reports;
otherwise standard library only (``zstandard`` is imported only when zstd is asked for).
"""

from __future__ import annotations

import array
import itertools
import struct
import sys
import time
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from decimal import Decimal

from skewtape_pipeline.errors import (
    ConfigError,
    PrecisionLossError,
    RoundTripError,
    TickFormatError,
    TickValidationError,
)
from skewtape_pipeline.ticks.archive.store.policy import TierPolicy, check_age_days
from skewtape_pipeline.ticks.encode.decimals import (
    INT64_MAX,
    INT64_MIN,
    MAX_PRICE_SCALE,
    check_int64,
    check_price_scale,
    format_units,
    quantize_price,
    units_to_decimal,
)
from skewtape_pipeline.ticks.encode.report import (
    DEFAULT_TARGET_RATIO,
    RAW_SIZE_BASIS_CANONICAL_CSV,
    RAW_SIZE_BASIS_SUPPLIED,
    TickStorageCompactionReport,
    check_raw_size,
    check_target_ratio,
    compression_ratio,
)
from skewtape_pipeline.ticks.encode.sides import SIDE_CODES, SIDE_NAMES
from skewtape_pipeline.ticks.encode.sources import CSV_HEADER

FORMAT_MAGIC = b"TKC1"
FORMAT_VERSION = 1
HEADER = struct.Struct(">4sBBQ")
HEADER_SIZE = HEADER.size
BYTES_PER_TICK = 3 * 8 + 1
CODEC_LEVELS = {"zlib": (0, 9), "zstd": (1, 22)}
DEFAULT_LEVELS = {"zlib": 9, "zstd": 19}


@dataclass(frozen=True)
class Tick:
    """One trade. ``price`` may be a Decimal, int, float or decimal string; ``side`` a side name."""

    timestamp_nanos: int
    price: Decimal | float | int | str
    quantity: int
    side: str


@dataclass(frozen=True)
class Header:
    """The 14-byte TKC1 header."""

    magic: bytes
    version: int
    price_scale: int
    tick_count: int


@dataclass(frozen=True)
class EncodedBatch:
    """An uncompressed TKC1 buffer and the number of prices rounded to fit the scale."""

    buffer: bytes
    price_scale: int
    tick_count: int
    price_precision_loss_ticks: int


@dataclass(frozen=True)
class DecodedBatch:
    """Ticks decoded from a TKC1 buffer; prices are exact Decimals at ``price_scale``."""

    price_scale: int
    ticks: list[Tick]


@dataclass(frozen=True)
class CompressedBlob:
    """Compressed bytes together with the codec and level that actually produced them."""

    codec: str
    level: int
    data: bytes


# --- encode / decode ----------------------------------------------------------------------------


def encode_ticks(
    ticks: Sequence[Tick], *, price_scale: int = 4, allow_precision_loss: bool = False
) -> EncodedBatch:
    """Validate ``ticks`` and encode them as a TKC1 buffer.

    Raises
    ------
    TickValidationError
        A timestamp that is not an int or goes backwards, a non-finite price, a quantity that is
        not a non-negative int, a side that is not BUY, SELL or UNKNOWN (names the row).
    PrecisionLossError
        A price has more decimals than ``price_scale`` and ``allow_precision_loss`` is False.
    """
    check_price_scale(price_scale)
    timestamps: list[int] = []
    price_units: list[int] = []
    quantities: list[int] = []
    side_codes = bytearray()
    lossy_rows = 0
    for row, tick in enumerate(ticks):
        _check_tick_fields(tick, row)
        if timestamps and tick.timestamp_nanos < timestamps[-1]:
            raise TickValidationError(
                f"timestamp {tick.timestamp_nanos} is before the previous one ({timestamps[-1]}); "
                "sort the batch upstream, deliberately and counted, before encoding",
                row=row,
                field="timestamp_nanos",
            )
        units, lossy = quantize_price(tick.price, price_scale, row=row)
        if lossy and not allow_precision_loss:
            raise PrecisionLossError(
                f"price {tick.price!r} has more than {price_scale} decimals; raise price_scale "
                "or allow the loss explicitly",
                row=row,
                field="price",
            )
        lossy_rows += lossy
        timestamps.append(tick.timestamp_nanos)
        price_units.append(units)
        quantities.append(tick.quantity)
        side_codes.append(SIDE_CODES[tick.side])
    buffer = encode_columns(
        timestamps, price_units, quantities, bytes(side_codes), price_scale=price_scale
    )
    return EncodedBatch(buffer, price_scale, len(timestamps), lossy_rows)


def _check_tick_fields(tick: Tick, row: int) -> None:
    ts = tick.timestamp_nanos
    if not isinstance(ts, int) or isinstance(ts, bool):
        raise TickValidationError(
            f"timestamp {ts!r} is not an integer number of nanoseconds",
            row=row,
            field="timestamp_nanos",
        )
    check_int64(ts, row=row, field="timestamp_nanos", what=f"timestamp {ts}")
    qty = tick.quantity
    if not isinstance(qty, int) or isinstance(qty, bool):
        raise TickValidationError(f"quantity {qty!r} is not an integer", row=row, field="quantity")
    if qty < 0:
        raise TickValidationError(
            f"quantity {qty} is negative; expected >= 0", row=row, field="quantity"
        )
    check_int64(qty, row=row, field="quantity", what=f"quantity {qty}")
    if tick.side not in SIDE_CODES:
        raise TickValidationError(
            f"side {tick.side!r} is not one of {', '.join(SIDE_NAMES)}; map the feed's "
            "vocabulary explicitly (UNKNOWN when it does not classify the aggressor)",
            row=row,
            field="side",
        )


def encode_columns(
    timestamps: Sequence[int],
    price_units: Sequence[int],
    quantities: Sequence[int],
    side_codes: bytes | Sequence[int],
    *,
    price_scale: int,
) -> bytes:
    """Encode already-exact columns (scaled price integers, side codes) as a TKC1 buffer.

    Does not re-validate order, sides or signs: :func:`encode_ticks` does. Raises
    TickValidationError when a delta does not fit int64, ConfigError on a bad scale.
    """
    check_price_scale(price_scale)
    count = len(timestamps)
    if not len(price_units) == len(quantities) == len(side_codes) == count:
        raise TickValidationError("columns have different lengths")
    header = HEADER.pack(FORMAT_MAGIC, FORMAT_VERSION, price_scale, count)
    return b"".join(
        (
            header,
            _pack_int64(_deltas(timestamps), field="timestamp_nanos"),
            _pack_int64(_deltas(price_units), field="price"),
            _pack_int64(quantities, field="quantity"),
            bytes(side_codes),
        )
    )


def _deltas(values: Sequence[int]) -> list[int]:
    return [values[0], *(b - a for a, b in itertools.pairwise(values))] if values else []


def _pack_int64(values: Sequence[int], *, field: str) -> bytes:
    try:
        column = array.array("q", values)
    except OverflowError:
        row = next(i for i, v in enumerate(values) if not INT64_MIN <= v <= INT64_MAX)
        raise TickValidationError(
            f"{field} delta {values[row]} does not fit a signed 64-bit field", row=row, field=field
        ) from None
    if sys.byteorder == "little":
        column.byteswap()
    return column.tobytes()


def _unpack_int64(buffer: bytes, offset: int, count: int) -> list[int]:
    column = array.array("q")
    column.frombytes(buffer[offset : offset + 8 * count])
    if sys.byteorder == "little":
        column.byteswap()
    return column.tolist()


def read_header(buffer: bytes) -> Header:
    """Parse and check the header; the buffer must be exactly ``14 + count * 25`` bytes.

    Raises
    ------
    TickFormatError
        Too short for a header, a bad magic, an unsupported version or scale, or a length
        that disagrees with the tick count (truncated or over-long).
    """
    if len(buffer) < HEADER_SIZE:
        raise TickFormatError(
            f"TKC1 buffer of {len(buffer)} bytes is shorter than the {HEADER_SIZE}-byte header"
        )
    magic, version, price_scale, count = HEADER.unpack_from(buffer, 0)
    if magic != FORMAT_MAGIC:
        raise TickFormatError(f"bad magic {magic!r}; expected {FORMAT_MAGIC!r}")
    if version != FORMAT_VERSION:
        raise TickFormatError(
            f"format version {version} is not supported; this decoder reads {FORMAT_VERSION}"
        )
    if price_scale > MAX_PRICE_SCALE:
        raise TickFormatError(f"price scale {price_scale} is above {MAX_PRICE_SCALE}")
    expected = HEADER_SIZE + count * BYTES_PER_TICK
    if len(buffer) != expected:
        kind = "truncated" if len(buffer) < expected else "over-long"
        raise TickFormatError(
            f"{kind} TKC1 buffer: header declares {count} ticks ({expected} bytes), "
            f"got {len(buffer)} bytes"
        )
    return Header(magic, version, price_scale, count)


def decode_columns(buffer: bytes) -> tuple[Header, list[int], list[int], list[int], bytes]:
    """Decode to ``(header, timestamps, price_units, quantities, side_codes)`` (deltas undone)."""
    header = read_header(buffer)
    count = header.tick_count
    offset = HEADER_SIZE
    ts_deltas = _unpack_int64(buffer, offset, count)
    price_deltas = _unpack_int64(buffer, offset + 8 * count, count)
    quantities = _unpack_int64(buffer, offset + 16 * count, count)
    side_codes = bytes(buffer[offset + 24 * count :])
    bad = next((i for i, code in enumerate(side_codes) if code >= len(SIDE_NAMES)), None)
    if bad is not None:
        raise TickFormatError(f"tick {bad}: side code {side_codes[bad]} is not 0, 1 or 2")
    return header, _running_sum(ts_deltas), _running_sum(price_deltas), quantities, side_codes


def _running_sum(deltas: list[int]) -> list[int]:
    total = 0
    out = []
    for delta in deltas:
        total += delta
        out.append(total)
    return out


def decode_ticks(buffer: bytes) -> DecodedBatch:
    """Decode a TKC1 buffer into ticks with exact Decimal prices at the header's scale.

    Raises TickFormatError on a malformed buffer (see :func:`read_header`).
    """
    header, timestamps, price_units, quantities, side_codes = decode_columns(buffer)
    scale = header.price_scale
    ticks = [
        Tick(ts, units_to_decimal(units, scale), qty, SIDE_NAMES[code])
        for ts, units, qty, code in zip(
            timestamps, price_units, quantities, side_codes, strict=True
        )
    ]
    return DecodedBatch(scale, ticks)


def repack_row_major(buffer: bytes) -> bytes:
    """The same header and deltas, interleaved row by row (for the columnar-payoff comparison)."""
    header = read_header(buffer)
    count = header.tick_count
    offset = HEADER_SIZE
    columns = [buffer[offset + 8 * count * k : offset + 8 * count * (k + 1)] for k in range(3)]
    sides = buffer[offset + 24 * count :]
    rows = bytearray(buffer[:HEADER_SIZE])
    for i in range(count):
        for column in columns:
            rows += column[8 * i : 8 * i + 8]
        rows.append(sides[i])
    return bytes(rows)


# --- codecs -------------------------------------------------------------------------------------


def compress(payload: bytes, *, codec: str = "zlib", level: int | None = None) -> CompressedBlob:
    """Compress with exactly ``codec`` and record it; never falls back to another codec.

    Raises
    ------
    ConfigError
        An unknown codec or level, or ``zstd`` asked for without the ``zstandard`` package.
    """
    if codec not in CODEC_LEVELS:
        raise ConfigError(f"codec = {codec!r}: expected one of {', '.join(CODEC_LEVELS)}")
    level = DEFAULT_LEVELS[codec] if level is None else level
    low, high = CODEC_LEVELS[codec]
    if not isinstance(level, int) or isinstance(level, bool) or not low <= level <= high:
        raise ConfigError(f"level = {level!r}: expected an integer in {low}..{high} for {codec}")
    if codec == "zlib":
        return CompressedBlob("zlib", level, zlib.compress(payload, level))
    zstandard = _require_zstandard()
    return CompressedBlob("zstd", level, zstandard.ZstdCompressor(level=level).compress(payload))


def decompress(blob: CompressedBlob) -> bytes:
    """Decompress with the codec the blob records (ConfigError if that codec is unavailable)."""
    if blob.codec == "zlib":
        return zlib.decompress(blob.data)
    if blob.codec == "zstd":
        return _require_zstandard().ZstdDecompressor().decompress(blob.data)
    raise ConfigError(f"codec = {blob.codec!r}: expected one of {', '.join(CODEC_LEVELS)}")


def _require_zstandard():  # returns the optional zstandard module
    try:
        import zstandard
    except ImportError:
        raise ConfigError(
            "codec 'zstd' needs the zstandard package, which is not installed; install it or "
            "ask for codec 'zlib' (there is no silent fallback)"
        ) from None
    return zstandard


# --- baseline and compaction --------------------------------------------------------------------


def canonical_csv_text(ticks: Sequence[Tick], *, price_scale: int = 4) -> str:
    """The canonical CSV of ``ticks``: header, then ``timestamp_nanos,price,quantity,side`` rows
    with the price at exactly ``price_scale`` decimals. Validates and quantizes like the encoder
    (loss allowed: the baseline measures text, it does not judge it)."""
    lines = [CSV_HEADER]
    for row, tick in enumerate(ticks):
        _check_tick_fields(tick, row)
        units, _ = quantize_price(tick.price, price_scale, row=row)
        price = format_units(units, price_scale)
        lines.append(f"{tick.timestamp_nanos},{price},{tick.quantity},{tick.side}\n")
    return "".join(lines)


def canonical_csv_size_bytes(ticks: Sequence[Tick], *, price_scale: int = 4) -> int:
    """Bytes of :func:`canonical_csv_text` in UTF-8: measured by serializing, never estimated."""
    return len(canonical_csv_text(ticks, price_scale=price_scale).encode("utf-8"))


def compact_tkc1(
    symbol: str,
    ticks: Sequence[Tick],
    *,
    age_days: int,
    price_scale: int = 4,
    raw_size_bytes: int | None = None,
    codec: str = "zlib",
    level: int | None = None,
    policy: TierPolicy | None = None,
    target_ratio: float = DEFAULT_TARGET_RATIO,
    allow_precision_loss: bool = False,
    day: date | None = None,
) -> tuple[CompressedBlob, TickStorageCompactionReport]:
    """Encode, compress, verify (decode and compare) and report one batch in the TKC1 model.

    ``raw_size_bytes`` is the measured size of the source being replaced; without it the
    canonical CSV is serialized and measured, and ``raw_size_basis`` says which. Pure: writes
    nothing.

    Raises
    ------
    ConfigError
        ``age_days`` missing or negative, ``raw_size_bytes`` not positive, a bad codec/level,
        scale or target.
    TickValidationError, PrecisionLossError
        As :func:`encode_ticks`; also an empty batch.
    RoundTripError
        The blob did not decode to the validated ticks.
    """
    started = time.perf_counter()
    policy = policy if policy is not None else TierPolicy()
    tier = policy.tier_for(check_age_days(age_days))
    target = check_target_ratio(target_ratio)
    if raw_size_bytes is not None:
        check_raw_size(raw_size_bytes)
    if not ticks:
        raise TickValidationError("the batch is empty; there is nothing to archive")
    encoded = encode_ticks(
        ticks, price_scale=price_scale, allow_precision_loss=allow_precision_loss
    )
    blob = compress(encoded.buffer, codec=codec, level=level)
    _verify_blob(blob, ticks, price_scale)
    if raw_size_bytes is None:
        raw, basis = (
            canonical_csv_size_bytes(ticks, price_scale=price_scale),
            (RAW_SIZE_BASIS_CANONICAL_CSV),
        )
    else:
        raw, basis = raw_size_bytes, RAW_SIZE_BASIS_SUPPLIED
    ratio = compression_ratio(raw, len(blob.data))
    report = TickStorageCompactionReport(
        symbol=symbol,
        date=day.isoformat() if day else None,
        tick_count=encoded.tick_count,
        raw_size_bytes=raw,
        raw_size_basis=basis,
        compacted_size_bytes=len(blob.data),
        compression_ratio=ratio,
        target_compression_ratio=target,
        meets_compression_target=ratio >= target,
        archive_format="tkc1",
        codec=blob.codec,
        compression_level=blob.level,
        encodings={
            "timestamp_nanos": ["DELTA_INT64_BE"],
            "price": ["DELTA_INT64_BE"],
            "quantity": ["INT64_BE"],
            "side": ["UINT8"],
        },
        price_scale=price_scale,
        quantity_scale=0,
        price_precision_loss_ticks=encoded.price_precision_loss_ticks,
        quantity_precision_loss_ticks=0,
        reordered_ticks=0,
        tier=tier,
        age_days=age_days,
        tier_policy=policy.to_dict(),
        round_trip_verified=True,
        path=None,
        seconds=time.perf_counter() - started,
    ).noted()
    return blob, report


def _verify_blob(blob: CompressedBlob, ticks: Sequence[Tick], price_scale: int) -> None:
    decoded = decode_ticks(decompress(blob))
    if decoded.price_scale != price_scale or len(decoded.ticks) != len(ticks):
        raise RoundTripError(
            f"TKC1 blob decodes to {len(decoded.ticks)} ticks at scale {decoded.price_scale}; "
            f"expected {len(ticks)} at scale {price_scale}"
        )
    for row, (given, back) in enumerate(zip(ticks, decoded.ticks, strict=True)):
        units, _ = quantize_price(given.price, price_scale, row=row)
        expected = Tick(
            given.timestamp_nanos, units_to_decimal(units, price_scale), given.quantity, given.side
        )
        if back != expected:
            raise RoundTripError(f"tick {row}: decoded {back!r}, expected {expected!r}")
