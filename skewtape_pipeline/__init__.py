"""skewtape_pipeline: an exact, current Skewtape mirror and a verified, tiered tick archive.

The core (``mirror``, ``ticks``, ``sample``) never imports dagster; ``definitions`` and
``orchestration`` are the thin Dagster layer on top of it.
"""

__version__ = "0.1.0"
