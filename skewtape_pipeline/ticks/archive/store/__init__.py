"""What lives where under an archive root: no verbs, and nothing above it imported.

- ``policy``: ``TierPolicy``, ``TierSettings``; ``tiers``: ``ArchiveTiers`` (a policy resolved
  for one archive, its stores, catalog paths) and the recorded policy.
- ``layout``: paths under a root, the marker pinning the schema, the lock file's name,
  staging and publishing into place, ``check_archive_root``.
- ``books``: ``Books`` (write-once mode, the audit log) and the archive's audit events.
- ``catalog``: ``CatalogStore`` (which consolidated file holds each symbol-day, its audited
  commit; the hot files' records); ``catalog_format``: the catalog file's columns and row rules.
- ``hot_index``: which hot files the archive holds, kept at publication.
- ``consolidate``: warm and cold files holding many symbol-days (a tier period's written in one
  call); ``file_compression``: how well one compresses.
- ``placement``: where each symbol-day lives now, whether a hot file holds its consolidated
  copy's ticks, archive-wide metrics; ``garbage``: ``GarbageCollector`` (the files no catalog
  reaches and their audited removal, what interrupted runs left); ``trust``: every file against
  its record (re-tiering's reads, ``VerifiedSources``) and the writers' check of the catalog
  against the files (``checked_catalog``).
- ``versions``: ``VersionLog`` (the version log, as-of reads, tags); ``version_files``: its files;
  ``version_recording``: writing a version or a tag.
- ``reports_table``: the ``tick_reports`` table; ``spill``: rows beyond a compaction's memory
  limit, in the staging folder.
"""
