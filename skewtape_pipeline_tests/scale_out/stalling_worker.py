"""Imported by one Celery worker of the tests (``-I``): its first publish of a hot symbol-day
file writes the marker file ``$SKEWTAPE_TEST_STALL_MARKER`` and then waits, the temporary file
written and not yet renamed, so the test can kill the worker in the middle of a step."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from skewtape_pipeline import fsio

_stalled = threading.Event()


def _stall_at_first_hot_publish(temp: Path, target: Path) -> None:
    if target.name == "part-0.parquet" and not _stalled.is_set():
        _stalled.set()
        Path(os.environ["SKEWTAPE_TEST_STALL_MARKER"]).write_text(f"{os.getpid()} {target}\n")
        time.sleep(600)  # killed long before


fsio.set_publish_hook(_stall_at_first_hot_publish)
