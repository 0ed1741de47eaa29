"""The catalog: Parquet (version 3) written atomically and deterministically, paths inside the
tier roots, validation naming the file, column and row, and the live state it implies."""

from __future__ import annotations

import io
import json
import os
from dataclasses import replace
from datetime import date, datetime, timedelta

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from skewtape_pipeline.errors import TickFormatError
from skewtape_pipeline.hashing import sha256_file
from skewtape_pipeline.ticks.archive.core import ArchiveCore
from skewtape_pipeline.ticks.archive.handle import Archive
from skewtape_pipeline.ticks.archive.ops.integrity import verify_archive
from skewtape_pipeline.ticks.archive.store.catalog import (
    CATALOG_FILE,
    Catalog,
    CatalogFile,
    CatalogPartition,
    CatalogStore,
    SourceStamp,
)
from skewtape_pipeline.ticks.archive.store.layout import partition_file
from skewtape_pipeline.ticks.archive.store.placement import archive_state
from skewtape_pipeline.ticks.archive.store.tiers import ArchiveTiers
from skewtape_pipeline_tests.ticks.archive_builders import DAYS, POLICY, build_archive

SHA = "ab" * 32
COLD_FILE = "COLD/year=2026/part-x.parquet"
WARM_FILE = "WARM/year=2026/month=03/part-y.parquet"


def hot_path(symbol: str, day: date) -> str:
    """The stamp path re-tiering records: the hot file, relative to the archive root."""
    return ArchiveTiers.of("root").relative(partition_file("root", symbol, day))


def stamp(symbol: str, day: date, seed: int, *, path: str | None = None) -> SourceStamp:
    digest = f"{seed:02x}" * 32
    return SourceStamp(path or hot_path(symbol, day), digest, 10 + seed, 2**63 + seed, -seed)


def sample_catalog(generation: int = 3) -> Catalog:
    """Two tiers, a symbol that needs encoding, a stamp whose path is not the hot file's, a
    partition without a source (withdrawn), an inode above 2**63 and a negative mtime."""
    files = [
        CatalogFile(COLD_FILE, "COLD", "2026", 900, 7, SHA, 3),
        CatalogFile(WARM_FILE, "WARM", "2026-03", 300, 2, "cd" * 32, 1),
    ]
    es1, es2, nq, odd = date(2026, 1, 2), date(2026, 1, 3), date(2026, 1, 2), date(2026, 3, 1)
    partitions = [
        CatalogPartition("ES", es1, "COLD", COLD_FILE, 4, 500, stamp("ES", es1, 1)),
        CatalogPartition("ES", es2, "COLD", COLD_FILE, 3, 300, None),
        CatalogPartition("NQ", nq, "COLD", COLD_FILE, 1, 100, stamp("NQ", nq, 2, path="x/y")),
        CatalogPartition(".A/B é", odd, "WARM", WARM_FILE, 2, 300, stamp(".A/B é", odd, 3)),
    ]
    return Catalog(
        generation,
        {f.path: f for f in files},
        {p.key: p for p in partitions},
        frozenset({("ES", es2)}),
    )


def sample_table() -> pa.Table:
    """The sample catalog file as an Arrow table (its key-value metadata on the schema)."""
    return pq.read_table(io.BytesIO(sample_catalog().to_bytes()))


def write_table(root, table: pa.Table) -> None:
    pq.write_table(table, root / CATALOG_FILE)


# --- round trip, determinism, queries ------------------------------------------------------------


def test_read_catalog_when_absent_is_empty_generation_zero(tmp_path):
    assert CatalogStore(tmp_path).read() == Catalog()


def test_write_catalog_when_read_back_is_equal(tmp_path):
    CatalogStore(tmp_path).write(sample_catalog())
    assert CatalogStore(tmp_path).read() == sample_catalog()
    assert [p.name for p in tmp_path.iterdir()] == [CATALOG_FILE]  # no temporary left


def test_write_catalog_when_empty_reads_back_empty(tmp_path):
    CatalogStore(tmp_path).write(Catalog(generation=5))
    assert CatalogStore(tmp_path).read() == Catalog(generation=5)


def test_catalog_to_bytes_when_catalogs_equal_gives_equal_bytes():
    catalog = sample_catalog()
    reordered = Catalog(
        catalog.generation,
        dict(reversed(catalog.files.items())),
        dict(reversed(catalog.partitions.items())),
        catalog.withdrawn,
    )
    assert reordered.to_bytes() == catalog.to_bytes()
    assert sample_catalog(generation=4).to_bytes() != catalog.to_bytes()


def test_catalog_to_bytes_when_rows_differ_in_one_field_gives_other_bytes():
    catalog = sample_catalog()
    key = ("ES", date(2026, 1, 2))
    partitions = dict(catalog.partitions)
    partitions[key] = replace(partitions[key], byte_share=499)
    assert replace(catalog, partitions=partitions).to_bytes() != catalog.to_bytes()


def test_read_catalog_when_looked_up_by_key_matches_the_full_listing(tmp_path):
    CatalogStore(tmp_path).write(sample_catalog())
    for key, expected in sample_catalog().partitions.items():
        found = CatalogStore(tmp_path).read().partitions  # fresh: lookups before any full listing
        assert key in found and found[key] == expected and found.get(key) == expected
    found = CatalogStore(tmp_path).read().partitions
    for key in sample_catalog().partitions:  # several hits on one reading
        assert found[key] == sample_catalog().partitions[key]
    assert len(found) == 4 and dict(found.items()) == dict(sample_catalog().partitions)


@pytest.mark.parametrize(
    "key",
    [
        ("ES", date(2026, 1, 4)),
        ("ES", date(2026, 1, 1)),
        ("ZZ", date(2026, 1, 2)),
        ("ES", datetime(2026, 1, 2)),
        ("ES", "2026-01-02"),
        "ES",
    ],
)
def test_read_catalog_when_key_is_not_catalogued_finds_nothing(tmp_path, key):
    CatalogStore(tmp_path).write(sample_catalog())
    partitions = CatalogStore(tmp_path).read().partitions
    assert key not in partitions and partitions.get(key) is None


def test_write_catalog_when_stamp_is_the_hot_file_leaves_its_path_out(tmp_path):
    CatalogStore(tmp_path).write(sample_catalog())
    table = pq.read_table(CatalogStore(tmp_path).path)
    stored = dict(zip(table["symbol"].to_pylist(), table["source_path"].to_pylist(), strict=False))
    assert stored == {".A/B é": None, "ES": None, "NQ": "x/y"}
    assert CatalogStore(tmp_path).read().partitions[(".A/B é", date(2026, 3, 1))].source.path == (
        "symbol=%2EA%2FB%20%C3%A9/year=2026/month=03/date=2026-03-01/part-0.parquet"
    )


def test_catalog_file_when_queried_with_duckdb_returns_a_row_per_symbol_day(tmp_path):
    CatalogStore(tmp_path).write(sample_catalog())
    path = CatalogStore(tmp_path).path
    rows = duckdb.sql(
        f"SELECT symbol, date, file, rows, withdrawn, hex(source_sha256) FROM '{path}'"
    ).fetchall()
    expected = [
        (p.symbol, p.date, p.file, p.rows, p.key in sample_catalog().withdrawn, p.source)
        for p in sorted(sample_catalog().partitions.values(), key=lambda p: p.key)
    ]
    assert [row[:5] for row in rows] == [row[:5] for row in expected]
    assert [row[5] for row in rows] == [s and s.sha256.upper() for *_, s in expected]
    ((header,),) = duckdb.sql(
        f"SELECT value FROM parquet_kv_metadata('{path}') WHERE key = 'skewtape_catalog'"
    ).fetchall()
    assert {f["path"] for f in json.loads(header)["files"]} == {COLD_FILE, WARM_FILE}


def test_write_catalog_when_committed_by_retier_audit_names_the_file_sha256(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "fsync", lambda fd: None)
    as_of = DAYS[-1] + timedelta(days=14)
    root = build_archive(tmp_path, as_of=as_of, days=DAYS[:2])
    encoded, to_bytes = 0, Catalog.to_bytes

    def counted(catalog: Catalog) -> bytes:
        nonlocal encoded
        encoded += 1
        return to_bytes(catalog)

    monkeypatch.setattr(Catalog, "to_bytes", counted)
    Archive(root, policy=POLICY, audit_log=tmp_path / "audit.jsonl").retier(as_of=as_of)
    records = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
    moved, settled = [r for r in records if "catalog_sha256" in r]
    assert moved["symbol_days_moved"] == 6 and settled["generation"] == moved["generation"]
    assert settled["catalog_sha256"] == sha256_file(CatalogStore(root).path)
    assert encoded == 2  # each of the two commits builds the catalog's bytes once
    catalog = CatalogStore(root).read()
    assert len(catalog.partitions) == 6  # 3 symbols x 2 days
    # the moved hot files are gone, so the catalog no longer carries their stamps
    assert all(p.source is None for p in catalog.partitions.values())


# --- validation ---------------------------------------------------------------------------------


def set_column(table: pa.Table, name: str, values: list, type_: pa.DataType | None = None):
    index = table.schema.get_field_index(name)
    field = pa.field(name, type_ or table.schema.field(name).type)
    return table.set_column(index, field, pa.array(values, field.type))


def edit_header(table: pa.Table, edit) -> pa.Table:
    header = json.loads(table.schema.metadata[b"skewtape_catalog"])
    edit(header)
    return table.replace_schema_metadata({"skewtape_catalog": json.dumps(header)})


def edit_cell(name: str, row: int, value, type_: pa.DataType | None = None):
    def edit(table: pa.Table) -> pa.Table:
        values = table[name].to_pylist()
        values[row] = value
        return set_column(table, name, values, type_)

    return edit


def edit_file(index: int, **changes):
    return lambda t: edit_header(t, lambda h: h["files"][index].update(changes))


def swap_rows(table: pa.Table) -> pa.Table:
    return table.take([1, 0, 2, 3])


def repeat_row(table: pa.Table) -> pa.Table:
    return table.take([0, 0, 1, 2, 3])


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda t: edit_header(t, lambda h: h.update(version=2)), "field version: 2, expected 3"),
        (lambda t: edit_header(t, lambda h: h.update(format="x")), "field format"),
        (lambda t: edit_header(t, lambda h: h.update(generation=-1)), "field generation: -1"),
        (edit_file(0, tier="HOT"), r"files\[0\].tier"),
        (edit_file(1, sha256="AB" * 32), r"files\[1\].sha256"),
        (edit_file(0, x=1), r"files\[0\]: unknown keys"),
        (lambda t: t.replace_schema_metadata({}), "metadata skewtape_catalog: missing"),
        (lambda t: t.drop_columns(["rows"]), "column rows: missing"),
        (lambda t: t.append_column("tier", pa.array(["COLD"] * 4)), "column tier: not a catalog"),
        (lambda t: t.set_column(3, "rows", t["rows"].cast(pa.int32())), "column rows: type int32"),
        (edit_cell("symbol", 2, None), "column symbol, row 2: None, expected a value"),
        (edit_cell("symbol", 0, ""), "column symbol, row 0: '', expected a symbol"),
        (edit_cell("withdrawn", 1, None), "column withdrawn, row 1: None"),
        (edit_cell("rows", 3, -1), "column rows, row 3: -1, expected an int >= 0"),
        (edit_cell("source_size", 0, -5), "column source_size, row 0: -5"),
        (edit_cell("file", 1, "elsewhere"), "column file, row 1: 'elsewhere', expected a listed"),
        (edit_cell("source_inode", 1, None), "column source_inode, row 1: None, expected a"),
        (edit_cell("source_mtime_ns", 2, 7), "column source_mtime_ns, row 2: 7, expected a"),
        (edit_cell("source_path", 2, "x"), "column source_path, row 2: 'x', expected null"),
        (edit_cell("symbol", 0, "/" * 70), "column source_path, row 0: None, expected a path"),
        (swap_rows, "row 1: .A/B é 2026-03-01 out of order"),
        (repeat_row, "row 1: .A/B é 2026-03-01 listed twice"),
    ],
)  # fmt: skip
def test_read_catalog_when_malformed_names_the_column_and_row(tmp_path, edit, message):
    write_table(tmp_path, edit(sample_table()))
    with pytest.raises(TickFormatError, match=f"{CATALOG_FILE}: .*{message}"):
        CatalogStore(tmp_path).read()


def test_read_catalog_when_not_parquet_names_the_file(tmp_path):
    (tmp_path / CATALOG_FILE).write_bytes(b"PAR1 not really")
    with pytest.raises(TickFormatError, match=f"{CATALOG_FILE}: not a readable Parquet"):
        CatalogStore(tmp_path).read()


def test_read_catalog_when_a_bit_of_it_flipped_refuses_never_reads_another_catalog(tmp_path):
    CatalogStore(tmp_path).write(sample_catalog())
    path = tmp_path / CATALOG_FILE
    raw = path.read_bytes()
    changed = []
    for offset in range(4, len(raw) - 8):  # pages and footer (its length and magic: unreadable)
        path.write_bytes(raw[:offset] + bytes([raw[offset] ^ 0x01]) + raw[offset + 1 :])
        try:
            read = CatalogStore(tmp_path).read()
        except TickFormatError as exc:
            assert str(exc).startswith(f"{path}: ")
            continue
        if read != sample_catalog():
            changed.append(offset)
    assert changed == []


def test_read_catalog_when_day_out_of_python_range_names_the_row(tmp_path):
    days = pc.cast(sample_table()["date"], pa.int32()).to_pylist()
    days[3] = 3_000_000  # about year 10183
    table = set_column(sample_table(), "date", days, pa.int32())
    table = table.set_column(1, "date", pc.cast(table["date"], pa.date32()))
    write_table(tmp_path, table)
    with pytest.raises(TickFormatError, match="column date, row 3: 3000000"):
        CatalogStore(tmp_path).read()


def edit_partition(symbol: str, day: date, **changes):
    def edit(fields: dict) -> None:
        fields["partitions"][symbol, day] = replace(fields["partitions"][symbol, day], **changes)

    return edit


def edit_symbol(symbol: str, day: date, new: str):
    def edit(fields: dict) -> None:
        partition = fields["partitions"].pop((symbol, day))
        fields["partitions"][new, day] = replace(partition, symbol=new)

    return edit


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda c: c.update(files={}), r"partitions\[ES 2026-01-02\].file: .* not a listed file"),
        (lambda c: c.update(withdrawn=frozenset({("NQ", date(2026, 1, 9))})), "withdrawn: NQ"),
        (lambda c: c.update(generation=-1), "generation -1"),
        (
            edit_partition("NQ", date(2026, 1, 2), tier="WARM"),
            r"partitions\[NQ 2026-01-02\].tier: 'WARM', its file is COLD",
        ),
        (
            edit_partition("ES", date(2026, 1, 2), source=SourceStamp("p", "AB" * 32, 1, 1, 1)),
            r"partitions\[ES 2026-01-02\].source.sha256",
        ),
        (edit_partition("ES", date(2026, 1, 2), rows=2**63), "generation 3"),
        (edit_partition("ES", date(2026, 1, 2), date=date(2026, 1, 5)), "stored under the key"),
        (edit_partition("ES", date(2026, 1, 2), rows=-1), r"ES 2026-01-02\].rows: -1"),
        (edit_partition("ES", date(2026, 1, 2), byte_share=-2), r"\].byte_share: -2"),
        (
            edit_partition("ES", date(2026, 1, 2), source=SourceStamp("p", SHA, -3, 1, 1)),
            r"ES 2026-01-02\].source.size: -3",
        ),
        (
            edit_partition("ES", date(2026, 1, 2), source=SourceStamp("p", SHA, 1, -4, 1)),
            r"ES 2026-01-02\].source.inode: -4",
        ),
        (edit_symbol("ES", date(2026, 1, 2), ""), r"partitions\[ 2026-01-02\].symbol: ''"),
    ],
)
def test_write_catalog_when_catalog_would_not_read_back_raises_and_writes_nothing(
    tmp_path, edit, message
):
    fields = {**vars(sample_catalog()), "partitions": dict(sample_catalog().partitions)}
    edit(fields)
    with pytest.raises(TickFormatError, match=message):
        CatalogStore(tmp_path).write(Catalog(**fields))
    assert list(tmp_path.iterdir()) == []


# --- paths and the live state --------------------------------------------------------------------


def test_catalog_path_when_file_in_cold_root_names_the_tier_and_resolves_back(tmp_path):
    root = tmp_path / "archive"
    cold = tmp_path / "archive-cold" / "year=2026" / "part-1.parquet"
    rel = ArchiveTiers.of(root).relative(cold)
    assert rel == "COLD/year=2026/part-1.parquet"
    assert ArchiveTiers.of(root).resolve(rel) == cold


def test_archive_state_when_moved_hot_file_remains_marks_it_superseded(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "fsync", lambda fd: None)
    as_of = DAYS[-1] + timedelta(days=14)
    root = build_archive(tmp_path, as_of=as_of, days=DAYS[:2])
    hot_files = {h.path: h.path.read_bytes() for h in archive_state(root).hot_live}
    Archive(root, policy=POLICY).retier(as_of=as_of)
    for path, data in hot_files.items():  # put one back as a byte-identical copy (new inode)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        os.utime(path, ns=(0, 0))
        break
    state = archive_state(root)
    assert state.hot_live == []  # not published through the archive: not part of it
    problems = verify_archive(ArchiveCore(root, policy=POLICY)).problems
    assert [p for p in problems if "not in the hot index" in p and str(path) in p]
    Archive(root, policy=POLICY).rebuild_catalog()  # adopts it: its ticks are the copy's
    assert archive_state(root).hot_live == []
    Archive(root, policy=POLICY).retier(as_of=as_of)  # same bytes: recognised and removed
    state = archive_state(root)
    assert state.hot_live == [] and state.overridden == frozenset() and not path.exists()
