"""The snapshot mirror: the Skewtape delta format and the engine that applies deltas."""
