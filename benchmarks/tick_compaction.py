"""Tick archive benchmark: bytes per tick and ticks per second, ours against the anchors.

Run with ``make bench`` (it builds ``.bench-venv`` with the anchors) or directly::

    .bench-venv/bin/python benchmarks/tick_compaction.py [--ticks N] [--workdir DIR]

Prints one markdown table per dataset (the whole file, and split per symbol-day when the file
holds more than one), the ratio of our bytes per tick to the best anchor's, and PASS/FAIL for
the bars. Ours uses the configuration a user would pass for each source (timestamp unit and
scales, checked exact on the data); the line under each table title says which. Everything
runs on one pinned CPU; scratch files go under ``--workdir`` (a fresh temporary folder by
default) and are removed unless ``--keep``.

Its scale part (``tick_scale.py``: canonical CSVs of 2M, 20M and 200M synthetic ticks through
``compact-ticks`` end to end, beside pyarrow's ``read_csv`` + ``write_table``; the 200M file is
about 8 GB in ``--workdir``) runs last; ``--scale-ticks`` picks the sizes (``0`` skips it).

Its archive lifecycle part (the real Kalshi file split into symbol-days, written hot, re-tiered
cold, then queried by symbol and date through the ``ticks`` view, against the same anchors
stored whole) is ``archive_tiers.py``, which ``make bench`` runs after this one.
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import tick_scale
from bench_util import (
    fmt_float,
    fmt_int,
    fmt_rate,
    fmt_ratio,
    geomean,
    markdown_table,
    pin_to_one_core,
    timed,
)
from tick_anchors import ANCHORS, YARDSTICKS, Part, fresh_dir
from tick_data import REAL_LOADERS, Ticks, symbol_days, synthetic_ticks

REPO = Path(__file__).resolve().parent.parent
DEFAULT_DATA = REPO.parent / "shared" / "data" / "real-ticks"
COLD_BAR_EACH = 0.85
COLD_BAR_GEOMEAN = 0.8
HOT_BAR_TICKS_PER_S = 6_000_000


@dataclasses.dataclass
class Result:
    name: str
    bytes: int
    seconds: float
    kind: str  # "ours", "anchor" or "yardstick"
    error: str | None = None
    counted: bool = True  # False: an "ours" row printed for information, never for a bar


def whole_parts(ticks: Ticks) -> list[Part]:
    multi = ticks.symbols is not None
    return [Part("whole", ticks.symbol, None, ticks, with_symbol=multi)]


def split_parts(ticks: Ticks) -> list[Part]:
    return [Part(f"{s}/{d}", s, d, t, with_symbol=False) for s, d, t in symbol_days(ticks)]


def run_contenders(
    parts: list[Part], workdir: Path, ours: dict[str, object], skip: set[str]
) -> list[Result]:
    results = []
    for kind, contenders in (("ours", ours), ("anchor", ANCHORS), ("yardstick", YARDSTICKS)):
        for name, fn in contenders.items():
            if any(s.lower() in name.lower() for s in skip):
                continue
            scratch = fresh_dir(workdir / "scratch")
            if hasattr(fn, "prepare"):
                fn.prepare(parts)  # untimed set-up (conversion, raw-size measurement)
            try:
                size, seconds = timed(lambda fn=fn, scratch=scratch: fn(parts, scratch))
            except Exception as exc:  # a contender that fails is reported, not fatal
                error = f"{type(exc).__name__}: {exc}"
                results.append(Result(name, 0, 0.0, kind, error=error))
                print(f"  {name}: FAILED {error}", file=sys.stderr, flush=True)
                continue
            counted = getattr(fn, "counted", True)
            results.append(Result(name, size, seconds, kind, counted=counted))
            print(f"  {name}: {size:,} B in {seconds:.2f} s", file=sys.stderr, flush=True)
    shutil.rmtree(workdir / "scratch", ignore_errors=True)
    return results


def best_anchor(results: list[Result]) -> Result:
    return min((r for r in results if r.kind == "anchor" and not r.error), key=lambda r: r.bytes)


def headroom(results: list[Result]) -> float | None:
    """pcodec's bytes over the best anchor's (the yardstick no engine reads), or None."""
    rows = [r for r in results if r.kind == "yardstick" and not r.error and "pcodec" in r.name]
    return rows[0].bytes / best_anchor(results).bytes if rows else None


def counted_ours(results: list[Result]) -> Result | None:
    """The row of ours that counts for the bars (failed: None)."""
    mine = [r for r in results if r.kind == "ours" and r.counted]
    if not mine or mine[0].error:
        return None
    return mine[0]


def render(
    title: str, n: int, source_bytes: int | None, results: list[Result], note: str = ""
) -> str:
    best = best_anchor(results)
    rows = []
    for r in sorted(
        results, key=lambda r: ({"ours": 0, "anchor": 1, "yardstick": 2}[r.kind], r.bytes)
    ):
        if r.error:
            rows.append([f"**{r.name}**", "failed", "", "", "", r.error[:120].replace("|", "/")])
            continue
        rows.append(
            [
                f"**{r.name}**" if r.kind == "ours" else r.name,
                fmt_int(r.bytes),
                fmt_float(r.bytes / n, 2),
                fmt_ratio(r.bytes / best.bytes),
                fmt_float(source_bytes / r.bytes, 1) + "x" if source_bytes else "",
                fmt_rate(n, r.seconds),
            ]
        )
    headers = ["contender", "bytes", "bytes/tick", "vs best anchor", "vs source", "ticks/s"]
    lead = f"#### {title} ({n:,} ticks)\n\n" + (f"{note}\n\n" if note else "")
    return lead + markdown_table(headers, rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ticks", type=int, default=10_000_000, help="synthetic batch size")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="folder of real files")
    parser.add_argument("--workdir", type=Path, default=None, help="scratch folder (default: temp)")
    parser.add_argument("--keep", action="store_true", help="keep the scratch files")
    parser.add_argument("--cpu", type=int, default=None, help="CPU to pin to (default: last)")
    parser.add_argument("--skip", action="append", default=[], help="skip contenders matching")
    parser.add_argument("--no-synthetic", action="store_true", help="real files only")
    parser.add_argument(
        "--scale-ticks",
        default=",".join(str(n) for n in tick_scale.DEFAULT_SIZES),
        help="sizes of the scale section, comma separated (0: skip it)",
    )
    args = parser.parse_args(argv)

    print(pin_to_one_core(args.cpu), file=sys.stderr)
    if args.workdir is not None:
        args.workdir.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="tick-bench-", dir=args.workdir))
    skip = set(args.skip)
    try:
        import tick_ours
    except ImportError as exc:  # our tick engine not importable: anchors only
        print(f"our tick engine is not available ({exc}); anchors only", file=sys.stderr)
        tick_ours = None
    ours_contenders = tick_ours.ours_contenders if tick_ours else None
    throughput_check = tick_ours.throughput_check if tick_ours else None

    datasets: list[tuple[Ticks, bool]] = []
    if not args.no_synthetic:
        datasets.append((synthetic_ticks(args.ticks), False))
    for filename, loader in REAL_LOADERS.items():
        path = args.data / filename
        if path.exists():
            ticks = loader(path)
            datasets.append((ticks, True))
            if tick_ours:
                verdict = tick_ours.check_readers_match_ours(ticks, path)
                print(
                    f"{ticks.name}: project reader vs benchmark loader: {verdict}", file=sys.stderr
                )
                tick_ours.check_tkc1_matches_ours(ticks)
        else:
            print(f"missing real file {path}; skipped", file=sys.stderr)

    out: list[str] = []
    cold_ratios: list[tuple[str, float | None, float | None]] = []
    try:
        for ticks, real in datasets:
            print(f"{ticks.name}: whole file", file=sys.stderr)
            ours, note = ours_contenders("whole", ticks) if ours_contenders else ({}, "")
            whole = run_contenders(whole_parts(ticks), workdir, ours, skip)
            title = f"{ticks.name}: whole file"
            out.append(render(title, len(ticks), ticks.source_bytes, whole, note))
            if ours and real:
                mine = counted_ours(whole)
                ratio = None if mine is None else mine.bytes / best_anchor(whole).bytes
                cold_ratios.append((ticks.name, ratio, headroom(whole)))
                if mine is not None:
                    out.append(column_breakdown(ticks, workdir))
            parts = split_parts(ticks)
            if len(parts) > 1:
                print(f"{ticks.name}: {len(parts)} symbol-days", file=sys.stderr)
                ours, note = ours_contenders("split", ticks) if ours_contenders else ({}, "")
                split = run_contenders(parts, workdir, ours, skip)
                title = f"{ticks.name}: split into {len(parts):,} symbol-days"
                out.append(render(title, len(ticks), ticks.source_bytes, split, note))
        out.append(bars(cold_ratios, datasets, throughput_check, workdir))
        sizes = [int(n) for n in args.scale_ticks.split(",") if int(n)]
        if sizes:
            print(f"scale: {sizes}", file=sys.stderr)
            table = tick_scale.run(sizes, workdir, workdir, memory_limit="2G", keep=False)
            out.append("#### Scale: canonical CSV through compact-ticks end to end\n\n" + table)
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    print("\n\n".join(out))
    return 0


def column_breakdown(t: Ticks, workdir: Path) -> str:
    """Where the bytes of ours' counted whole-file row go (written again, untimed): each
    column chunk's compressed bytes and encodings, the rest of the file (footer, page index,
    magic), and beside each measured column the trial bytes of the candidates that chose it."""
    import pyarrow.parquet as pq
    import tick_ours

    contender = next(iter(tick_ours.ours_contenders("whole", t)[0].values()))
    part = whole_parts(t)[0]
    scratch = fresh_dir(workdir / "breakdown")
    contender.prepare([part])
    contender([part], scratch)
    (path,) = [p for p in scratch.rglob("*.parquet") if not p.name.startswith("_")]
    trials = tick_ours.parquet_file.choose_encodings(
        tick_ours.parquet_file.archive_table(tick_ours.to_batch(t)),
        tick_ours.POLICY.settings_for(tick_ours.COLD),
        ts_sorted=t.symbols is None,
    ).trial_bytes
    meta = pq.read_metadata(path)
    columns: dict[str, tuple[int, set[str]]] = {}
    for g in range(meta.num_row_groups):
        for c in range(meta.num_columns):
            chunk = meta.row_group(g).column(c)
            size, encodings = columns.get(chunk.path_in_schema, (0, set()))
            levels_free = set(chunk.encodings) - {"RLE"}  # RLE: the levels
            columns[chunk.path_in_schema] = (
                size + chunk.total_compressed_size,
                encodings | levels_free,
            )
    n, total = len(t), path.stat().st_size
    pieces = []
    for name, (size, encodings) in columns.items():
        tried = ", ".join(f"{enc} {b:,}" for enc, b in trials.get(name, {}).items())
        pieces.append(
            f"{name} {size:,} B ({size / n:.3f}/tick, {'+'.join(sorted(encodings))}"
            + (f"; trials {tried}" if tried else "")
            + ")"
        )
    rest = total - sum(size for size, _ in columns.values())
    pieces.append(f"footer, page index and magic {rest:,} B ({rest / n:.3f}/tick)")
    shutil.rmtree(scratch, ignore_errors=True)
    return f"ours by column ({total:,} B, {total / n:.3f} B/tick): " + "; ".join(pieces)


def bars(cold_ratios, datasets, throughput_check, workdir: Path) -> str:
    lines = ["#### Bars"]
    if not cold_ratios:
        lines.append("- our tick engine not available: no bar evaluated")
        return "\n".join(lines)
    for name, ratio, pcodec in cold_ratios:
        if ratio is None:
            lines.append(f"- FAIL cold, {name}: ours failed (see its table)")
            continue
        verdict = "PASS" if ratio <= COLD_BAR_EACH else "FAIL"
        room = "" if pcodec is None else f"; headroom: pcodec level 12 {pcodec:.3f}x"
        lines.append(
            f"- {verdict} cold, {name}: {ratio:.3f}x the best anchor's bytes/tick "
            f"(bar <= {COLD_BAR_EACH}x{room})"
        )
    measured = [r for _, r, _ in cold_ratios if r is not None]
    if len(measured) == len(cold_ratios):
        gm = geomean(measured)
        verdict = "PASS" if gm <= COLD_BAR_GEOMEAN else "FAIL"
        lines.append(
            f"- {verdict} cold, geometric mean over the real files: {gm:.3f}x "
            f"(bar <= {COLD_BAR_GEOMEAN}x)"
        )
    else:
        lines.append("- FAIL cold, geometric mean: ours failed on a real file")
    synthetic = next((t for t, real in datasets if not real), None)
    if throughput_check is not None and synthetic is not None:
        try:
            rate, detail = throughput_check(synthetic, workdir)
        except Exception as exc:  # reported as a failed bar
            lines.append(f"- FAIL hot throughput: ours failed ({type(exc).__name__}: {exc})")
        else:
            verdict = "PASS" if rate >= HOT_BAR_TICKS_PER_S else "FAIL"
            lines.append(
                f"- {verdict} hot, validate + encode + write + verify on one core: "
                f"{rate / 1e6:.2f} M ticks/s (bar >= {HOT_BAR_TICKS_PER_S / 1e6:.0f} M) {detail}"
            )
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
