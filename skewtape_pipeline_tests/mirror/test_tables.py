"""Key checks of the reference tables: the sorted fast path and the grouping fallback."""

from __future__ import annotations

import pyarrow as pa
import pytest

from skewtape_pipeline.mirror.tables import key_problems, strictly_increasing

KEYS = ("venue", "market_id")


def table(rows: list[tuple[str, str]]) -> pa.Table:
    return pa.table({"venue": [r[0] for r in rows], "market_id": [r[1] for r in rows]})


@pytest.mark.parametrize(
    ("rows", "expected"),
    [
        ([("a", "1"), ("a", "2"), ("b", "1")], True),
        ([("a", "1"), ("a", "1"), ("b", "1")], False),  # duplicate
        ([("b", "1"), ("a", "2")], False),  # unsorted
        ([("a", "2"), ("a", "1")], False),  # unsorted on the second key
        ([("a", "1")], True),
    ],
)
def test_strictly_increasing_when_rows_given_tells_sorted_and_unique(rows, expected):
    assert strictly_increasing(table(rows), KEYS) is expected


def test_key_problems_when_sorted_with_duplicate_reports_it():
    problems = key_problems(table([("a", "1"), ("a", "1"), ("b", "1")]), KEYS, name="m")
    assert len(problems) == 1 and "appear more than once" in problems[0]


def test_key_problems_when_unsorted_and_unique_reports_nothing():
    assert key_problems(table([("b", "1"), ("a", "2"), ("a", "1")]), KEYS, name="m") == []


def test_key_problems_when_unsorted_with_duplicate_reports_it():
    problems = key_problems(table([("b", "1"), ("a", "2"), ("b", "1")]), KEYS, name="m")
    assert "appear more than once" in problems[0]
