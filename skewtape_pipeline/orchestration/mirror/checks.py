"""Asset checks on each month of the history snapshot; each reads the month's folder on disk.

They are blocking, so nothing downstream of a month runs in the same run when one fails. A
month whose verification fails is never recorded as materialized in the first place: the graph's
last op raises (a failing check alone does not stop the materialization being recorded).

A month the ``catch_up_months`` job applies (several in one op, no asset in its run) gets the
same checks' results, judged by the same code: :func:`month_check_evaluations`, which its op
logs right after each month's materialization.

Their problems name paths under the data root as ``$SKEWTAPE_HOME/...`` (``SkewtapeHome.shown``),
never by the machine's folders.
"""

import functools
import warnings
from collections.abc import Callable
from pathlib import Path

import dagster as dg

# not exported by dagster 1.13, though AssetCheckEvaluation (public) takes it
from dagster._core.definitions.asset_checks.asset_check_evaluation import (
    AssetCheckEvaluationTargetMaterializationData as TargetMaterialization,
)

from skewtape_pipeline.errors import SkewtapeError, VerificationError
from skewtape_pipeline.mirror.format import TABLE_KEYS, SnapshotManifest
from skewtape_pipeline.mirror.snapshot import SEAL_FILES, list_folder, read_snapshot
from skewtape_pipeline.mirror.tables import key_problems, parquet_rows, read_table
from skewtape_pipeline.mirror.verify import verify_snapshot
from skewtape_pipeline.orchestration.mirror.metadata import verify_metadata
from skewtape_pipeline.orchestration.shared.keys import HISTORY_SNAPSHOT
from skewtape_pipeline.orchestration.shared.metadata import problems_metadata
from skewtape_pipeline.orchestration.shared.partitions import month_partitions
from skewtape_pipeline.orchestration.shared.resources import SkewtapeHome

REFUSED_MONTH_NOTE = (
    " A month the run refused (its delta does not verify, an earlier month is missing, ...) "
    "leaves this check 'Execution failed' without a partition: Dagster records no result for a "
    "check whose asset's op failed. The reason is the run's failure message and an observation "
    "on the month's partition (`<month> refused (<error>): <reason>`, the asset's Events)."
)
"""Said by every month check's description: what a refused month shows there, and where its
reason is."""

MetadataDict = dict[str, dg.MetadataValue]
Judgement = tuple[list[str], MetadataDict]
"""What a check found in a month's folder: its problems, and metadata beside them."""

Judge = Callable[[Path], Judgement]
"""A month check's logic: the month's folder -> its :data:`Judgement`."""

MONTH_JUDGES: dict[str, Judge] = {}
"""Each month check's logic by check name (what :func:`month_check_evaluations` runs)."""


def _judged(judge: Judge, skewtape: SkewtapeHome, month: str) -> tuple[bool, MetadataDict]:
    """Whether ``judge`` passes ``month``'s folder, and the check's metadata: its problems as
    the UI may show them (``SkewtapeHome.shown``), then the judge's other metadata."""
    problems, metadata = judge(skewtape.snapshot_dir(month))
    shown = [skewtape.shown(problem) for problem in problems]
    return not problems, {**problems_metadata(shown), **metadata}


def _month_check(description: str):
    """A blocking check per month partition (a preview feature of Dagster 1.13, used knowingly),
    named after the decorated ``judge(snapshot)``, which it runs on the partition's month; its
    description followed by :data:`REFUSED_MONTH_NOTE`."""

    def decorate(judge: Judge):
        MONTH_JUDGES[judge.__name__] = judge

        def check(context: dg.AssetCheckExecutionContext, skewtape: SkewtapeHome):
            passed, metadata = _judged(judge, skewtape, context.partition_key)
            return dg.AssetCheckResult(passed=passed, metadata=metadata)

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", dg.PreviewWarning)
            return dg.asset_check(
                asset=HISTORY_SNAPSHOT,
                partitions_def=month_partitions,
                blocking=True,
                description=description + REFUSED_MONTH_NOTE,
                name=judge.__name__,
            )(check)

    return decorate


def _against_manifest(judge: Callable[[Path, SnapshotManifest], Judgement]) -> Judge:
    """A month check's logic that judges the month's folder against its manifest: a manifest
    that cannot be read is the check's one problem (``judge`` is not called)."""

    @functools.wraps(judge)
    def judged(snapshot: Path) -> Judgement:
        try:
            manifest, _, _ = read_snapshot(snapshot)
        except SkewtapeError as exc:
            return [str(exc)], {}
        return judge(snapshot, manifest)

    return judged


@_month_check("Every file matches CHECKSUMS.sha256 and the manifest (cached hashes trusted).")
def checksums_verified(snapshot: Path) -> Judgement:
    try:
        verified = verify_snapshot(snapshot)
    except VerificationError as exc:
        return exc.problems, {}
    return [], verify_metadata(verified)


@_month_check("Each reference table's key is unique and never null.")
def keys_unique(snapshot: Path) -> Judgement:
    problems: list[str] = []
    for rel, keys in TABLE_KEYS.items():
        if not (snapshot / rel).exists():
            continue
        try:
            problems += key_problems(read_table(snapshot / rel, columns=keys), keys, name=rel)
        except SkewtapeError as exc:
            problems.append(str(exc))
    return problems, {}


@_month_check("Every Parquet file has the row count its manifest entry records.")
@_against_manifest
def row_counts_match(snapshot: Path, manifest: SnapshotManifest) -> Judgement:
    problems: list[str] = []
    counted = 0
    for entry in manifest.files:
        if entry.rows is None:
            continue
        try:
            found = parquet_rows(snapshot / entry.path)
        except SkewtapeError as exc:
            problems.append(str(exc))
            continue
        counted += found
        if found != entry.rows:
            problems.append(f"{entry.path}: has {found} rows; the manifest records {entry.rows}")
    return problems, {"rows": dg.MetadataValue.int(counted)}


@_month_check("The folder holds no file the manifest does not list (no leftovers, no links).")
@_against_manifest
def no_unlisted_files(snapshot: Path, manifest: SnapshotManifest) -> Judgement:
    listing = list_folder(snapshot)
    listed = set(manifest.by_path()) | set(SEAL_FILES)
    problems = [
        f"{rel}: is not listed in the manifest" for rel in listing.files if rel not in listed
    ]
    problems += [f"{rel}: is a leftover temporary file" for rel in listing.temps]
    problems += [f"{rel}: is a link" for rel in listing.symlinks]
    problems += [f"{rel}: is not a regular file" for rel in listing.others]
    return problems, {"files": dg.MetadataValue.int(len(listing.files))}


month_checks = [checksums_verified, keys_unique, row_counts_match, no_unlisted_files]


def month_check_evaluations(
    instance: dg.DagsterInstance, skewtape: SkewtapeHome, month: str
) -> list[dg.AssetCheckEvaluation]:
    """The results of every month check on ``month`` (its folder in ``skewtape``), as a run of the
    checks records them: on the month's partition, blocking, targeting the month's latest
    materialization in ``instance`` (log them after it: the UI counts a partition's check result
    only when it targets the partition's latest materialization, else the partition shows the
    check as missing). For a job that applies months without the asset (``catch_up_months``),
    so each month it applies shows its checks as a month applied alone does."""
    [latest] = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=HISTORY_SNAPSHOT, asset_partitions=[month]), limit=1
    ).records
    target = TargetMaterialization(
        storage_id=latest.storage_id, run_id=latest.run_id, timestamp=latest.timestamp
    )
    evaluations = []
    for name, judge in MONTH_JUDGES.items():
        passed, metadata = _judged(judge, skewtape, month)
        evaluations.append(
            dg.AssetCheckEvaluation(
                asset_key=HISTORY_SNAPSHOT,
                check_name=name,
                passed=passed,
                metadata=metadata,
                target_materialization_data=target,
                blocking=True,
                partition=month,
            )
        )
    return evaluations
