"""Everything under an archive root: where files live (layout, tiers and their roots), the catalog
and placement, and the verbs that change or read the archive (compaction,
consolidation, re-tiering, withdrawal, integrity, books mode, the query view, the reports
table).

Modules:

- ``handle``: :class:`Archive`, the front door: built once from the root, the tier policy (default:
  the one the archive records), the audit log (None: no audit), the lock timeout and the
  write-once mode. Its verbs: compact, compact_symbol_day, plan_retier, retier, prune,
  withdraw, remove, rebuild_catalog, verify, query, open_view, stats, report, read (now or as of
  a version), state, symbols, days, show; the version verbs are the namespace
  ``archive.versions`` (``versions_api.ArchiveVersions``: list, latest, tags, tag, prune,
  past_bytes). ``file_compression.file_compression`` measures one file and needs no
  archive. The command line and the Dagster ``archive`` resource each build one.
- ``policy``: the tier policy as configured: :class:`TierPolicy` (age thresholds, each tier's
  settings, layout and root; which tier and period a symbol-day's age calls for) and
  :class:`TierSettings` (a tier's layout and root, extending the encoder's Parquet writer
  settings).
- ``tiers``: :class:`ArchiveTiers`, a policy resolved for one archive: its warm and cold stores
  and their listing, each tier's settings and root, the catalog paths.
- ``layout``: what lives under an archive root and where (symbol-day paths, the marker pinning
  the schema, the catalog's name, the one lock every writer takes: ``archive_lock``, the
  staging folder and publishing into place, ``check_archive_root``). The Parquet file itself
  is ``ticks.encode.parquet_file``.
- ``books``: the write-once ``books_and_records`` mode and the archive's audit records.
- ``catalog``: which consolidated file holds each symbol-day (one atomically replaced file), and
  the hot files' records (size and sha256 when written); ``CatalogStore`` (``core.catalog``)
  reads and writes both. ``catalog_format``: the catalog file's columns and the rules of a row.
- ``consolidate``: warm and cold files holding many symbol-days (sorted, verified,
  content-named).
- ``placement``: where each symbol-day's rows live now, its location, archive-wide metrics.
- ``compact``: symbol-day files into the archive (``compact_ticks``, ``compact_source``,
  ``compact_symbol_day``, ``sort_batch``), each given the ``Archive`` and the run's options
  (``CompactionRun``, ``SymbolDayWrite``, ``SourceFacts``).
- ``spill``: a compaction's symbol-days gathered from a stream of chunks in bounded memory,
  spilling to the archive's staging folder (``SymbolDayRouter``).
- ``retier_plan``: where every symbol-day belongs at a date under the policy, and the files
  that takes (``plan_retier``, ``RetierPlan``; writes nothing).
- ``lifecycle``: re-tiering by age: the plan carried out, committed, audited, crash-safe
  (``retier``, ``prune``), relocated reports.
- ``garbage``: the files the committed catalog no longer reaches (``unreachable_files``) and
  their audited removal (``remove_files``).
- ``withdraw``: symbol-days corrected away (``withdraw_symbol_days``, ``remove_symbol_days``).
- ``integrity``: the writers' catalog check, ``verify_archive``, ``rebuild_catalog``.
- ``query``: the DuckDB view ``ticks`` over every tier (``open_ticks_view``, ``run_query``).
- ``reports_table``: the ``tick_reports`` table: one row per symbol-day a venue-day run looked
  at (its tier and path where the day is now, in the view).
- ``show``: one symbol-day told whole: where it is now, its report, its audited history
  (``show_symbol_day``).
- ``file_compression``: how well a consolidated file compresses its ticks, measured.
- ``trust``: every file against the record made when it was written; what readers verify before
  reading (``verify_before_reading``).
- ``versions``: every committed change recorded as a numbered version (the version log, as-of
  reads, tags); ``VersionLog`` (``core.versions``) reads and writes it. ``version_files``: the
  log's files (where each lives, reading one); ``version_recording``: writing a version or a
  tag.
- ``version_pruning``: pruning versions on purpose and the files only past versions read
  (``prune_versions``, ``past_version_bytes``).
"""
