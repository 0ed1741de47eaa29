"""The Dagster code location: ``dagster dev -m skewtape_pipeline.definitions`` (or workspace.yaml).

Nothing is read from the environment here: ``SKEWTAPE_HOME`` is resolved by Dagster when a run,
sensor tick or schedule tick starts.
"""

from __future__ import annotations

import dagster as dg

from skewtape_pipeline.orchestration.definitions import build_definitions
from skewtape_pipeline.orchestration.shared.resources import SkewtapeHome

defs = build_definitions(SkewtapeHome(root=dg.EnvVar("SKEWTAPE_HOME")))
