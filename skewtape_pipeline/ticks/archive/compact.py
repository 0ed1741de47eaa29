"""Compaction: split ticks into symbol-days (UTC), sort each explicitly (counted), validate,
write a verified Parquet file per symbol-day and report on it.

Entry points:

- :func:`compact_ticks` -- a canonical CSV/Parquet file -> one report per symbol-day;
- :func:`compact_source` -- the same for any
  :class:`~skewtape_pipeline.ticks.encode.sources.SourceTicks` (the real-file readers);
- :func:`compact_symbol_day` -- one already-built :class:`TickBatch` of one symbol-day (what an
  orchestration asset calls with fills read from a snapshot month file).

Bad input changes nothing on disk: every symbol-day of an input is converted and validated
before the first file is written.

``timestamp_unit`` (``ns``, ``us``, ``ms``, ``s``) and the price and quantity scales are the
archive's one schema: the archive root records them and refuses a batch at another one. By
default they are detected: the coarsest unit and the smallest scales that hold the data
exactly (Kalshi stamps in microseconds, Binance exchange time in milliseconds, LOBSTER prices
are multiples of 0.001), widened to the archive's recorded schema when the root already has
one. Data that needs a finer unit or a larger scale than the archive records is refused
before anything is written (:class:`~skewtape_pipeline.errors.ArchiveSchemaError` naming what
it needs), never rounded. A value given explicitly is used as given; a timestamp finer than it
is refused with PrecisionLossError naming the row, never truncated.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from skewtape_pipeline import faults, fsio
from skewtape_pipeline.errors import ArchiveBusyError, ConfigError, TickValidationError
from skewtape_pipeline.hashing import sha256_file
from skewtape_pipeline.ticks.archive.books import audit, check_may_write
from skewtape_pipeline.ticks.archive.catalog import (
    FileRecord,
    append_hot_record,
    hot_records_path,
    read_catalog,
)
from skewtape_pipeline.ticks.archive.integrity import checked_catalog
from skewtape_pipeline.ticks.archive.parquet_store import (
    ARCHIVE_LOCK_FILE,
    ARCHIVE_LOCK_WAIT_SECONDS,
    META_DATE,
    META_PREFIX,
    META_PRICE_SCALE,
    META_QUANTITY_SCALE,
    META_SYMBOL,
    FileFacts,
    PreparedFile,
    encode_symbol,
    ensure_archive_schema,
    partition_file,
    prepare_archive_file,
    publish_archive_file,
    recorded_schema,
)
from skewtape_pipeline.ticks.archive.tiers import TierPolicy, check_age_days
from skewtape_pipeline.ticks.encode.model import SchemaRequest, TickBatch, TickSchema, first_true
from skewtape_pipeline.ticks.encode.report import (
    DEFAULT_TARGET_RATIO,
    RAW_SIZE_BASES,
    RAW_SIZE_BASIS_CANONICAL_CSV,
    RAW_SIZE_BASIS_SOURCE_FILE,
    RAW_SIZE_BASIS_SOURCE_ROWS,
    RAW_SIZE_BASIS_SUPPLIED,
    TickStorageCompactionReport,
    check_raw_size,
    check_target_ratio,
    compression_ratio,
    report_notes,
)
from skewtape_pipeline.ticks.encode.sources import (
    SourceTicks,
    canonical_csv_size_bytes,
    read_canonical,
)
from skewtape_pipeline.ticks.encode.validate import check_within_day, is_sorted, validate_batch

_DAY_KEY_SHIFT = 2**20
"""Days since 1970 fit in +-2**19 for any int64 nanosecond timestamp."""
_EPOCH = date(1970, 1, 1)


@dataclass(frozen=True)
class SymbolDay:
    """One symbol-day ready to write: sorted, validated, with its age and measured raw size."""

    symbol: str
    day: date
    batch: TickBatch
    reordered_ticks: int
    age_days: int
    raw_size_bytes: int | None
    raw_size_basis: str | None


def sort_batch(batch: TickBatch) -> tuple[TickBatch, int]:
    """Sort by timestamp (stable: equal timestamps keep their order) and count the ticks moved.

    Returns ``(sorted_batch, reordered_ticks)`` where ``reordered_ticks`` is the number of rows
    whose position changed (0 and the same batch when it was already sorted).
    """
    if is_sorted(batch):
        return batch, 0
    order = pc.sort_indices(batch.ts_ns)
    moved = pc.not_equal(order, _positions(batch.ts_ns))
    return batch.take(order), int(pc.sum(pc.cast(moved, pa.int64())).as_py())


def _positions(column: pa.Array) -> pa.Array:
    """0 .. len(column) - 1 as uint64 (vectorized)."""
    return pc.indices_nonzero(pc.or_(pc.is_valid(column), pc.is_null(column)))


def plan_symbol_days(
    source: SourceTicks,
    *,
    as_of: date,
    price_scale: int | None = None,
    quantity_scale: int | None = None,
    side_map: Mapping[str, str] | None = None,
    symbol: str | None = None,
    allow_precision_loss: bool = False,
    timestamp_unit: str | None = None,
    archive: TickSchema | None = None,
) -> list[SymbolDay]:
    """Convert, split into symbol-days (UTC), sort each (counted) and validate everything.

    Writes nothing. ``symbol`` names the instrument of a source without a ``symbol`` column,
    or selects one symbol from a source that has one. Symbol-days come back ordered by symbol,
    then day, all at one schema: a unit or scale given as None is the data's smallest exact
    choice, widened to ``archive`` (the schema the archive records; None: a new archive).

    Raises
    ------
    ArchiveSchemaError
        The data needs a finer unit or a larger scale than ``archive`` holds.
    ConfigError
        A bad scale, timestamp unit or vocabulary, no symbol at all, ``as_of`` not a date.
    TickValidationError, PrecisionLossError
        Any invalid row (named by its file row; a timestamp finer than ``timestamp_unit`` is a
        PrecisionLossError), no ticks, or ticks dated after ``as_of``.
    """
    as_of = _check_date(as_of, name="as_of")
    source, symbols = _select_symbol(source, symbol)
    if source.table.num_rows == 0:
        raise TickValidationError(f"{source.path or 'input'}: there are no ticks to compact")
    request = SchemaRequest(timestamp_unit, price_scale, quantity_scale)
    batch = source.to_batch(
        price_scale=price_scale,
        quantity_scale=quantity_scale,
        side_map=side_map,
        allow_precision_loss=allow_precision_loss,
        timestamp_unit=timestamp_unit,
    )
    try:
        batch = batch.at_schema(request.resolve(batch.schema, archive))
    except TickValidationError as exc:
        raise source.located(exc) from None
    encoded = pc.dictionary_encode(symbols)
    days = _utc_days(batch.ts_ns)
    key = pc.add(
        pc.multiply(pc.cast(encoded.indices, pa.int64()), _DAY_KEY_SHIFT),
        pc.add(days, _DAY_KEY_SHIFT // 2),
    )
    # Stable sorts: by (symbol-day, ts) for the archive, by symbol-day alone for the file order.
    order = pc.sort_indices(
        pa.table({"key": key, "ts": batch.ts_ns}),
        sort_keys=[("key", "ascending"), ("ts", "ascending")],
    )
    moved = pc.cast(pc.not_equal(order, pc.sort_indices(key)), pa.int64())
    starts = [0, *_change_points(pc.take(key, order)), len(batch)]
    whole_file = len(starts) == 2 and source.file_rows == source.table.num_rows
    plan = []
    for start, stop in itertools.pairwise(starts):
        rows = order.slice(start, stop - start)
        first_row = rows[0].as_py()
        plan.append(
            _plan_symbol_day(
                source,
                batch.take(rows),
                rows,
                symbol=encoded.dictionary[encoded.indices[first_row].as_py()].as_py(),
                day=_EPOCH + timedelta(days=days[first_row].as_py()),
                as_of=as_of,
                reordered_ticks=int(pc.sum(moved.slice(start, stop - start)).as_py()),
                whole_file=whole_file,
            )
        )
    return sorted(plan, key=lambda item: (item.symbol, item.day))


def _utc_days(ts_ns: pa.Array) -> pa.Array:
    """Days since 1970-01-01 (UTC, floored) of each nanosecond timestamp, as int64."""
    timestamps = pa.Array.from_buffers(
        pa.timestamp("ns"), len(ts_ns), ts_ns.buffers(), 0, ts_ns.offset
    )
    return pc.cast(pc.cast(pc.cast(timestamps, pa.date32()), pa.int32()), pa.int64())


def _plan_symbol_day(
    source: SourceTicks,
    part: TickBatch,
    rows: pa.Array,
    *,
    symbol: str,
    day: date,
    as_of: date,
    reordered_ticks: int,
    whole_file: bool,
) -> SymbolDay:
    """Validate one sorted symbol-day (errors name the source's file row)."""
    try:
        encode_symbol(symbol)
        validate_batch(part)
    except TickValidationError as exc:
        row = None if exc.row is None else rows[exc.row].as_py()
        raise source.located(TickValidationError(exc.detail, row=row, field=exc.field)) from None
    age = (as_of - day).days
    if age < 0:
        raise source.located(
            TickValidationError(
                f"ticks of {symbol!r} are dated {day.isoformat()} (UTC), after as_of "
                f"{as_of.isoformat()}; age_days cannot be negative",
                row=rows[0].as_py(),
                field="timestamp_nanos",
            )
        )
    raw_size, basis = _measured_source_size(source, rows, whole_file=whole_file)
    return SymbolDay(
        symbol=symbol,
        day=day,
        batch=part,
        reordered_ticks=reordered_ticks,
        age_days=age,
        raw_size_bytes=raw_size,
        raw_size_basis=basis,
    )


def _change_points(sorted_key: pa.Array) -> list[int]:
    if len(sorted_key) < 2:
        return []
    changed = pc.not_equal(sorted_key.slice(1), sorted_key.slice(0, len(sorted_key) - 1))
    return [i + 1 for i in pc.indices_nonzero(changed).to_pylist()]


def _select_symbol(source: SourceTicks, symbol: str | None) -> tuple[SourceTicks, pa.Array]:
    symbols = source.symbols
    if symbols is None:
        if symbol is None:
            raise ConfigError(
                f"symbol: {source.path or 'the input'} has no symbol column; pass symbol="
            )
        encode_symbol(symbol)
        return source, pa.array([symbol] * source.table.num_rows, pa.string())
    symbols = pc.cast(symbols, pa.string())
    if symbols.null_count:
        row = first_true(pc.is_null(symbols))
        raise source.located(TickValidationError("symbol is missing", row=row, field="symbol"))
    if symbol is None:
        return source, symbols
    keep = pc.equal(symbols, symbol)
    if first_true(keep) is None:
        raise TickValidationError(
            f"{source.path or 'input'}: no ticks of symbol {symbol!r}", field="symbol"
        )
    kept = source.filter(keep)
    return kept, pc.filter(symbols, keep)


def _measured_source_size(
    source: SourceTicks, rows: pa.Array, *, whole_file: bool
) -> tuple[int | None, str | None]:
    if whole_file and source.file_bytes:
        return source.file_bytes, RAW_SIZE_BASIS_SOURCE_FILE
    if source.row_bytes is not None:
        total = pc.sum(pc.take(source.row_bytes, rows)).as_py()
        if total:
            return int(total), RAW_SIZE_BASIS_SOURCE_ROWS
    return None, None


def compact_symbol_day(
    batch: TickBatch,
    *,
    symbol: str,
    day: date,
    out: Path,
    age_days: int,
    policy: TierPolicy,
    raw_size_bytes: int | None = None,
    raw_size_basis: str | None = None,
    reordered_ticks: int = 0,
    target_ratio: float = DEFAULT_TARGET_RATIO,
    timestamp_unit: str | None = None,
    lock_timeout: float = ARCHIVE_LOCK_WAIT_SECONDS,
    audit_log: Path | None = None,
) -> TickStorageCompactionReport:
    """Validate one symbol-day, write it to the archive under ``out``, verify it, report on it.

    ``batch`` must be sorted (:func:`sort_batch` does it and counts; pass the count as
    ``reordered_ticks``) and fall on ``day`` (UTC). ``raw_size_bytes`` is the measured size of
    what the archive replaces (``raw_size_basis`` says what it is, default ``supplied``);
    without it the canonical CSV is serialized and measured. The tier follows from ``age_days``
    under ``policy``. Timestamps are stored at ``timestamp_unit`` (None: the batch's own; the
    report records the unit read back from the written file). Atomic and
    idempotent: rewriting a symbol-day replaces its file. The file is published under the
    archive's lock (waiting up to ``lock_timeout`` seconds for a re-tiering to finish), and its
    size and sha256 recorded there (``catalog.append_hot_record``: what readers verify it by).
    Compacting a symbol-day the archive already holds is audited once the write succeeded
    (:func:`recompaction_record`, to ``audit_log``, default ``<out>/../audit.jsonl``).

    Raises
    ------
    ConfigError
        ``age_days`` missing/negative, a bad policy, target, raw size, basis or timestamp
        unit, or scales or a unit that differ from the archive's (:func:`ensure_archive_schema`).
    PrecisionLossError
        A timestamp finer than ``timestamp_unit`` (names the row; nothing is written).
    TickValidationError
        An empty or invalid batch (names the row), a tick outside ``day``, a bad symbol.
    RoundTripError
        The written file did not read back equal (nothing is published).
    WriteOnceError
        The archive is in ``books_and_records`` mode and the symbol-day's file exists.
    CatalogMismatchError
        The symbol-day's file exists and the catalog is missing, unreadable or does not account
        for the files on disk (``integrity.checked_catalog``); nothing is rewritten.
    ArchiveBusyError
        Another writer held the archive's lock for more than ``lock_timeout`` seconds.
    """
    started = time.perf_counter()
    check_age_days(age_days)
    if not isinstance(policy, TierPolicy):
        raise ConfigError(f"policy = {policy!r}: expected a TierPolicy")
    target = check_target_ratio(target_ratio)
    day = _check_date(day, name="day")
    encode_symbol(symbol)
    if raw_size_bytes is not None:
        check_raw_size(raw_size_bytes)
    basis = raw_size_basis or (RAW_SIZE_BASIS_SUPPLIED if raw_size_bytes is not None else None)
    if basis is not None and (basis not in RAW_SIZE_BASES or raw_size_bytes is None):
        raise ConfigError(
            f"raw_size_basis = {raw_size_basis!r}: expected one of {', '.join(RAW_SIZE_BASES)}, "
            "together with raw_size_bytes"
        )
    if len(batch) == 0:
        raise TickValidationError(f"{symbol} {day.isoformat()}: the batch is empty")
    if timestamp_unit is not None:
        batch = batch.with_timestamp_unit(timestamp_unit)
    validate_batch(batch)
    check_within_day(batch, day)
    if raw_size_bytes is None:
        raw_size_bytes, basis = canonical_csv_size_bytes(batch), RAW_SIZE_BASIS_CANONICAL_CSV
    tier = policy.tier_for(age_days)
    out = Path(out)
    path = partition_file(out, symbol, day)
    with _archive_lock(out, lock_timeout):  # every refusal comes before anything is written
        ensure_archive_schema(
            out,
            price_scale=batch.price_scale,
            quantity_scale=batch.quantity_scale,
            timestamp_unit=batch.timestamp_unit,
        )
        _check_may_rewrite(out, path, policy)
    prepared = prepare_archive_file(  # encode, write, verify: outside the lock, in parallel
        batch,
        path,
        archive_root=out,
        settings=policy.settings_for(tier),
        metadata={META_SYMBOL: symbol, META_DATE: day.isoformat(), META_PREFIX + "tier": tier},
    )
    try:
        facts, rewrite = _publish_under_lock(
            prepared, symbol, day, out=out, policy=policy, lock_timeout=lock_timeout,
            audit_log=audit_log,
        )  # fmt: skip
    finally:
        prepared.discard()
    ratio = compression_ratio(raw_size_bytes, facts.size_bytes)
    price_scale = int(facts.metadata[META_PRICE_SCALE])
    quantity_scale = int(facts.metadata[META_QUANTITY_SCALE])
    notes = report_notes(
        price_precision_loss_ticks=batch.price_precision_loss_ticks,
        quantity_precision_loss_ticks=batch.quantity_precision_loss_ticks,
        price_scale=price_scale,
        quantity_scale=quantity_scale,
        reordered_ticks=reordered_ticks,
        ratio=ratio,
        target=target,
        raw_size_basis=basis,
        price_float_noise_normalized=batch.price_float_noise_ticks,
        quantity_float_noise_normalized=batch.quantity_float_noise_ticks,
    )
    if rewrite is not None:
        notes.append(recompaction_note(rewrite))
    return TickStorageCompactionReport(
        symbol=symbol,
        date=day.isoformat(),
        tick_count=facts.num_rows,
        raw_size_bytes=raw_size_bytes,
        raw_size_basis=basis,
        compacted_size_bytes=facts.size_bytes,
        compression_ratio=ratio,
        target_compression_ratio=target,
        meets_compression_target=ratio >= target,
        archive_format="parquet",
        codec=facts.codec,
        compression_level=facts.compression_level,
        encodings=facts.encodings,
        price_scale=price_scale,
        quantity_scale=quantity_scale,
        price_precision_loss_ticks=batch.price_precision_loss_ticks,
        quantity_precision_loss_ticks=batch.quantity_precision_loss_ticks,
        reordered_ticks=reordered_ticks,
        tier=tier,
        age_days=age_days,
        tier_policy=policy.to_dict(),
        round_trip_verified=True,
        path=str(path),
        seconds=time.perf_counter() - started,
        timestamp_unit=facts.timestamp_unit,
        notes=notes,
        price_float_noise_normalized=batch.price_float_noise_ticks,
        quantity_float_noise_normalized=batch.quantity_float_noise_ticks,
    )


def _archive_lock(out: Path, lock_timeout: float):
    """The archive's exclusive lock as a compaction takes it (ArchiveBusyError after
    ``lock_timeout`` seconds)."""
    return fsio.exclusive_lock(
        out / ARCHIVE_LOCK_FILE,
        timeout=lock_timeout,
        what="compacting",
        held_error=ArchiveBusyError,
    )


def _check_may_rewrite(out: Path, path: Path, policy: TierPolicy) -> None:
    """Refuse replacing an existing symbol-day file in books_and_records mode, or while the
    catalog does not account for the files on disk. Call it under the archive's lock."""
    check_may_write(out, path)
    if path.exists():
        checked_catalog(out, policy)


def _publish_under_lock(
    prepared: PreparedFile,
    symbol: str,
    day: date,
    *,
    out: Path,
    policy: TierPolicy,
    lock_timeout: float,
    audit_log: Path | None,
) -> tuple[FileFacts, dict | None]:
    """Publish a staged symbol-day file under the archive's lock, held only for the checks,
    the rename, the file's record (size and sha256, ``catalog.append_hot_record``) and the audit
    record, not while encoding or hashing (so writers of one archive run side by side). A
    rewrite is refused as before the encoding, and audited once the rename succeeded. Returns
    the file's facts and the rewrite's audit record (None for a new symbol-day)."""
    record = FileRecord(prepared.temp.stat().st_size, sha256_file(prepared.temp))  # private file
    with _archive_lock(out, lock_timeout):
        _check_may_rewrite(out, prepared.target, policy)  # again: the lock was let go meanwhile
        fsio.refuse_linked_state(hot_records_path(out))  # the record must follow the rename
        rewrite = recompaction_record(out, symbol, day, rows=prepared.facts.num_rows)
        facts = publish_archive_file(prepared)
        faults.checkpoint("hot-published")  # a crash here: the file without its record
        append_hot_record(out, prepared.target.relative_to(out).as_posix(), record)
        if rewrite is not None:
            audit(out, audit_log, [rewrite])
    return facts, rewrite


EVENT_RECOMPACT = "tick-archive-recompact"
"""Audit event: a symbol-day the archive held was compacted again (its hot file replaced, or its
consolidated copy superseded by a new hot file)."""


RECOMPACTED = "recompacted: "
"""How a report's note about a recompaction starts (:func:`recompaction_note`)."""


def recompaction_note(record: dict) -> str:
    """The report's note saying what a recompaction (its :data:`EVENT_RECOMPACT` record)
    replaced: the hot file (its bytes and sha256) and/or the consolidated copy it supersedes."""
    what = []
    if record.get("replaces"):
        old = record["replaces"]
        what.append(f"replaced its hot file ({old['bytes']} bytes, sha256 {old['sha256'][:16]})")
    for copy in record.get("supersedes", []):
        kind = "withdrawn " if copy["withdrawn"] else ""
        what.append(
            f"supersedes its {kind}{copy['tier']} copy in {copy['file']} ({copy['rows']} ticks; "
            "re-tiering puts the new one in its place)"
        )
    return RECOMPACTED + "; ".join(what)


def recompaction_record(out: Path, symbol: str, day: date, *, rows: int) -> dict | None:
    """The :data:`EVENT_RECOMPACT` audit record of writing ``rows`` ticks of a symbol-day the
    archive already holds, or None for a new day: ``replaces`` names its hot file (path,
    sha256, bytes), ``supersedes`` its catalogued consolidated copies (tier, file, rows; a
    withdrawn one too). Read under the archive's lock before the write (the hot file's sha256
    is that of the file being replaced); append it with ``audit`` once the write succeeded, so
    a failed write leaves no record of a rewrite that did not happen."""
    path = partition_file(out, symbol, day)
    replaces = None
    if path.exists():
        replaces = {
            "file": path.relative_to(out).as_posix(),
            "sha256": sha256_file(path),
            "bytes": path.stat().st_size,
        }
    catalog = read_catalog(out)
    copy = catalog.partitions.get((symbol, day))
    supersedes = (
        []
        if copy is None
        else [
            {
                "tier": copy.tier,
                "file": copy.file,
                "rows": copy.rows,
                "withdrawn": (symbol, day) in catalog.withdrawn,
            }
        ]
    )
    if replaces is None and not supersedes:
        return None
    return {
        "event": EVENT_RECOMPACT,
        "archive": str(out.absolute()),
        "symbol": symbol,
        "date": day.isoformat(),
        "file": path.relative_to(out).as_posix(),
        "rows": rows,
        "replaces": replaces,
        "supersedes": supersedes,
    }


def compact_source(
    source: SourceTicks,
    *,
    out: Path,
    as_of: date,
    price_scale: int | None = None,
    quantity_scale: int | None = None,
    side_map: Mapping[str, str] | None = None,
    symbol: str | None = None,
    tier_policy: TierPolicy | None = None,
    allow_precision_loss: bool = False,
    target_ratio: float = DEFAULT_TARGET_RATIO,
    timestamp_unit: str | None = None,
    audit_log: Path | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> list[TickStorageCompactionReport]:
    """Compact every symbol-day of ``source`` (see :func:`compact_ticks`).

    ``on_progress(done, total)`` is called after each symbol-day is written (e.g. to draw a
    progress bar); rewrites are audited to ``audit_log`` (:func:`recompaction_record`).
    """
    policy = TierPolicy() if tier_policy is None else tier_policy
    if not isinstance(policy, TierPolicy):
        raise ConfigError(f"tier_policy = {tier_policy!r}: expected a TierPolicy")
    check_target_ratio(target_ratio)
    plan = plan_symbol_days(
        source,
        as_of=as_of,
        price_scale=price_scale,
        quantity_scale=quantity_scale,
        side_map=side_map,
        symbol=symbol,
        allow_precision_loss=allow_precision_loss,
        timestamp_unit=timestamp_unit,
        archive=recorded_schema(Path(out)),
    )
    reports = []
    for item in plan:
        reports.append(
            compact_planned(
                item,
                out=out,
                policy=policy,
                target_ratio=target_ratio,
                timestamp_unit=timestamp_unit,
                audit_log=audit_log,
            )
        )
        if on_progress is not None:
            on_progress(len(reports), len(plan))
    return reports


def compact_planned(
    item: SymbolDay,
    *,
    out: Path,
    policy: TierPolicy,
    target_ratio: float = DEFAULT_TARGET_RATIO,
    timestamp_unit: str | None = None,
    audit_log: Path | None = None,
) -> TickStorageCompactionReport:
    """:func:`compact_symbol_day` for one symbol-day of :func:`plan_symbol_days`' plan."""
    return compact_symbol_day(
        item.batch,
        symbol=item.symbol,
        day=item.day,
        out=out,
        age_days=item.age_days,
        policy=policy,
        raw_size_bytes=item.raw_size_bytes,
        raw_size_basis=item.raw_size_basis,
        reordered_ticks=item.reordered_ticks,
        target_ratio=target_ratio,
        timestamp_unit=timestamp_unit,
        audit_log=audit_log,
    )


def compact_ticks(
    input_path: Path | str,
    *,
    out: Path,
    as_of: date,
    price_scale: int | None = None,
    quantity_scale: int | None = None,
    side_map: Mapping[str, str] | None = None,
    symbol: str | None = None,
    tier_policy: TierPolicy | None = None,
    allow_precision_loss: bool = False,
    target_ratio: float = DEFAULT_TARGET_RATIO,
    timestamp_unit: str | None = None,
) -> list[TickStorageCompactionReport]:
    """Compact a canonical tick file into the archive under ``out``; one report per symbol-day.

    The input is CSV or Parquet with ``timestamp_nanos,price,quantity,side[,symbol]``. It is
    split into symbol-days (UTC), each sorted explicitly (the count of moved ticks is
    reported), validated, written atomically, read back and compared, and reported with its
    measured raw size: the whole file's bytes when it holds exactly one symbol-day, else the
    bytes of that symbol-day's CSV lines, else (Parquet) the canonical CSV serialized and
    measured. The tier follows from each day's age at ``as_of``. Timestamps are stored at
    ``timestamp_unit`` and prices and quantities at their scales: each None by default, the
    data's smallest exact choice widened to the archive's recorded schema (module docstring).
    Idempotent.

    Raises
    ------
    ArchiveSchemaError
        The data needs a finer unit or a larger scale than the archive records; nothing is
        written.
    ConfigError
        A bad scale, timestamp unit, vocabulary, policy or target, no symbol for an input
        without one, or a configuration that differs from the archive's.
    TickValidationError, PrecisionLossError
        Invalid input, named by file, row and column (a timestamp finer than
        ``timestamp_unit`` is a PrecisionLossError). Nothing is written for any symbol-day.
    RoundTripError
        A written file did not read back equal (that symbol-day is not published).
    """
    source = read_canonical(input_path, side_map=side_map)
    return compact_source(
        source,
        out=out,
        as_of=as_of,
        price_scale=price_scale,
        quantity_scale=quantity_scale,
        side_map=side_map,
        symbol=symbol,
        tier_policy=tier_policy,
        allow_precision_loss=allow_precision_loss,
        target_ratio=target_ratio,
        timestamp_unit=timestamp_unit,
    )


def _check_date(value: object, *, name: str) -> date:
    if isinstance(value, datetime) or not isinstance(value, date):
        raise ConfigError(f"{name} = {value!r}: expected a datetime.date")
    return value
