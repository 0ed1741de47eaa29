"""Dagster definitions around the core: thin adapters that call it and turn results into metadata.

Only this package (and ``skewtape_pipeline.definitions``) imports dagster.
"""
