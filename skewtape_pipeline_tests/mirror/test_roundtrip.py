"""Property: applying build_delta(A, B) to A gives B, for random small snapshots A and B.

Month and text files must come out byte for byte; the four reference tables row for row (the
merge writes its own Parquet bytes). Both modes are checked on every example.
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from skewtape_pipeline.mirror.apply import apply_delta
from skewtape_pipeline.mirror.diff import build_delta
from skewtape_pipeline.mirror.snapshot import seal_snapshot
from skewtape_pipeline.mirror.verify import verify_snapshot
from skewtape_pipeline_tests.conftest import (
    PRICE,
    UTC_NS,
    candles_table,
    copy_snapshot,
    fills_table,
    write_parquet,
)
from skewtape_pipeline_tests.mirror.apply_support import assert_same_snapshot

VENUES = ("kalshi", "polymarket")
MONTHS = ("2026-09", "2026-10", "2026-11")
NS = 1_000_000_000

SCHEMAS = {
    "markets.parquet": pa.schema(
        [("venue", pa.string()), ("market_id", pa.string()), ("title", pa.string()),
         ("status", pa.string()), ("tick_size", PRICE), ("opened_at", UTC_NS)]
    ),
    "resolutions.parquet": pa.schema(
        [("venue", pa.string()), ("market_id", pa.string()), ("seq", pa.int64()),
         ("outcome", pa.string()), ("payout", PRICE), ("resolved_at", UTC_NS)]
    ),
    "matched_events.parquet": pa.schema(
        [("event_id", pa.string()), ("venue_a", pa.string()), ("market_a", pa.string()),
         ("venue_b", pa.string()), ("market_b", pa.string()), ("confidence", pa.float64())]
    ),
    "fees.parquet": pa.schema(
        [("venue", pa.string()), ("category", pa.string()), ("effective_from", UTC_NS),
         ("taker_bps", pa.int32()), ("maker_bps", pa.int32())]
    ),
}  # fmt: skip

venue = st.sampled_from(VENUES)
market = st.sampled_from(["M0", "M1", "M2", "M3"])
text = st.sampled_from(["open", "closed", "Will it rain?", "späť", None])
price = st.sampled_from([Decimal("0.0100"), Decimal("0.5000"), Decimal("1.0000"), None])
instant = st.integers(min_value=1_700_000_000 * NS, max_value=1_800_000_000 * NS)


def table_rows(keys, values):
    """Rows with unique keys: a dict {key tuple: other columns} turned into dicts."""
    return st.dictionaries(st.tuples(*keys), st.tuples(*values), max_size=6)


ROWS = {
    "markets.parquet": table_rows((venue, market), (text, text, price, instant)),
    "resolutions.parquet": table_rows(
        (venue, market, st.integers(1, 3)), (text, price, st.one_of(st.none(), instant))
    ),
    "matched_events.parquet": table_rows(
        (st.sampled_from(["EV-1", "EV-2", "EV-3", "EV-4"]),),
        (venue, market, venue, market, st.sampled_from([0.25, 0.5, 0.75, 1.0])),
    ),
    "fees.parquet": table_rows(
        (venue, st.sampled_from(["default", "sports"]), st.sampled_from([0, 1, 2])),
        (st.integers(0, 20), st.integers(0, 5)),
    ),
}


@st.composite
def snapshots(draw):
    """A random small snapshot: month files, text files, four tables, maybe a new column."""
    months = draw(
        st.dictionaries(
            st.tuples(st.sampled_from(["fills", "candles"]), venue, st.sampled_from(MONTHS)),
            st.integers(1, 3),
            max_size=5,
        )
    )
    texts = {"README.md": draw(st.sampled_from(["Snapshot.\n", "Snapshot, revised.\n"]))}
    if draw(st.booleans()):
        texts["docs/NOTES.md"] = draw(st.text(min_size=0, max_size=40))
    tables = {name: draw(strategy) for name, strategy in ROWS.items()}
    extra_column = draw(st.booleans())
    return months, texts, tables, extra_column


def write_snapshot(folder: Path, snapshot, *, month: str) -> Path:
    months, texts, tables, extra_column = snapshot
    folder.mkdir(parents=True)
    for (kind, ven, mon), rows in months.items():
        build = fills_table if kind == "fills" else candles_table
        write_parquet(folder / kind / ven / f"{mon}.parquet", build(ven, mon, rows=rows))
    for rel, content in texts.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(content)
    for name, rows in tables.items():
        write_parquet(folder / name, build_table(name, rows, extra_column=extra_column))
    seal_snapshot(folder, bundle_id=f"skewtape-history-{month}", month=month, venues=VENUES)
    return folder


def build_table(name: str, rows: dict, *, extra_column: bool) -> pa.Table:
    schema = SCHEMAS[name]
    records = [key + values for key, values in sorted(rows.items(), key=repr)]
    if name == "fees.parquet":  # the third key is an index into a few instants
        records = [(v, c, 1_767_225_600 * NS + i * NS, *rest) for v, c, i, *rest in records]
    columns = {
        field.name: pa.array([record[i] for record in records], field.type)
        for i, field in enumerate(schema)
    }
    if extra_column and name == "markets.parquet":
        columns["note"] = pa.array([f"n{i}" for i in range(len(records))], pa.string())
    return pa.table(columns)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(parent=snapshots(), nxt=snapshots())
def test_apply_delta_when_given_built_delta_reproduces_next_snapshot(tmp_path_factory, parent, nxt):
    root = tmp_path_factory.mktemp("roundtrip")
    a = write_snapshot(root / "history" / "2026-11", parent, month="2026-11")
    b = write_snapshot(root / "published" / "2026-12", nxt, month="2026-12")
    build_delta(a, b, root / "deltas" / "2026-12")
    mirror = copy_snapshot(a, root / "mirror")
    apply_delta(mirror, root / "deltas" / "2026-12")
    assert_same_snapshot(mirror, b)
    into = root / "history" / "2026-12"
    apply_delta(a, root / "deltas" / "2026-12", into=into)
    assert_same_snapshot(into, b)
    verify_snapshot(into, full=True)
