"""The sample publisher: a realistic Skewtape history and its chain of monthly deltas."""

from skewtape_pipeline.sample.publisher import SampleSummary, publish_sample

__all__ = ["SampleSummary", "publish_sample"]
