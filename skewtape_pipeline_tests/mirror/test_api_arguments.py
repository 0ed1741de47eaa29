"""Bad arguments to the mirror's Python entry points (``apply_delta``, ``catch_up``,
``fetch_deltas``, ``fetch_snapshot``, ``verify_snapshot``) are refused as the command line
refuses them: a typed error naming the argument, raised before anything is written or
requested, the data root left as it was."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from skewtape_pipeline.errors import ConfigError, WrongFolderError
from skewtape_pipeline.mirror.apply import apply_delta
from skewtape_pipeline.mirror.catchup import catch_up
from skewtape_pipeline.mirror.fetch import fetch_deltas, fetch_snapshot
from skewtape_pipeline.mirror.verify import verify_snapshot
from skewtape_pipeline_tests.conftest import SAMPLE_FIRST_MONTH
from skewtape_pipeline_tests.mirror.apply_support import tree_state

BAD_LOCK_TIMEOUTS = [-1, -0.5, math.nan, math.inf, "5", None, True]


def refused_changing_nothing(root: Path, error: type[Exception], match: str, call) -> None:
    """``call()`` raises ``error`` matching ``match`` and leaves ``root`` as it was."""
    before = tree_state(root)
    with pytest.raises(error, match=match):
        call()
    assert tree_state(root) == before


@pytest.mark.parametrize("lock_timeout", BAD_LOCK_TIMEOUTS)
def test_apply_delta_with_a_bad_lock_timeout_is_refused_naming_it_before_writing(
    sample_root, lock_timeout
):
    history = sample_root / "history"
    delta = sample_root / "deltas" / "2026-10"
    refused_changing_nothing(
        sample_root,
        ConfigError,
        "lock_timeout",
        lambda: apply_delta(
            history / SAMPLE_FIRST_MONTH,
            delta,
            into=history / "2026-10",
            audit_log=sample_root / "audit.jsonl",
            lock_timeout=lock_timeout,
        ),
    )


@pytest.mark.parametrize("lock_timeout", BAD_LOCK_TIMEOUTS)
def test_catch_up_with_a_bad_lock_timeout_is_refused_naming_it_before_writing(
    sample_root, lock_timeout
):
    refused_changing_nothing(
        sample_root,
        ConfigError,
        "lock_timeout",
        lambda: catch_up(
            sample_root / "history",
            sample_root / "deltas",
            audit_log=sample_root / "audit.jsonl",
            lock_timeout=lock_timeout,
        ),
    )


@pytest.mark.parametrize("lock_timeout", [-1, math.nan, "1"])
def test_fetch_with_a_bad_lock_timeout_is_refused_naming_it_before_any_request(
    subscriber, publisher, tmp_path, lock_timeout
):
    new_root = tmp_path / "new"
    refused_changing_nothing(
        tmp_path,
        ConfigError,
        "lock_timeout",
        lambda: fetch_snapshot(
            str(publisher), new_root, SAMPLE_FIRST_MONTH, lock_timeout=lock_timeout
        ),
    )
    assert not new_root.exists()
    refused_changing_nothing(
        tmp_path,
        ConfigError,
        "lock_timeout",
        lambda: fetch_deltas(str(publisher), subscriber, lock_timeout=lock_timeout),
    )


@pytest.mark.parametrize(
    ("folder", "named"),
    [("deltas/2026-10", "is a delta"), ("deltas", "is a folder of"), ("history", "is a history")],
)
def test_verify_snapshot_of_a_delta_or_a_folder_of_months_is_refused_writing_no_cache(
    sample_root, folder, named
):
    refused_changing_nothing(
        sample_root,
        WrongFolderError,
        named,
        lambda: verify_snapshot(sample_root / folder),
    )
    assert not (sample_root / folder / ".skewtape").exists()
