"""Reference models from the specification, for tests and benchmarks only.

:mod:`skewtape_pipeline.reference.tkc1` is the seed's TKC1 encoding model, a yardstick, not the
archive format. No product module imports this package (a test checks it).
"""
