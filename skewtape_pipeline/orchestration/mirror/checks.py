"""Asset checks on each month of the history snapshot; each reads the month's folder on disk.

They are blocking, so nothing downstream of a month runs in the same run when one fails. A
month whose verification fails is never recorded as materialized in the first place: the graph's
last op raises (a failing check alone does not stop the materialization being recorded).
"""

import warnings
from collections.abc import Callable
from pathlib import Path

import dagster as dg

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


def _result(problems: list[str], **metadata: dg.MetadataValue) -> dg.AssetCheckResult:
    return dg.AssetCheckResult(
        passed=not problems, metadata={**problems_metadata(problems), **metadata}
    )


REFUSED_MONTH_NOTE = (
    " A month the run refused (its delta does not verify, an earlier month is missing, ...) "
    "leaves this check 'Execution failed' without a partition: Dagster records no result for a "
    "check whose asset's op failed. The reason is the run's failure message and an observation "
    "on the month's partition (`<month> refused (<error>): <reason>`, the asset's Events)."
)
"""Said by every month check's description: what a refused month shows there, and where its
reason is."""


def _month_check(description: str, name: str | None = None):
    """A blocking check per month partition (a preview feature of Dagster 1.13, used knowingly),
    its description followed by :data:`REFUSED_MONTH_NOTE`."""

    def decorate(check_fn):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", dg.PreviewWarning)
            return dg.asset_check(
                asset=HISTORY_SNAPSHOT,
                partitions_def=month_partitions,
                blocking=True,
                description=description + REFUSED_MONTH_NOTE,
                name=name,
            )(check_fn)

    return decorate


Judgement = tuple[list[str], dict[str, dg.MetadataValue]]
"""What a check over a month's manifest found: its problems, and metadata beside them."""


def _manifest_check(description: str):
    """A month check that judges the month's folder against its manifest: the decorated
    ``judge(snapshot, manifest)`` returns a :data:`Judgement`; a manifest that cannot be read is
    the check's one problem (``judge`` is not called). The check takes ``judge``'s name."""

    def decorate(judge: Callable[[Path, SnapshotManifest], Judgement]):
        def check(context: dg.AssetCheckExecutionContext, skewtape: SkewtapeHome):
            snapshot = skewtape.snapshot_dir(context.partition_key)
            try:
                manifest, _, _ = read_snapshot(snapshot)
            except SkewtapeError as exc:
                return _result([str(exc)])
            problems, metadata = judge(snapshot, manifest)
            return _result(problems, **metadata)

        return _month_check(description, name=judge.__name__)(check)

    return decorate


@_month_check("Every file matches CHECKSUMS.sha256 and the manifest (cached hashes trusted).")
def checksums_verified(context: dg.AssetCheckExecutionContext, skewtape: SkewtapeHome):
    snapshot = skewtape.snapshot_dir(context.partition_key)
    try:
        verified = verify_snapshot(snapshot)
    except VerificationError as exc:
        return _result(exc.problems)
    return _result([], **verify_metadata(verified))


@_month_check("Each reference table's key is unique and never null.")
def keys_unique(context: dg.AssetCheckExecutionContext, skewtape: SkewtapeHome):
    snapshot = skewtape.snapshot_dir(context.partition_key)
    problems: list[str] = []
    for rel, keys in TABLE_KEYS.items():
        if not (snapshot / rel).exists():
            continue
        try:
            problems += key_problems(read_table(snapshot / rel, columns=keys), keys, name=rel)
        except SkewtapeError as exc:
            problems.append(str(exc))
    return _result(problems)


@_manifest_check("Every Parquet file has the row count its manifest entry records.")
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


@_manifest_check("The folder holds no file the manifest does not list (no leftovers, no links).")
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
