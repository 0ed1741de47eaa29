"""The tick archive, on four floors; imports point down only (``test_layering.py`` holds the walls).

- ``handle``: :class:`~skewtape_pipeline.ticks.archive.handle.Archive`, the front door: built once
  from the root and its options, every verb with its contract; ``versions_api``: the namespace
  ``archive.versions``. The command line and the Dagster ``archive`` resource each build one.
- ``core``: :class:`~skewtape_pipeline.ticks.archive.core.ArchiveCore`, the archive as one object
  (root, resolved tiers, audit log, the one lock) and the store objects it builds once
  (``catalog``, ``books``, ``versions``): what every operation is handed.
- ``ops``: one module per operation, handed the core, never the front door.
- ``store``: what lives where under a root; no verbs, and nothing above it imported.
"""
