"""Fetch benchmark: a delta of about 1 GB from loopback nginx and SeaweedFS (S3), ours against
``rclone copy``, ``curl`` and ``aria2c`` on the same files, then the apply after our fetch.

Run with ``make -C benchmarks fetch`` or directly (the benchmarks' venv, Debian's nginx, rclone,
curl and aria2 installed)::

    .bench-venv/bin/python benchmarks/fetch.py [--month-mb 520] [--workdir DIR] [--keep] \
        [--repeat N]

The delta is the one ``delta_apply.py`` generates (reused from ``--workdir`` when present): its
parent snapshot ``history/2026-11`` and ``deltas/2026-12``, served as a publisher serves them by
nginx (on a free 127.0.0.1 port; listings on, which only rclone's http backend needs) and
uploaded to a SeaweedFS bucket. Each contender fetches ``deltas/2026-12`` into a fresh folder
with 4 parallel transfers:

- ours: ``fetch_deltas`` (sha256 while streaming, checked against CHECKSUMS.sha256 and the
  manifest, staged, renamed into place, hashes recorded for the apply);
- ``rclone copy`` (``--transfers 4``; it checks nothing here: over S3 it would check an
  object's MD5 against its ETag, but the objects are uploaded in parts, whose ETag is no MD5);
- ``curl --parallel`` (no verification), and ``aria2c -j 4`` given each file's sha256 (verified).

Every contender's time ends once its files are on disk (``sync``; ours fsyncs each file before
its rename). After one untimed copy from each server (a warm-up), ours and rclone take turns on
each server for ``--repeat`` rounds, alternating which goes first; each round's ratio is
printed, and the bar is met in the median. Then the apply after our fetch (``catch_up``,
versioned), with the bytes hashed per phase, and a fetch broken at 50% (a proxy cuts the
connection) resumed by a rerun, counting what the rerun transfers. Prints markdown tables and
PASS/FAIL for the bars: ours at least as fast as rclone on both servers; fetch plus apply within
1.2x of fetch alone plus the apply's merges (no second hash pass); after a cut at 50%, the
resumed fetch transfers at most 55% of the bytes.
"""

from __future__ import annotations

import argparse
import itertools
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parent.parent))  # the tests' servers

from bench_util import markdown_table
from delta_apply import NEXT_MONTH, PARENT_MONTHS, HashMeter, generate, remove

FETCH_BAR, APPLY_BAR, RESUME_BAR = 1.0, 1.2, 0.55
CONNECTIONS = 4
DELTA = f"deltas/{NEXT_MONTH}"
BUCKET = "bench"


@dataclass
class Row:
    contender: str
    server: str
    seconds: float
    size: int
    hashed: int | None
    verified: str

    def cells(self) -> list[object]:
        rate = self.size / self.seconds / 1e6 if self.seconds else 0.0
        hashed = "-" if self.hashed is None else f"{self.hashed / 1e6:,.0f}"
        return [self.contender, self.server, f"{self.seconds:.2f}", f"{rate:,.0f}", hashed,
                self.verified]  # fmt: skip


def listed_files(delta: Path) -> dict[str, str]:
    """{path: sha256} of the delta's CHECKSUMS.sha256, plus the file itself (no sha256)."""
    from skewtape_pipeline.hashing import parse_checksums

    checksums = delta / "CHECKSUMS.sha256"
    listed = parse_checksums(checksums.read_bytes(), source=checksums)
    return {**listed, "CHECKSUMS.sha256": ""}


def age(folder: Path) -> None:
    """Date every file a day back, as a publisher's files are."""
    when = time.time() - 86_400
    for path in folder.rglob("*"):
        if path.is_file():
            os.utime(path, (when, when))


def subscriber(parent: Path, root: Path) -> Path:
    """A data root holding a copy of the parent month, its hash cache warm."""
    from skewtape_pipeline.mirror.verify import verify_snapshot

    remove(root)
    shutil.copytree(parent, root / "history" / PARENT_MONTHS[-1])
    verify_snapshot(root / "history" / PARENT_MONTHS[-1])
    return root


def flushed(target: Path) -> None:
    os.sync()
    remove(target)
    target.mkdir(parents=True)


def timed_run(command: list[str], env: dict[str, str] | None = None) -> float:
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=3600)
    os.sync()  # on disk, as ours is (it fsyncs each file before the rename)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{command[0]} failed ({done.returncode}): {done.stderr[-2000:]}")
    return seconds


# --- contenders ---------------------------------------------------------------------------------


def ours(url: str, root: Path, server: str, size: int) -> tuple[Row, object]:
    from skewtape_pipeline.mirror.fetch import fetch_deltas
    from skewtape_pipeline.mirror.sources import TransferSettings

    os.sync()
    start = time.perf_counter()
    result = fetch_deltas(url, root, settings=TransferSettings(connections=CONNECTIONS))
    os.sync()
    seconds = time.perf_counter() - start
    month = result.months[0]
    return Row("ours (fetch)", server, seconds, size, month.bytes_hashed, "sha256"), month


def rclone_http(url: str, target: Path, size: int) -> Row:
    flushed(target)
    seconds = timed_run(["rclone", "copy", "--http-url", f"{url}/{DELTA}/", ":http:", str(target),
                         "--transfers", str(CONNECTIONS)])  # fmt: skip
    return Row("rclone copy", "nginx", seconds, size, None, "none")


def rclone_s3(server, target: Path, size: int) -> Row:
    flushed(target)
    plain = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}  # its own CA
    env = {**plain, **rclone_env(server)}
    seconds = timed_run(["rclone", "copy", f":s3:{BUCKET}/{DELTA}", str(target),
                         "--transfers", str(CONNECTIONS)], env)  # fmt: skip
    return Row("rclone copy", "SeaweedFS", seconds, size, None, "none (multipart ETags)")


def rclone_env(server) -> dict[str, str]:
    credentials = server.environment()
    return {
        "RCLONE_S3_PROVIDER": "Other",
        "RCLONE_S3_ENDPOINT": f"http://{server.endpoint}",
        "RCLONE_S3_ACCESS_KEY_ID": credentials["AWS_ACCESS_KEY_ID"],
        "RCLONE_S3_SECRET_ACCESS_KEY": credentials["AWS_SECRET_ACCESS_KEY"],
        "RCLONE_S3_REGION": "us-east-1",
        "RCLONE_S3_FORCE_PATH_STYLE": "true",
    }


def curl(url: str, files: dict[str, str], target: Path, size: int) -> Row:
    flushed(target)
    command = ["curl", "--parallel", "--parallel-max", str(CONNECTIONS), "-sS", "--fail",
               "--create-dirs"]  # fmt: skip
    for rel in files:
        command += ["-o", str(target / rel), f"{url}/{DELTA}/{rel}"]
    return Row("curl --parallel", "nginx", timed_run(command), size, None, "none")


def aria2c(url: str, files: dict[str, str], target: Path, size: int) -> Row:
    flushed(target)
    lines = []
    for rel, digest in files.items():
        lines.append(f"{url}/{DELTA}/{rel}\n  out={rel}\n")
        if digest:
            lines.append(f"  checksum=sha-256={digest}\n")
    listing = target.parent / "aria2.list"
    listing.write_text("".join(lines))
    command = ["aria2c", "-q", "-i", str(listing), "-d", str(target), "-j", str(CONNECTIONS),
               "-x", "1", "--check-integrity=true", "--allow-overwrite=true",
               "--file-allocation=none"]  # fmt: skip
    return Row("aria2c -j 4", "nginx", timed_run(command), size, size, "sha256")


# --- the run --------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, default=None, help="data and runs (default: temp)")
    parser.add_argument("--month-mb", type=int, default=520, help="size of each new fills month")
    parser.add_argument("--parent-month-mb", type=int, default=90, help="size of older months")
    parser.add_argument("--markets", type=int, default=1_200_000, help="rows of markets")
    parser.add_argument("--keep", action="store_true", help="keep the generated data")
    parser.add_argument("--repeat", type=int, default=1,
                        help="rounds of ours against rclone on each server (alternating which "
                             "goes first); prints each round's ratio and the median")  # fmt: skip
    args = parser.parse_args(argv)
    owned = args.workdir is None
    workdir = Path(tempfile.mkdtemp(prefix="fetch-bench-")) if owned else args.workdir
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        paths = generate(workdir / "data", month_mb=args.month_mb,
                         parent_month_mb=args.parent_month_mb, markets=args.markets)  # fmt: skip
        print(run_all(workdir, paths, max(1, args.repeat)))
    finally:
        if owned and not args.keep:
            remove(workdir)
    return 0


def run_all(workdir: Path, paths: dict[str, Path], repeat: int = 1) -> str:
    from skewtape_pipeline_tests.mirror.publisher_servers import start_nginx
    from skewtape_pipeline_tests.scale_out.servers import start_seaweedfs

    publisher = workdir / "data"
    age(publisher / DELTA)
    files = listed_files(paths["delta"])
    size = sum((paths["delta"] / rel).stat().st_size for rel in files)
    nginx = start_nginx(publisher, workdir / "nginx", listings=True)
    weed = start_seaweedfs(BUCKET)
    try:
        upload(weed, paths["delta"])
        return measure(workdir, paths, nginx, weed, files, size, repeat)
    finally:
        nginx.stop()
        weed.stop()


def upload(server, delta: Path) -> None:
    from pyarrow import fs as pafs

    credentials = server.environment()
    client = pafs.S3FileSystem(
        access_key=credentials["AWS_ACCESS_KEY_ID"],
        secret_key=credentials["AWS_SECRET_ACCESS_KEY"],
        endpoint_override=server.endpoint,
        scheme="http",
        region="us-east-1",
    )
    for path in delta.rglob("*"):
        if path.is_file() and ".skewtape" not in path.parts:
            key = f"{BUCKET}/{DELTA}/{path.relative_to(delta).as_posix()}"
            with client.open_output_stream(key) as out, open(path, "rb") as source:
                shutil.copyfileobj(source, out, 8 << 20)
    os.environ.update(credentials)


def measure(workdir, paths, nginx, weed, files, size, repeat) -> str:
    from skewtape_pipeline.mirror.catchup import catch_up

    roots = {"nginx": subscriber(paths["parent"], workdir / "mirror"),
             "SeaweedFS": subscriber(paths["parent"], workdir / "mirror-s3")}  # fmt: skip
    rclone_http(nginx.url, workdir / "rclone", size)  # warm-up, not timed: every server has
    rclone_s3(weed, workdir / "rclone-s3", size)  # served each file once before the rounds
    rounds = [versus_rclone(workdir, roots, nginx, weed, size, first) for first in
              itertools.islice(itertools.cycle(("ours", "rclone")), repeat)]  # fmt: skip
    remove(roots["SeaweedFS"])
    rows = [row for row in rounds[0] if row.server == "nginx"]
    rows.append(curl(nginx.url, files, workdir / "curl", size))
    rows.append(aria2c(nginx.url, files, workdir / "aria2", size))
    rows += [row for row in rounds[0] if row.server == "SeaweedFS"]
    root = roots["nginx"]  # the apply follows ours over nginx of the last round

    meter = HashMeter()
    with meter.active():
        start = time.perf_counter()
        applied = catch_up(root / "history", root / "deltas")
        apply_seconds = time.perf_counter() - start
    phases = applied[0].seconds
    resumed = resume_after_cut(workdir, paths, nginx, size)
    return render(rows, size, apply_seconds, phases, meter, resumed, rounds)


def versus_rclone(workdir: Path, roots, nginx, weed, size: int, first: str) -> list[Row]:
    """One round: ours and rclone over nginx, then over SeaweedFS, ``first`` going first on
    each server; the four rows. Ours fetches into ``roots[server]``, its deltas removed first."""
    contenders = {
        "nginx": {"ours": lambda: ours_again(nginx.url, roots["nginx"], "nginx", size),
                  "rclone": lambda: rclone_http(nginx.url, workdir / "rclone", size)},
        "SeaweedFS": {"ours": lambda: ours_again(weed.uri(""), roots["SeaweedFS"], "SeaweedFS",
                                                 size),
                      "rclone": lambda: rclone_s3(weed, workdir / "rclone-s3", size)},
    }  # fmt: skip
    order = (first, "rclone" if first == "ours" else "ours")
    return [contenders[server][name]() for server in contenders for name in order]


def ours_again(url: str, root: Path, server: str, size: int) -> Row:
    """Ours into ``root`` once the deltas an earlier round fetched are removed."""
    remove(root / "deltas")
    return ours(url, root, server, size)[0]


def resume_after_cut(workdir: Path, paths, nginx, size: int) -> tuple[int, int]:
    """(bytes the first, cut run sent, bytes the rerun sent) through a counting proxy."""
    from skewtape_pipeline.errors import TransferError
    from skewtape_pipeline.mirror.fetch import fetch_deltas
    from skewtape_pipeline.mirror.sources import TransferSettings
    from skewtape_pipeline_tests.mirror.publisher_servers import Fault, FaultProxy

    root = subscriber(paths["parent"], workdir / "mirror-resume")
    cut = FaultProxy(nginx.port)
    cut.add(Fault("cut", after=size // 2))
    try:
        fetch_deltas(cut.url, root, settings=TransferSettings(connections=1, attempts=1))
    except TransferError:
        pass
    finally:
        cut.close()
    again = FaultProxy(nginx.port)
    try:
        fetch_deltas(again.url, root, settings=TransferSettings(connections=CONNECTIONS))
    finally:
        again.close()
    remove(root)
    return cut.bytes_down, again.bytes_down


def render(rows, size, apply_seconds, phases, meter, resumed, rounds) -> str:
    table = markdown_table(
        ["contender", "server", "seconds", "MB/s", "MB hashed", "verified"],
        [row.cells() for row in rows],
    )
    fetch_row = {row.server: row for row in rows if row.contender.startswith("ours")}
    rclone_row = {row.server: row for row in rows if row.contender.startswith("rclone")}
    merges = phases.get("merges", 0.0)
    fetch_s = fetch_row["nginx"].seconds
    apply_table = markdown_table(
        ["phase", "seconds", "MB hashed"],
        [["fetch (nginx)", f"{fetch_s:.2f}", f"{(fetch_row['nginx'].hashed or 0) / 1e6:,.0f}"]]
        + [[f"apply: {k}", f"{v:.2f}", f"{meter.by_phase.get(k, 0) / 1e6:,.0f}"]
           for k, v in phases.items()]
        + [["apply, whole", f"{apply_seconds:.2f}",
            f"{sum(meter.by_phase.values()) / 1e6:,.0f}"]],
    )  # fmt: skip
    ratio = (fetch_s + apply_seconds) / (fetch_s + merges)
    first, rerun = resumed
    bars = [
        _bar(fetch_row[s].seconds <= FETCH_BAR * rclone_row[s].seconds,
             f"ours at least as fast as rclone over {s}: {fetch_row[s].seconds:.2f} s vs "
             f"{rclone_row[s].seconds:.2f} s")
        if len(rounds) == 1 else
        _bar(statistics.median(_ratio(r, s) for r in rounds) <= FETCH_BAR,
             f"ours at least as fast as rclone over {s} in the median of {len(rounds)} rounds: "
             f"{statistics.median(_ratio(r, s) for r in rounds):.2f}x rclone's time")
        for s in ("nginx", "SeaweedFS")
    ] + [
        _bar(ratio <= APPLY_BAR, f"fetch + apply {fetch_s + apply_seconds:.2f} s is {ratio:.2f}x "
             f"fetch + merges {fetch_s + merges:.2f} s (bar {APPLY_BAR}x)"),
        _bar(rerun <= RESUME_BAR * size, f"after a cut at 50% ({first / 1e6:,.0f} MB sent), the "
             f"rerun sent {rerun / 1e6:,.0f} MB = {rerun / size:.0%} of {size / 1e6:,.0f} MB "
             f"(bar {RESUME_BAR:.0%})"),
        f"bytes hashed twice by the apply: {meter.twice / 1e6:,.0f} MB",
    ]  # fmt: skip
    return "\n\n".join(
        [f"### Fetching a {size / 1e6:,.0f} MB delta over loopback ({CONNECTIONS} transfers)",
         table, *round_lines(rounds), "### The apply after our fetch (versioned)", apply_table,
         "\n".join(bars)]
    )  # fmt: skip


def round_lines(rounds: list[list[Row]]) -> list[str]:
    """Ours over rclone's time in every round, per server, and the median (with more than
    one round)."""
    if len(rounds) < 2:
        return []
    lines = []
    for server in ("nginx", "SeaweedFS"):
        ratios = [_ratio(rows, server) for rows in rounds]
        faster = sum(r <= FETCH_BAR for r in ratios)
        shown = ", ".join(f"{r:.2f}" for r in ratios)
        lines.append(
            f"- {server}: ours / rclone in {len(ratios)} rounds: {shown}; median "
            f"{statistics.median(ratios):.2f}; ours at least as fast in {faster}"
        )
    return ["### Every round (alternating which goes first)", "\n".join(lines)]


def _ratio(rows: list[Row], server: str) -> float:
    mine = next(r for r in rows if r.server == server and r.contender.startswith("ours"))
    theirs = next(r for r in rows if r.server == server and r.contender.startswith("rclone"))
    return mine.seconds / theirs.seconds


def _bar(ok: bool, text: str) -> str:
    return f"- {'PASS' if ok else 'FAIL'}: {text}"


if __name__ == "__main__":
    sys.exit(main())
