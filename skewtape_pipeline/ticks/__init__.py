"""The tick archive: validation, exact Parquet compaction, verification, reports and tiers.

Modules (import them directly; this package imports nothing so that the stdlib-only parts
stay importable without pyarrow):

- ``sides``: explicit side vocabularies (BUY/SELL/UNKNOWN codes), stdlib only.
- ``tkc1``: the TKC1 reference model (encoder, decoder, codecs that record themselves), stdlib.
- ``report``: :class:`TickStorageCompactionReport` and the raw-size bases, stdlib only.
- ``tiers``: :class:`TierPolicy` (age thresholds, Parquet settings per tier), stdlib only.
- ``model``: :class:`TickBatch` and the exact conversions (strings, decimals, floats, sides).
- ``validate``: batch rules (order, signs, side codes, day bounds).
- ``sources``: readers (canonical CSV/Parquet, Kalshi, Tardis, LOBSTER), canonical CSV form.
- ``parquet_store``: archive layout, writer, verifier, facts read from the written file.
- ``compact``: ``compact_ticks``, ``compact_source``, ``compact_symbol_day``, ``sort_batch``.
- ``consolidate``: warm/cold files holding many symbol-days (sorted, verified, content-named).
- ``catalog``: where each symbol-day lives now (the atomic catalog), archive-wide metrics,
  and the hot files' records (size and sha256 when written).
- ``snapshot_fills``: a snapshot's fills as symbol-day ticks, archived; corrected symbol-days.
- ``lifecycle``: re-tiering by age (``plan_retier``, ``retier``, ``prune``), withdrawn
  symbol-days (``withdraw_symbol_days``), relocated reports.
- ``integrity``: the writers' catalog check, ``verify_archive``, ``rebuild_catalog``.
- ``trust``: every file against the record made when it was written; what readers verify
  before reading (``verify_before_reading``).
- ``query``: the DuckDB view ``ticks`` over every tier (``open_ticks_view``, ``run_query``).
- ``books``: the write-once ``books_and_records`` mode.
"""
