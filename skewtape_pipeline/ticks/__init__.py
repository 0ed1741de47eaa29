"""The tick archive, in three subpackages by subject.

Each package imports nothing (import the modules directly), so the stdlib-only modules stay
importable without pyarrow.

- ``encode/``: One batch of ticks -> exact columns, validated, one verified Parquet file and its
  compaction report. Knows no archive root: imports nothing from ``ticks.archive`` or
  ``ticks.fills``. Modules: ``sides``, ``decimals``, ``model``, ``validate``, ``sources``,
  ``chunked``, ``writer_settings`` (the Parquet writer settings, each tier's by default),
  ``parquet_file`` (the Parquet writer and readers), ``report``, ``options``
  (``TickEncoding``: how ticks are encoded, fixed once per run).
- ``archive/``: Everything under an archive root, behind one front door: ``handle.Archive``,
  built once from the root, the tier policy, the audit log, the lock timeout and the write-once
  mode, with the verbs (compact, compact_symbol_day, plan_retier, retier, prune, withdraw,
  remove, verify, rebuild_catalog, query, open_view, stats, report, read now or as of a
  version, state, symbols, days, show; and the namespace ``versions``: list, latest, tags,
  tag, prune, past_bytes).
  Below it: where files live (layout, tiers and their roots), the
  catalog and placement, and the modules that do each verb's work
  (compaction, consolidation, re-tiering, withdrawal, integrity, books mode, the query view,
  the reports table). Modules: ``handle``, ``policy``, ``tiers``, ``layout``, ``books``,
  ``catalog``, ``consolidate``, ``placement``, ``compact``, ``retier``,
  ``garbage``, ``withdraw``, ``integrity``, ``query``, ``reports_table``, ``show``, ``spill``,
  ``file_compression``, ``trust``, ``versions`` (the version log, as-of reads, tags),
  ``version_pruning``.
- ``fills/``: The only ticks code that reads mirror snapshots: a snapshot's fills as symbol-day
  ticks, and a venue-day of them into the archive. Modules: ``snapshot_fills``, ``venue_days``.

The seed's TKC1 reference model is ``skewtape_pipeline.reference.tkc1``: a yardstick for tests and
benchmarks, never imported here.
"""
