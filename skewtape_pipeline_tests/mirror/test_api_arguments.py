"""Bad arguments to the mirror's Python entry points (``apply_delta``, ``catch_up``,
``fetch_deltas``, ``fetch_snapshot``, ``verify_snapshot``, ``build_delta``,
``verify_audit_log``, ``publish_sample``) are refused as the command line
refuses them: a typed error naming the argument, raised before anything is written or
requested, the data root left as it was."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from skewtape_pipeline.audit import verify_audit_log
from skewtape_pipeline.errors import ConfigError, WrongFolderError
from skewtape_pipeline.mirror.apply import apply_delta
from skewtape_pipeline.mirror.catchup import catch_up
from skewtape_pipeline.mirror.diff import build_delta
from skewtape_pipeline.mirror.fetch import fetch_deltas, fetch_snapshot
from skewtape_pipeline.mirror.verify import verify_snapshot
from skewtape_pipeline.sample.publisher import publish_sample
from skewtape_pipeline_tests.conftest import SAMPLE_FIRST_MONTH
from skewtape_pipeline_tests.mirror.apply_support import tree_state

BAD_LOCK_TIMEOUTS = [-1, -0.5, math.nan, math.inf, "5", None, True]
BAD_FLAGS = ["no", "false", 0, 1, None]
"""Not True or False: each would silently switch a behaviour on or off (a truthy "no")."""


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


@pytest.mark.parametrize(
    ("argument", "value"),
    [("lock_timeout", value) for value in (-1, math.nan, "1")]
    + [("dry_run", flag) for flag in BAD_FLAGS]
    + [("settings", value) for value in ("fast", 5)],
)
def test_fetch_with_a_bad_argument_is_refused_naming_it_before_any_request(
    subscriber, publisher, tmp_path, argument, value
):
    new_root = tmp_path / "new"
    refused_changing_nothing(
        tmp_path,
        ConfigError,
        f"{argument} = ",
        lambda: fetch_snapshot(str(publisher), new_root, SAMPLE_FIRST_MONTH, **{argument: value}),
    )
    assert not new_root.exists()
    refused_changing_nothing(
        tmp_path,
        ConfigError,
        f"{argument} = ",
        lambda: fetch_deltas(str(publisher), subscriber, **{argument: value}),
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


@pytest.mark.parametrize("month", ["2026-13", "2026-9", "../../y", "", None, 202609])
def test_fetch_snapshot_of_a_malformed_month_is_refused_naming_it_before_any_request(
    publisher, tmp_path, month
):
    new_root = tmp_path / "new"
    refused_changing_nothing(
        tmp_path, ConfigError, "month", lambda: fetch_snapshot(str(publisher), new_root, month)
    )
    assert not new_root.exists()


@pytest.mark.parametrize("until", ["2026-13", "2026-1", 202611])
def test_fetch_deltas_until_a_malformed_month_is_refused_naming_it(subscriber, publisher, until):
    refused_changing_nothing(
        subscriber,
        ConfigError,
        "until",
        lambda: fetch_deltas(str(publisher), subscriber, until=until, dry_run=True),
    )


@pytest.mark.parametrize("dry_run", [True, False])
def test_fetch_into_a_root_whose_folder_is_missing_is_refused_creating_nothing(
    publisher, tmp_path, dry_run
):
    root = tmp_path / "missing" / "root"
    refused_changing_nothing(
        tmp_path,
        ConfigError,
        "root = .*does not exist",
        lambda: fetch_snapshot(str(publisher), root, SAMPLE_FIRST_MONTH, dry_run=dry_run),
    )
    assert not root.parent.exists()


@pytest.mark.parametrize(
    ("root", "match"), [(None, "root = None"), (5, "root = 5"), ("FILE", "is a file")]
)
def test_fetch_into_a_root_that_is_no_folder_is_refused_naming_it(
    subscriber, publisher, tmp_path, root, match
):
    root = subscriber / "history" / SAMPLE_FIRST_MONTH / "manifest.json" if root == "FILE" else root
    for fetch in (
        lambda: fetch_snapshot(str(publisher), root, SAMPLE_FIRST_MONTH),
        lambda: fetch_deltas(str(publisher), root),
    ):
        refused_changing_nothing(tmp_path, ConfigError, match, fetch)


def test_fetch_from_a_source_that_is_none_is_refused_naming_it(tmp_path):
    refused_changing_nothing(
        tmp_path,
        ConfigError,
        "source = None",
        lambda: fetch_snapshot(None, tmp_path / "new", SAMPLE_FIRST_MONTH),
    )


@pytest.mark.parametrize(
    ("argument", "value"),  # None for into or audit_log: in place, or no audit
    [("snapshot", None), ("snapshot", 5), ("delta", None), ("into", 5), ("audit_log", 5)],
)
def test_apply_delta_with_a_path_argument_that_is_no_path_is_refused_naming_it(
    sample_root, argument, value
):
    arguments = {
        "snapshot": sample_root / "history" / SAMPLE_FIRST_MONTH,
        "delta": sample_root / "deltas" / "2026-10",
        "into": sample_root / "history" / "2026-10",
        "audit_log": sample_root / "audit.jsonl",
        argument: value,
    }
    refused_changing_nothing(
        sample_root, ConfigError, f"{argument} = {value!r}", lambda: apply_delta(**arguments)
    )


@pytest.mark.parametrize("argument", ["history", "deltas", "audit_log"])
def test_catch_up_with_a_path_argument_that_is_no_path_is_refused_naming_it(sample_root, argument):
    arguments = {
        "history": sample_root / "history",
        "deltas": sample_root / "deltas",
        "audit_log": sample_root / "audit.jsonl",
        argument: 5,
    }
    refused_changing_nothing(
        sample_root, ConfigError, f"{argument} = 5", lambda: catch_up(**arguments)
    )


@pytest.mark.parametrize("snapshot", [None, 5])
def test_verify_snapshot_of_no_path_is_refused_naming_it(snapshot):
    with pytest.raises(ConfigError, match=f"snapshot = {snapshot!r}"):
        verify_snapshot(snapshot)


def test_an_audit_log_in_a_missing_folder_is_refused_creating_nothing(sample_root, tmp_path):
    """The command line refuses ``--audit-log`` there; apply_delta and catch_up created the
    folder and wrote the log into it."""
    audit_log = tmp_path / "missing" / "audit.jsonl"
    history = sample_root / "history"
    for call in (
        lambda: apply_delta(
            history / SAMPLE_FIRST_MONTH,
            sample_root / "deltas" / "2026-10",
            into=history / "2026-10",
            audit_log=audit_log,
        ),
        lambda: catch_up(history, sample_root / "deltas", audit_log=audit_log),
    ):
        refused_changing_nothing(tmp_path, ConfigError, "audit_log = .*does not exist", call)
    assert not audit_log.parent.exists()


@pytest.mark.parametrize("flag", BAD_FLAGS)
def test_apply_and_catch_up_with_link_sources_not_a_bool_are_refused_naming_it(sample_root, flag):
    history = sample_root / "history"
    refused_changing_nothing(
        sample_root,
        ConfigError,
        "link_sources = ",
        lambda: apply_delta(
            history / SAMPLE_FIRST_MONTH,
            sample_root / "deltas" / "2026-10",
            into=history / "2026-10",
            link_sources=flag,
        ),
    )
    refused_changing_nothing(
        sample_root,
        ConfigError,
        "link_sources = ",
        lambda: catch_up(history, sample_root / "deltas", link_sources=flag),
    )


@pytest.mark.parametrize("flag", BAD_FLAGS)
@pytest.mark.parametrize("name", ["full", "save_cache"])
def test_verify_snapshot_with_a_flag_not_a_bool_is_refused_naming_it(sample_root, name, flag):
    snapshot = sample_root / "history" / SAMPLE_FIRST_MONTH
    refused_changing_nothing(
        sample_root,
        ConfigError,
        f"{name} = ",
        lambda: verify_snapshot(snapshot, **{name: flag}),
    )


@pytest.mark.parametrize("flag", BAD_FLAGS)
def test_build_delta_with_verify_inputs_not_a_bool_is_refused_naming_it(sample_root, flag):
    history, out = sample_root / "history", sample_root / "built-delta"
    refused_changing_nothing(
        sample_root,
        ConfigError,
        "verify_inputs = ",
        lambda: build_delta(
            history / SAMPLE_FIRST_MONTH, history / "2026-10", out, verify_inputs=flag
        ),
    )


@pytest.mark.parametrize("flag", BAD_FLAGS)
def test_verify_audit_log_with_allow_torn_tail_not_a_bool_is_refused_naming_it(tmp_path, flag):
    log = tmp_path / "audit.jsonl"
    log.write_text("")
    with pytest.raises(ConfigError, match="allow_torn_tail = "):
        verify_audit_log(log, allow_torn_tail=flag)


@pytest.mark.parametrize("argument", ["parent", "next_snapshot", "out"])
@pytest.mark.parametrize("value", [None, 5])
def test_build_delta_with_a_path_argument_that_is_no_path_is_refused_naming_it(
    sample_root, argument, value
):
    """Each was a bare TypeError from ``Path``."""
    history = sample_root / "history"
    given = {
        "parent": history / SAMPLE_FIRST_MONTH,
        "next_snapshot": history / "2026-10",
        "out": sample_root / "built-delta",
        argument: value,
    }
    refused_changing_nothing(
        sample_root, ConfigError, f"{argument} = {value}: expected", lambda: build_delta(**given)
    )


@pytest.mark.parametrize("value", [None, 5])
def test_verify_audit_log_and_publish_sample_given_no_path_refuse_naming_it(tmp_path, value):
    """Each was a bare TypeError from ``Path``."""
    with pytest.raises(ConfigError, match=f"path = {value}: expected"):
        verify_audit_log(value)
    refused_changing_nothing(
        tmp_path, ConfigError, f"root = {value}: expected", lambda: publish_sample(value)
    )
