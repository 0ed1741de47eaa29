"""The skewtape-pipeline command line (``skewtape-pipeline COMMAND``, or ``python -m
skewtape_pipeline.cli``): :mod:`~skewtape_pipeline.cli.app` runs it, its parser and the commands
of each group in modules of their own."""
