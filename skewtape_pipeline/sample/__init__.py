"""The sample publisher: a realistic Skewtape history and its chain of monthly deltas."""
