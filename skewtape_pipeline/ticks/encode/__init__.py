"""One batch of ticks -> exact columns, validated, one verified Parquet file and its compaction
report. Knows no archive root: imports nothing from ``ticks.archive`` or ``ticks.fills``.

Modules:

- ``sides``: explicit side vocabularies (BUY/SELL/UNKNOWN codes); stdlib only.
- ``decimals``: exact decimal prices scaled to integer units and back; stdlib only.
- ``model``: :class:`TickBatch`, :class:`TickSchema` and the exact conversions that build one
  (strings, decimals, floats, sides, timestamp units, the smallest exact scales).
- ``validate``: batch rules (order, signs, digits, side codes, day bounds), vectorized.
- ``sources``: readers (canonical CSV/Parquet, Kalshi, Tardis, LOBSTER) into exact columns, and
  the canonical CSV form and size.
- ``chunked``: a large Parquet source read in bounded chunks.
- ``writer_settings``: :class:`WriterSettings` (codec, level, encoding sample, row groups) and
  each tier's writer by default; stdlib only.
- ``parquet_file``: the Parquet tick file: schema, encoding choice, writer, verifier, readers,
  the facts a file records about itself.
- ``report``: :class:`TickStorageCompactionReport` and the raw-size bases of its ratio; stdlib
  only.
- ``options``: :class:`TickEncoding`, how ticks are encoded (the schema fixed, the side
  vocabulary, precision loss, the target ratio), fixed once per run.
"""
