"""The tick archive: validation, exact Parquet compaction, verification, reports and tiers."""
