"""The archive's operations, one module each, each handed the ``ArchiveCore``; none imports the
front door or another operation, but its own plan. Each writing operation checks its arguments
first, then writes within ``ArchiveCore.writing`` (so a refused argument turns nothing on, not
even the ``books_and_records`` mode the archive was opened with).

- ``compact_plan``: a compaction planned (``CompactionRun``, ``SymbolDayWrite``, ``SourceFacts``;
  the source read into sorted symbol-days in bounded memory); ``compact``: the plan carried out
  (``compact_ticks``, ``compact_source``, ``compact_symbol_day``, ``commit_compaction``).
- ``retier``: where every symbol-day belongs at a date and the files that takes
  (``plan_retier``, writes nothing), that plan carried out, committed, audited (``retier``,
  ``prune``).
- ``withdraw``: symbol-days corrected away (``withdraw_symbol_days``, ``remove_symbol_days``).
- ``integrity``: ``verify_archive``, ``rebuild_catalog``.
- ``version_pruning``: ``prune_versions``, ``past_version_bytes``.
- ``query``: the DuckDB view ``ticks`` over every tier (``open_ticks_view``, ``run_query``).
- ``reader``: ``ArchiveReader``, ``Archive.read`` straight from the named files and row groups.
- ``show``: one symbol-day told whole (``show_symbol_day``); a report moved to where its rows
  live now (``relocated_report``).
"""
