"""A month of ticks archived through Dagster on PostgreSQL with 1 and 2 Celery workers, against
the core doing the same work in one process (not a test).

Run: ``.venv/bin/python benchmarks/scale_out.py [--symbols 10000] [--days 30] [--workdir DIR]``.

**Data.** The sample publisher (``skewtape_pipeline.sample``: heavy-tailed thin trading, sweeps,
µs timestamps) publishes its four venues with ``fills_per_venue_month`` chosen so that about
``--symbols`` symbols trade a day over the venues (the sample averages about 7.8 trades per
symbol-day); the first month (2026-09) is the snapshot archived, and its first ``--days`` days
over every venue are the work: ``days x 4`` venue-days. It is generated once per ``--workdir``
(reused while its ``READY`` marker names the same options). Each contender gets its own data
root with the history hard-linked (read only) and an empty archive.

**Contenders**, one after the other:

- *core*: ``archive_venue_day`` (what each archiving op calls) for every venue-day, in this
  process, with the options the op builds.
- *core, two processes*: the same venue-days dealt out in turn to two processes writing one
  archive (no Dagster, no servers): the speed-up two writers can have on this machine at all,
  and the CPU seconds the same work costs when two run side by side.
- *Dagster, N workers* (N = 1, 2): a PostgreSQL 15 server and a Valkey broker started by the
  scale-out tests' helpers (``skewtape_pipeline_tests.scale_out.servers`` and
  ``celery_workers``: the benchmark imports them, so run it from the repository), a new database
  per contender with ``deploy/postgres/dagster.yaml``, ``dagster-daemon`` and
  ``dagster-webserver`` serving ``-m skewtape_pipeline.celery_definitions``, and N
  single-threaded Celery worker processes (``-P threads -c 1``, the shipped visibility timeout).
  The backfill is submitted as the UI submits it: the ``launchPartitionBackfill`` GraphQL
  mutation on the webserver, ``tick_archive`` over the venue-days. Wall time runs from that
  submission to the last run's success (the servers, daemon and workers are up before, and not
  counted).

Every contender's archive is then read through the ``ticks`` view and compared, symbol-day by
symbol-day (tick count and an md5 of its ticks in order), with the core's, and the core's counts
with the fills' (DuckDB over the month files); any difference stops the benchmark.

**Output**: the table (wall time, Dagster's share = (wall - core) / core, the speed-up of 2
workers over 1), PASS/FAIL for the bars (share at most 50% on one worker; 2 workers at least
1.6x faster than 1), where each Dagster run's time went (backfill daemon to run, queue and
launch, run start to first step, the archiving steps, the recording step, run end), and which
worker ran each archiving step when, with the time both workers were busy at once, and the CPU
seconds of every process by role. The core's line says how much of its time it spent inside the
archive's exclusive lock (this process times ``fsio.exclusive_lock``; the workers are not
touched) and the bound that puts on workers writing one archive. The load average is printed
beside each contender: the machine may be shared.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path
from statistics import median

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(Path(__file__).resolve().parent)]

import dagster as dg  # noqa: E402
import duckdb  # noqa: E402
from bench_util import fmt_float, markdown_table  # noqa: E402

from skewtape_pipeline import fsio  # noqa: E402
from skewtape_pipeline.orchestration.ticks.partitions import VENUES, dimension_key  # noqa: E402
from skewtape_pipeline.sample.publisher import publish_sample  # noqa: E402
from skewtape_pipeline.ticks.archive.core import ArchiveCore  # noqa: E402
from skewtape_pipeline.ticks.archive.handle import Archive  # noqa: E402
from skewtape_pipeline.ticks.archive.ops.query import run_query  # noqa: E402
from skewtape_pipeline.ticks.archive.store.policy import TierPolicy  # noqa: E402
from skewtape_pipeline.ticks.fills.snapshot_fills import today_utc  # noqa: E402
from skewtape_pipeline.ticks.fills.venue_days import VenueDayOptions, archive_venue_day  # noqa: E402
from skewtape_pipeline_tests.scale_out.servers import (  # noqa: E402
    Broker,
    PostgresServer,
    free_port,
    start_broker,
    start_postgres,
)

MONTH = "2026-09"
MONTH_DAYS = 30
TRADES_PER_SYMBOL_DAY = 7.76
"""The sample's trades per symbol-day with trades (measured: 400,000 trades, 51,575 symbol-days)."""
SAMPLE_VENUES = 4
CODE_LOCATION = "skewtape_pipeline.celery_definitions"
INSTANCE_FILE = REPO / "deploy" / "postgres" / "dagster.yaml"
SHIPPED_VISIBILITY_TIMEOUT = 3600
BAR_SHARE = 0.50
BAR_SPEEDUP = 1.6
RUN_TIMEOUT = 6 * 3600.0

LAUNCH_BACKFILL = """
mutation($backfillParams: LaunchBackfillParams!) {
  launchPartitionBackfill(backfillParams: $backfillParams) {
    __typename
    ... on LaunchBackfillSuccess { backfillId }
    ... on PythonError { message stack }
    ... on PartitionKeysNotFoundError { message }
    ... on UnauthorizedError { message }
  }
}
"""
LOCATION_STATUS = """
{ workspaceOrError { __typename ... on Workspace { locationEntries {
    name loadStatus locationOrLoadError { __typename ... on PythonError { message } } } } } }
"""


def load() -> str:
    """The load averages (1, 5, 15 minutes)."""
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


# --- the month ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Month:
    """The published sample and the venue-days of the benchmark."""

    root: Path
    days: list[date]
    venues: list[str]

    @property
    def history(self) -> Path:
        return self.root / "history"

    @property
    def fills_files(self) -> list[str]:
        return sorted(str(p) for p in (self.history / MONTH).glob(f"fills/*/{MONTH}.parquet"))

    @property
    def partition_keys(self) -> list[str]:
        """The backfill's keys, as the UI names multi-partition keys (``<date>|<venue>``)."""
        return sorted(f"{d.isoformat()}|{dimension_key(v)}" for d in self.days for v in self.venues)


def fills_per_venue_month(symbols: int) -> int:
    """The publisher's option giving about ``symbols`` traded symbols a day over the venues."""
    return max(100, round(symbols * MONTH_DAYS * TRADES_PER_SYMBOL_DAY / SAMPLE_VENUES))


def generate_month(workdir: Path, symbols: int, days: int) -> Month:
    """Publish the sample once per ``workdir`` and options (a ``READY`` marker records them)."""
    root = workdir / "sample"
    options = {"fills_per_venue_month": fills_per_venue_month(symbols)}
    marker = root / "READY"
    if not (marker.exists() and json.loads(marker.read_text()) == options):
        shutil.rmtree(root, ignore_errors=True)
        started = time.perf_counter()
        publish_sample(root, **options)
        marker.write_text(json.dumps(options))
        print(f"published the sample ({options}) in {time.perf_counter() - started:.0f} s\n")
    first = date.fromisoformat(f"{MONTH}-01")
    month = Month(root, [first + timedelta(days=i) for i in range(days)], [])
    venues = duckdb.sql(
        "SELECT DISTINCT venue FROM read_parquet($f) ORDER BY ALL", params={"f": month.fills_files}
    ).fetchall()
    return Month(root, month.days, [v for (v,) in venues])


def fills_counts(month: Month) -> dict[tuple[str, str], int]:
    """{(symbol, day): trades} of the benchmark's days in the month files."""
    rows = duckdb.sql(
        "SELECT venue || ':' || market_id, strftime((ts AT TIME ZONE 'UTC')::DATE, '%Y-%m-%d'), "
        "count(*) FROM read_parquet($f) WHERE (ts AT TIME ZONE 'UTC')::DATE "
        "BETWEEN $a::DATE AND $b::DATE GROUP BY ALL",
        params={"f": month.fills_files, "a": month.days[0], "b": month.days[-1]},
    ).fetchall()
    return {(symbol, day): n for symbol, day, n in rows}


def data_root(folder: Path, month: Month) -> Path:
    """A contender's data root: the month's history hard-linked, no archive."""
    root = folder / "skewtape"
    root.mkdir(parents=True)
    subprocess.run(["cp", "-al", str(month.history), str(root / "history")], check=True)
    return root


def archive_digest(root: Path) -> dict[tuple[str, str], tuple[int, str]]:
    """{(symbol, day): (ticks, md5 of its ticks in order)} through the ``ticks`` view."""
    rows = run_query(
        "SELECT symbol, strftime(date, '%Y-%m-%d') AS day, count(*) AS n, "
        "md5(string_agg(concat_ws(',', epoch_ns(ts), price, quantity, side), ';' "
        "ORDER BY ts, price, quantity, side)) AS digest FROM ticks GROUP BY ALL",
        ArchiveCore(root / "archive"),
    ).to_pylist()
    return {(r["symbol"], r["day"]): (r["n"], r["digest"]) for r in rows}


# --- the core -----------------------------------------------------------------------------------


LOCK_HELD: list[float] = []
"""Seconds each exclusive lock of the core was held, in the core contender."""


@contextlib.contextmanager
def _timed_lock(*args, **kwargs):
    with _UNTIMED_LOCK(*args, **kwargs):
        taken = time.perf_counter()
        try:
            yield
        finally:
            LOCK_HELD.append(time.perf_counter() - taken)


_UNTIMED_LOCK = fsio.exclusive_lock
fsio.exclusive_lock = _timed_lock  # the core takes it as fsio.exclusive_lock: timed, unchanged


def core_options(root: Path, batch: str) -> VenueDayOptions:
    """What the archiving op passes ``archive_venue_day``, for the data root ``root``."""
    archive = Archive(root / "archive", policy=TierPolicy(), audit_log=root / "audit.jsonl")
    return VenueDayOptions(archive=archive, as_of=today_utc(), batch=batch)


def run_core(folder: Path, month: Month) -> tuple[Path, float, float, dict[str, float]]:
    """Every venue-day through ``archive_venue_day`` in this process; (data root, wall
    seconds, CPU seconds of this process, {partition key: seconds})."""
    root = data_root(folder, month)
    options = core_options(root, "core")
    each: dict[str, float] = {}
    LOCK_HELD.clear()
    started, cpu = time.perf_counter(), time.process_time()
    for day in month.days:
        for venue in month.venues:
            begun = time.perf_counter()
            archive_venue_day(root / "history", (venue, day), options)
            each[f"{day.isoformat()}|{dimension_key(venue)}"] = time.perf_counter() - begun
    return root, time.perf_counter() - started, time.process_time() - cpu, each


def _archive_share(root: str, keys: list[tuple[str, str]]) -> float:
    """(In a child process.) Archive the venue-days ``keys`` ((venue, ISO day)) of the data
    root ``root``; the CPU seconds of the work."""
    options = core_options(Path(root), "core-two-processes")
    cpu = time.process_time()
    for venue, day in keys:
        archive_venue_day(Path(root) / "history", (venue, date.fromisoformat(day)), options)
    return time.process_time() - cpu


def run_core_two_processes(folder: Path, month: Month) -> tuple[Path, float, list[float]]:
    """The core's venue-days dealt out in turn to two processes writing one archive, as a run's
    archiving steps deal theirs (no Dagster, no servers): what two writers can gain on this
    machine. (data root, wall seconds from the submission to both done, the CPU seconds of each
    process's work)."""
    root = data_root(folder, month)
    keys = sorted((venue, day.isoformat()) for day in month.days for venue in month.venues)
    spawn = multiprocessing.get_context("spawn")
    started = time.perf_counter()
    with ProcessPoolExecutor(2, mp_context=spawn) as pool:
        cpu = list(pool.map(_archive_share, [str(root)] * 2, [keys[0::2], keys[1::2]]))
    return root, time.perf_counter() - started, cpu


# --- CPU accounting -----------------------------------------------------------------------------

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
ROLES = [
    ("Celery worker (the archiving steps)", ("celery", "worker")),
    (
        "run workers (multiprocessing children of the code server: each run's Celery executor "
        "loop)",
        ("multiprocessing",),
    ),
    ("code server (gRPC)", ("grpc",)),
    ("dagster-daemon", ("dagster-daemon",)),
    ("dagster-webserver", ("dagster-webserver",)),
]


def _process_table() -> dict[int, tuple[int, float, str]]:
    """{pid: (parent pid, CPU seconds so far, command line)} of every readable process."""
    table = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        cpu = (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
        table[int(entry.name)] = (int(fields[1]), cpu, command)
    return table


def _reaped_cpu(pid: int) -> float:
    """CPU seconds of the ended children ``pid`` has waited for (PostgreSQL's postmaster: its
    backends, one per connection: Dagster's PostgreSQL storage opens one per operation)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[13]) + int(fields[14])) / CLOCK_TICKS


class CpuAccount:
    """CPU seconds of this process's descendants and of the PostgreSQL backends serving
    ``database``, sampled every half second while a contender runs, by role (processes living
    less than half a second are missed; those running at the start count from then on)."""

    def __init__(self, database: str, postmaster: int):
        self.database, self.seen, self.baseline = database, {}, {}
        self.postmaster, self.reaped = postmaster, -_reaped_cpu(postmaster)
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> CpuAccount:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.done.set()
        self.thread.join()
        self.reaped += _reaped_cpu(self.postmaster)

    def _sample(self) -> None:
        me, first = os.getpid(), True
        while True:
            table = _process_table()
            for pid, (_, cpu, command) in table.items():
                if self.database in command or self._descends(pid, table, me):
                    known = self.seen.get(pid, (0.0, ""))[1]
                    self.seen[pid] = (cpu, known or command)  # an ended child has none
                    if first:  # running before: only what it spends from now on counts
                        self.baseline[pid] = cpu
            first = False
            if self.done.wait(0.5):
                return

    @staticmethod
    def _descends(pid: int, table: dict, ancestor: int) -> bool:
        while pid in table and pid > 1:
            pid = table[pid][0]
            if pid == ancestor:
                return True
        return False

    def by_role(self) -> list[tuple[str, float]]:
        """CPU seconds per role (the roles' first matching words of the command line)."""
        totals: dict[str, float] = {}
        other = "other (each under 1 CPU s)"
        for pid, (cpu, command) in self.seen.items():
            cpu -= self.baseline.get(pid, 0.0)
            role = f"other: {command[:50]}"
            if self.database in command:
                role = "PostgreSQL (the instance's database)"
            else:
                role = next(
                    (name for name, words in ROLES if all(w in command for w in words)), role
                )
            totals[role] = totals.get(role, 0.0) + cpu
        backends = "PostgreSQL backends (the server's, ended ones included)"
        totals[backends] = totals.pop("PostgreSQL (the instance's database)", 0.0) + self.reaped
        small = {role for role, cpu in totals.items() if role.startswith("other:") and cpu < 1}
        totals[other] = sum(totals.pop(role) for role in small)
        return sorted(totals.items(), key=lambda item: -item[1])


# --- Dagster ------------------------------------------------------------------------------------


@dataclass
class DagsterOutcome:
    root: Path
    wall: float
    run_ids: list[str]
    runs: list[dict] = field(default_factory=list)
    worker_pids: dict[str, int] = field(default_factory=dict)
    cpu: list[tuple[str, float]] = field(default_factory=list)
    steps: list[dict] = field(default_factory=list)


class Services:
    """The daemon, the webserver and the Celery workers of one contender."""

    def __init__(self, folder: Path, env: dict[str, str], worker_names: list[str], broker_url):
        from skewtape_pipeline_tests.scale_out.celery_workers import start_workers

        self.folder, self.env, self.port = folder, env, free_port()
        self.processes: list[subprocess.Popen] = []
        self.workers = start_workers(
            worker_names,
            folder / "workers",
            broker_url=broker_url,
            visibility_timeout=SHIPPED_VISIBILITY_TIMEOUT,
        )
        bin_dir = Path(sys.executable).parent
        try:
            self._start("daemon", [str(bin_dir / "dagster-daemon"), "run", "-m", CODE_LOCATION])
            self._start(
                "webserver",
                [str(bin_dir / "dagster-webserver"), "-m", CODE_LOCATION, "-h", "127.0.0.1",
                 "-p", str(self.port)],
            )  # fmt: skip
        except BaseException:
            self.stop()
            raise

    def _start(self, name: str, command: list[str]) -> None:
        log = open(self.folder / f"{name}.log", "wb")  # noqa: SIM115 (kept open while it runs)
        self.processes.append(
            subprocess.Popen(command, env=self.env, stdout=log, stderr=subprocess.STDOUT)
        )

    def graphql(self, query: str, variables: dict | None = None) -> dict:
        body = json.dumps({"query": query, "variables": variables or {}}).encode()
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/graphql",
            data=body,
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=120) as response:
            answer = json.loads(response.read())
        if answer.get("errors"):
            raise RuntimeError(f"GraphQL errors: {answer['errors']}")
        return answer["data"]

    def wait_until_loaded(self, timeout: float = 180.0) -> None:
        """Until the webserver answers and its code location is loaded."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for process in self.processes:
                if process.poll() is not None:
                    raise RuntimeError(f"a Dagster service exited; see {self.folder}/*.log")
            try:
                entries = self.graphql(LOCATION_STATUS)["workspaceOrError"]["locationEntries"]
            except OSError:
                time.sleep(0.5)
                continue
            if entries and all(e["loadStatus"] == "LOADED" for e in entries):
                errors = [
                    e
                    for e in entries
                    if e["locationOrLoadError"]["__typename"] != "RepositoryLocation"
                ]
                if errors:
                    raise RuntimeError(f"the code location failed to load: {errors}")
                return
            time.sleep(0.5)
        raise RuntimeError(f"the webserver did not load {CODE_LOCATION} in {timeout} s")

    def stop(self) -> None:
        for process in self.processes:
            process.terminate()
        for process in self.processes:
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=30)
        self.workers.stop()


def run_dagster(
    folder: Path, month: Month, postgres: PostgresServer, broker: Broker, workers: int
) -> DagsterOutcome:
    """The month as a UI backfill on ``workers`` Celery workers; the outcome and its timeline."""
    root = data_root(folder, month)
    dagster_home = folder / "dagster_home"
    dagster_home.mkdir()
    shutil.copy(INSTANCE_FILE, dagster_home / "dagster.yaml")
    database = postgres.create_database(f"bench_{workers}w_{os.getpid()}")
    env = {
        **os.environ,
        **postgres.environment(database),
        "DAGSTER_HOME": str(dagster_home),
        "SKEWTAPE_HOME": str(root),
        "SKEWTAPE_CELERY_BROKER": broker.url(0),
        "SKEWTAPE_CELERY_BACKEND": broker.url(1),
        "PYTHONPATH": str(REPO),
    }
    os.environ.update(env)  # the workers inherit this process's environment
    (folder / "workers").mkdir()
    with dg.DagsterInstance.from_config(str(dagster_home)) as instance:
        instance.add_dynamic_partitions(VENUES, [dimension_key(v) for v in month.venues])
        services = Services(folder, env, [f"w{i + 1}" for i in range(workers)], broker.url(0))
        try:
            services.wait_until_loaded()
            with CpuAccount(database, postgres.postmaster_pid()) as cpu:
                submitted = time.time()
                backfill_id = launch_backfill(services, month.partition_keys)
                runs = wait_for_backfill(instance, backfill_id)
            wall = max(r.end_time for r in runs) - submitted
            outcome = DagsterOutcome(root, wall, [r.dagster_run.run_id for r in runs])
            outcome.cpu = cpu.by_role()
            outcome.runs = timelines(instance, runs, submitted)
            outcome.steps = step_spread(instance, runs, submitted)
            outcome.worker_pids = {
                services.workers.hostname(name): process.pid
                for name, process in services.workers.processes.items()
            }
        finally:
            services.stop()
    return outcome


def launch_backfill(services: Services, keys: list[str]) -> str:
    """``launchPartitionBackfill`` of ``tick_archive`` over ``keys``, as the UI sends it."""
    params = {
        "assetSelection": [{"path": ["tick_archive"]}],
        "partitionNames": keys,
        "fromFailure": False,
        "tags": [],
    }
    answer = services.graphql(LAUNCH_BACKFILL, {"backfillParams": params})
    result = answer["launchPartitionBackfill"]
    if result["__typename"] != "LaunchBackfillSuccess":
        raise RuntimeError(f"the backfill was refused: {result}")
    return result["backfillId"]


def wait_for_backfill(instance: dg.DagsterInstance, backfill_id: str) -> list:
    """The run records of a finished backfill; RuntimeError when it or a run failed."""
    from dagster._core.execution.backfill import BulkActionStatus
    from dagster._core.storage.tags import BACKFILL_ID_TAG

    deadline = time.monotonic() + RUN_TIMEOUT
    while time.monotonic() < deadline:
        backfill = instance.get_backfill(backfill_id)
        records = instance.get_run_records(dg.RunsFilter(tags={BACKFILL_ID_TAG: backfill_id}))
        finished = records and all(r.dagster_run.is_finished for r in records)
        if backfill.status != BulkActionStatus.REQUESTED and finished:
            failed = [r.dagster_run.run_id for r in records if not r.dagster_run.is_success]
            if failed or backfill.status != BulkActionStatus.COMPLETED_SUCCESS:
                raise RuntimeError(
                    f"backfill {backfill_id} {backfill.status}; failed runs {failed}"
                )
            return records
        time.sleep(0.5)
    raise RuntimeError(f"backfill {backfill_id} did not finish in {RUN_TIMEOUT} s")


def _events(instance: dg.DagsterInstance, run_id: str) -> list:
    return [r for r in instance.all_logs(run_id) if r.dagster_event is not None]


VENUE_DAY_LOGGED = re.compile(r"^(\S+\|\S+): \d+ symbol-day\(s\) archived")
"""The archiving op's message after each venue-day."""


def _kind(event) -> str:
    return event.dagster_event.event_type_value


def run_timeline(instance: dg.DagsterInstance, record, submitted: float) -> dict[str, object]:
    """One run's moments, in seconds after the backfill's submission."""
    events = _events(instance, record.dagster_run.run_id)
    first: dict[str, float] = {}
    for event in events:
        first.setdefault(_kind(event), event.timestamp)
    starts = {e.step_key: e.timestamp for e in events if _kind(e) == "STEP_START"}
    ends = {e.step_key: e.timestamp for e in events if _kind(e) == "STEP_SUCCESS"}
    shards = [key for key in ends if "archive_venue_days" in key]
    (recording,) = [key for key in ends if "record_tick_archive" in key]
    created = record.create_timestamp.timestamp()
    tags = record.dagster_run.tags
    moments = {
        "created": created,
        "launched": first.get("PIPELINE_STARTING", created),
        "started": first["PIPELINE_START"],
        "first step": min(starts.values()),
        "archiving done": max(ends[key] for key in shards),
        "recording started": starts[recording],
        "recording done": ends[recording],
        "success": record.end_time,
    }
    timeline: dict[str, object] = {
        "run": record.dagster_run.run_id[:8],
        "partitions": f"{tags.get('dagster/asset_partition_range_start')} .. "
        f"{tags.get('dagster/asset_partition_range_end')}",
    }
    timeline.update({name: at - submitted for name, at in moments.items()})
    timeline["step seconds"] = sum(ends[key] - starts[key] for key in shards)
    return timeline


def timelines(instance: dg.DagsterInstance, runs: list, submitted: float) -> list[dict]:
    """Every run's timeline, in the order the runs were created."""
    records = sorted(runs, key=lambda r: r.create_timestamp.timestamp())
    return [run_timeline(instance, record, submitted) for record in records]


def where_the_time_went(
    outcome: DagsterOutcome, workers: int, core_each: dict[str, float]
) -> list[tuple[str, str]]:
    """The wall time along its path (the runs overlap: the backfill creates them together),
    and how busy the workers were while archiving."""
    runs, steps = outcome.runs, outcome.steps
    first_step = min(s["start"] for s in steps)
    last_step = max(s["end"] for s in steps)
    busy = sum(s["end"] - s["start"] for s in steps)
    window = last_step - first_step
    pickup = [s["start"] - s["submitted"] for s in steps if "submitted" in s]
    spans = [
        ("submission -> first run created (backfill daemon)", min(r["created"] for r in runs)),
        ("first run created -> first archiving step started (run queue, run launch, "
         "run worker start, Celery submission and pickup)",
         first_step - min(r["created"] for r in runs)),
        ("first archiving step started -> last archiving step done", window),
        ("last archiving step done -> last run's success (recording steps, run ends)",
         outcome.wall - last_step),
    ]  # fmt: skip
    rows = [(name, fmt_float(seconds, 1)) for name, seconds in spans]
    rows.append(("(the wall time)", fmt_float(outcome.wall, 1)))
    rows.append(("archiving steps' own seconds, summed", fmt_float(busy, 1)))
    rows.append((
        f"worker seconds idle while archiving ({workers} x the window - the steps' seconds)",
        fmt_float(workers * window - busy, 1),
    ))  # fmt: skip
    inside = sum(max(s["logged"].values()) - s["start"] for s in steps if s["logged"])
    same = sum(core_each[key] for s in steps for key in s["logged"])
    rows.append((
        "of which: step start -> its last venue-day done (the op's work), summed",
        fmt_float(inside, 1),
    ))  # fmt: skip
    rows.append(("(the same venue-days in the core)", fmt_float(same, 1)))
    rows.append(("Celery task submitted -> step started, median", fmt_float(median(pickup), 2)))
    rows.append(("recording steps, summed (each venue-day's metadata)", fmt_float(
        sum(r["recording done"] - r["recording started"] for r in runs), 1)))  # fmt: skip
    return rows


def step_spread(instance: dg.DagsterInstance, runs: list, submitted: float) -> list[dict]:
    """Each archiving step: its worker and when it was submitted, started and done (seconds
    after the backfill's submission)."""
    steps = []
    for record in runs:
        by_step: dict[str, dict] = {}
        for event in instance.all_logs(record.dagster_run.run_id):
            key = event.step_key
            if not key or "archive_venue_days" not in key:
                continue
            step = by_step.setdefault(
                key,
                {
                    "run": record.dagster_run.run_id[:8],
                    "step": key.rsplit(".", 1)[-1],
                    "logged": {},
                },
            )
            at = event.timestamp - submitted
            if event.dagster_event is None:
                logged = VENUE_DAY_LOGGED.match(event.user_message or "")
                if logged:
                    step["logged"][logged.group(1)] = at
            elif _kind(event) == "ENGINE_EVENT":
                worker = event.dagster_event.engine_event_data.metadata.get("Celery worker")
                if worker is not None:
                    step["worker"] = worker.value
                elif "Submitting celery task" in (event.user_message or ""):
                    step["submitted"] = at
            elif _kind(event) == "STEP_START":
                step["start"] = at
            elif _kind(event) == "STEP_SUCCESS":
                step["end"] = at
        steps += by_step.values()
    return sorted(steps, key=lambda s: s["start"])


def overlap(steps: list[dict]) -> float:
    """Seconds during which at least two workers ran an archiving step at once."""
    points = sorted(
        [(s["start"], 1, s["worker"]) for s in steps] + [(s["end"], -1, s["worker"]) for s in steps]
    )
    busy: dict[str, int] = {}
    total, last = 0.0, None
    for at, change, worker in points:
        if last is not None and sum(1 for n in busy.values() if n > 0) >= 2:
            total += at - last
        busy[worker] = busy.get(worker, 0) + change
        last = at
    return total


# --- checking and printing ----------------------------------------------------------------------


def check_same_ticks(name: str, root: Path, expected: dict) -> None:
    """Raise SystemExit naming the first differing symbol-days when ``root``'s archive differs."""
    got = archive_digest(root)
    if got == expected:
        return
    missing = sorted(set(expected) - set(got))[:5]
    extra = sorted(set(got) - set(expected))[:5]
    differ = sorted(k for k in set(got) & set(expected) if got[k] != expected[k])[:5]
    raise SystemExit(
        f"FAIL: {name} archived other ticks than the core: {len(got)} symbol-days against "
        f"{len(expected)}; missing {missing}, extra {extra}, different {differ}"
    )


def print_report(month, symbol_days, ticks, core, core_each, pairs, outcomes, loads) -> None:
    one, two = outcomes[1], outcomes[2]
    pair, pair_cpu, core_cpu = pairs
    share = (one.wall - core) / core
    speedup = one.wall / two.wall
    print(
        f"\n## Tick archive backfill: {len(month.days)} days x {len(month.venues)} venues "
        f"({len(month.partition_keys)} venue-days, one backfill), {symbol_days:,} symbol-days "
        f"({symbol_days / len(month.days):,.0f} a day), {ticks:,} ticks\n"
    )
    rows = [
        ("core, one process", fmt_float(core, 1), "", "", loads["core"]),
        ("core, two processes (no Dagster)", fmt_float(pair, 1), "", f"{core / pair:.2f}x "
         "over one process", loads["core-2"]),
    ]  # fmt: skip
    for workers, outcome in sorted(outcomes.items()):
        rows.append((
            f"Dagster on PostgreSQL, {workers} Celery worker{'s' if workers > 1 else ''}",
            fmt_float(outcome.wall, 1),
            f"{(outcome.wall - core) / core:.1%}",
            f"{one.wall / outcome.wall:.2f}x" if workers > 1 else "",
            loads[workers],
        ))  # fmt: skip
    headers = ["contender", "wall s", "Dagster's share", "speed-up over 1 worker", "load avg"]
    print(markdown_table(headers, rows))
    print(
        "\nDagster's share: (Dagster's wall - the core's) / the core's; wall from the "
        "GraphQL submission to the run's success. Load average (1, 5, 15 min) after each."
    )
    print(
        f"The core's work took {core_cpu:.1f} CPU s in one process and {sum(pair_cpu):.1f} in two "
        f"({' + '.join(f'{c:.1f}' for c in pair_cpu)}): what two writers side by side cost "
        "this machine per unit of work."
    )
    passed = "PASS" if share <= BAR_SHARE else "FAIL"
    print(f"\n{passed}: Dagster's share on 1 worker {share:.1%} (bar: at most {BAR_SHARE:.0%})")
    passed = "PASS" if speedup >= BAR_SPEEDUP else "FAIL"
    print(f"{passed}: 2 workers {speedup:.2f}x faster than 1 (bar: at least {BAR_SPEEDUP}x, "
          f"on {os.cpu_count()} cores)")  # fmt: skip
    for workers, outcome in sorted(outcomes.items()):
        print_timeline(workers, outcome, core_each)


def print_timeline(workers: int, outcome: DagsterOutcome, core_each: dict[str, float]) -> None:
    """Where one Dagster contender's time went, and which worker ran each archiving step."""
    print(f"\n### Dagster on {workers} worker(s): where the time went\n")
    print(markdown_table(["span", "seconds"], where_the_time_went(outcome, workers, core_each)))
    print("\nCPU seconds from the submission to the end, by process (sampled from /proc):\n")
    print(markdown_table(["process", "CPU s"], [(r, fmt_float(c, 1)) for r, c in outcome.cpu]))
    print(
        "\nRuns (seconds after the submission; the backfill creates one per venue or "
        "per day, whichever are fewer):\n"
    )
    names = ["created", "launched", "started", "first step", "archiving done", "recording done",
             "success"]  # fmt: skip
    rows = [(r["run"], r["partitions"], *(fmt_float(r[n], 1) for n in names)) for r in outcome.runs]
    print(markdown_table(["run", "partitions", *names], rows))
    print("\nArchiving steps (seconds after the submission):\n")
    rows = [
        (s["run"], s["step"], s.get("worker", "?"), outcome.worker_pids.get(s.get("worker"), ""),
         fmt_float(s.get("submitted", 0.0), 1), fmt_float(s["start"], 1), fmt_float(s["end"], 1),
         fmt_float(s["end"] - s["start"], 1))
        for s in outcome.steps
    ]  # fmt: skip
    headers = ["run", "step", "Celery worker", "worker pid", "submitted", "started", "done",
               "seconds"]  # fmt: skip
    print(markdown_table(headers, rows))
    used = sorted({s.get("worker", "?") for s in outcome.steps})
    print(
        f"\nWorkers that ran archiving steps: {', '.join(used)}; two workers running archiving "
        f"steps at the same time for {overlap(outcome.steps):.1f} s of {outcome.wall:.1f} s."
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--symbols", type=int, default=10_000, help="traded symbols a day")
    parser.add_argument("--days", type=int, default=MONTH_DAYS, help=f"days (1..{MONTH_DAYS})")
    parser.add_argument("--workdir", type=Path, help="scratch (default: a temporary folder)")
    parser.add_argument("--keep", action="store_true", help="keep the contenders' folders")
    args = parser.parse_args(argv)
    if not 1 <= args.days <= MONTH_DAYS:
        parser.error(f"--days must be within 1..{MONTH_DAYS}")
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="skewtape-scale-out-"))
    workdir.mkdir(parents=True, exist_ok=True)
    print(f"scratch {workdir}; {os.cpu_count()} cores; load average {load()}")
    month = generate_month(workdir, args.symbols, args.days)
    runs = workdir / "runs"
    shutil.rmtree(runs, ignore_errors=True)
    try:
        expected = fills_counts(month)
        print(f"core: {len(month.partition_keys)} venue-days ...", flush=True)
        core_root, core, core_cpu, core_each = run_core(runs / "core", month)
        held = sum(LOCK_HELD) / core
        print(
            f"core: {core:.1f} s wall, {core_cpu:.1f} s CPU ({core_cpu / core:.2f} cores busy); "
            f"{held:.0%} of it inside the archive's exclusive lock ({len(LOCK_HELD):,} times), "
            f"so workers writing one archive are at most {1 / (held + (1 - held) / 2):.2f}x "
            "faster with 2 (Amdahl)"
        )
        loads = {"core": load()}
        reference = archive_digest(core_root)
        if {k: n for k, (n, _) in reference.items()} != expected:
            raise SystemExit("FAIL: the core's archive does not hold exactly the fills' ticks")
        print("core, two processes ...", flush=True)
        pair_root, pair, pair_cpu = run_core_two_processes(runs / "core-2", month)
        loads["core-2"] = load()
        check_same_ticks("the core in two processes", pair_root, reference)
        postgres = start_postgres()
        broker = start_broker(workdir / "broker")
        outcomes = {}
        try:
            for workers in (1, 2):
                print(f"Dagster, {workers} worker(s) ...", flush=True)
                outcome = run_dagster(runs / f"dagster-{workers}", month, postgres, broker, workers)
                loads[workers] = load()
                check_same_ticks(f"Dagster on {workers} worker(s)", outcome.root, reference)
                outcomes[workers] = outcome
        finally:
            broker.stop()
            postgres.stop()
        pairs = (pair, pair_cpu, core_cpu)
        print_report(month, len(expected), sum(expected.values()), core, core_each, pairs,
                     outcomes, loads)  # fmt: skip
    finally:
        if not args.keep:
            shutil.rmtree(runs, ignore_errors=True)
            if args.workdir is None:
                shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
