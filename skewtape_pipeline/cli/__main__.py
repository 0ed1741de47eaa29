"""``python -m skewtape_pipeline.cli``: the command line."""

import sys

from skewtape_pipeline.cli.app import main

sys.exit(main())
