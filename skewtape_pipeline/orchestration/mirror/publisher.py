"""Following the publisher from Dagster: the resource naming it, the op that fetches a month's
delta (the first op of the month's graph), and the sensor that polls for the next month.

The algorithm is the core's (:mod:`skewtape_pipeline.mirror.fetch`); this module only decides
when to call it and turns its result into metadata.
"""

import os
import threading
from collections.abc import Callable

import dagster as dg
from pydantic import Field

from skewtape_pipeline import progress
from skewtape_pipeline.errors import ChainError, ConfigError
from skewtape_pipeline.locations import redact_urls
from skewtape_pipeline.mirror.catchup import chain_tip, next_month
from skewtape_pipeline.mirror.fetch import FetchedMonth, fetch_deltas
from skewtape_pipeline.mirror.format import CHECKSUMS, MANIFEST
from skewtape_pipeline.mirror.remote import DELTAS
from skewtape_pipeline.mirror.sources import Source, TransferSettings, open_source
from skewtape_pipeline.orchestration.mirror.jobs import APPLY_POOL, apply_month_job
from skewtape_pipeline.orchestration.shared.keys import HISTORY_SNAPSHOT
from skewtape_pipeline.orchestration.shared.metadata import bytes_value, seconds_value
from skewtape_pipeline.orchestration.shared.partitions import is_month_partition
from skewtape_pipeline.orchestration.shared.refusals import month_refused
from skewtape_pipeline.orchestration.shared.resources import SkewtapeHome
from skewtape_pipeline.orchestration.shared.sensor_skips import skipped

SOURCE_VARIABLE = "SKEWTAPE_SOURCE"
FETCH_TIME_LIMIT_S = 6 * 3600.0
"""The seconds a month's fetch may take in a Dagster run by default (then it fails; the next run
resumes it)."""


class PublisherSource(dg.ConfigurableResource):
    """The publisher the mirror follows: an `https://` URL, an `s3://bucket/prefix` (endpoint and
    credentials from the environment) or a local folder.

    Set `source` (for example `dg.EnvVar("SKEWTAPE_SOURCE")`); when it is empty, the variable
    named by `source_variable` is read when a run or tick starts (never at import). No source
    at all: nothing is fetched, and deltas are expected in `deltas/` by other means.
    """

    source: str = Field(default="", description="The publisher's root (URL, s3:// or folder).")
    source_variable: str = Field(
        default=SOURCE_VARIABLE,
        description="The environment variable read for the source when `source` is empty.",
    )
    connections: int = Field(default=4, description="Parallel transfers of a fetch.")
    fetch_time_limit_s: float = Field(
        default=FETCH_TIME_LIMIT_S,
        description="Seconds a month's fetch may take before it fails (a later run resumes it).",
    )

    def location(self) -> str:
        """The configured source, or "" when there is none."""
        return self.source.strip() or os.environ.get(self.source_variable, "").strip()

    def open(self) -> Source | None:
        """The core's source object, or None when no source is configured. ConfigError naming
        this resource and its fields when the transfer refuses their values (the core names
        its own: ``time_limit`` is ``fetch_time_limit_s`` here)."""
        location = self.location()
        if not location:
            return None
        try:
            settings = TransferSettings(
                connections=self.connections, time_limit=self.fetch_time_limit_s
            )
        except ConfigError as exc:
            raise ConfigError(
                f"publisher resource (connections={self.connections!r}, "
                f"fetch_time_limit_s={self.fetch_time_limit_s!r}): {exc}"
            ) from None
        return open_source(location, settings)


@dg.op(pool=APPLY_POOL, ins={"after_previous_month": dg.In(dg.Nothing)}, out=dg.Out(dg.Nothing))
def fetch_delta(context: dg.OpExecutionContext, skewtape: SkewtapeHome, publisher: PublisherSource):
    """Fetch the month's delta from the publisher into `deltas/<month>/` (verified, then placed
    whole); a no-op when it is already there, when the month's snapshot is, or when no
    publisher is configured. Each retry is a warning in the run's log as it happens; the
    transfer is recorded as an observation of the month."""
    month = context.partition_key
    with month_refused(context, skewtape, month), progress.noticing(_warning_of(context)):
        source = publisher.open()
        here = (skewtape.delta_dir(month) / MANIFEST, skewtape.snapshot_dir(month) / MANIFEST)
        if source is None or any(path.is_file() for path in here):
            context.log.info(f"{month}: nothing to fetch (no publisher, or the month is here)")
            return
        result = fetch_deltas(source, skewtape.root_dir, until=month)
    for fetched in result.months:
        context.log_event(
            dg.AssetObservation(
                asset_key=HISTORY_SNAPSHOT,
                partition=fetched.month,
                metadata=fetch_metadata(fetched, shown=skewtape.shown),
            )
        )


def _warning_of(context: dg.OpExecutionContext) -> Callable[[str], None]:
    """The core's notices (a transfer tried again, and why) as warnings in the run's log, one
    at a time from the transfer threads, any URL in them redacted."""
    lock = threading.Lock()

    def warn(text: str) -> None:
        with lock:
            context.log.warning(redact_urls(text))

    return warn


def fetch_metadata(
    fetched: FetchedMonth, *, shown: Callable[[str], str]
) -> dict[str, dg.MetadataValue]:
    """What a fetched month's transfer cost: bytes fetched and resumed, retries, seconds, rate,
    and the folder it was placed in, named as ``shown`` names it (``SkewtapeHome.shown``:
    ``$SKEWTAPE_HOME/deltas/<month>``)."""
    return {
        "fetch_bytes": bytes_value(fetched.bytes_fetched),
        "fetch_bytes_resumed": bytes_value(fetched.bytes_resumed),
        "fetch_retries": dg.MetadataValue.int(fetched.retries),
        "fetch_seconds": seconds_value(fetched.seconds),
        "fetch_mean_rate_mb_per_s": dg.MetadataValue.float(round(fetched.mean_rate / 1e6, 2)),
        "fetch_folder": dg.MetadataValue.path(shown(str(fetched.folder))),
    }


def remote_month_request(
    skewtape: SkewtapeHome, publisher: PublisherSource, month: str
) -> dg.RunRequest | dg.SkipReason:
    """A run request for ``month`` when the publisher has published its delta (one small
    request: its CHECKSUMS.sha256's size and version), else why not. The run key names the
    version, so a republished month runs again."""
    source = publisher.open()
    if source is None:
        return dg.SkipReason(f"no publisher configured (set {publisher.source_variable})")
    if not is_month_partition(month):
        return dg.SkipReason(f"{month} is not a month partition yet")
    found = source.stat(f"{DELTAS}/{month}/{CHECKSUMS}")
    if found is None:
        return dg.SkipReason(f"{source.location} has not published the delta for {month} yet")
    return dg.RunRequest(partition_key=month, run_key=f"{month}:published:{found.validator}")


@dg.sensor(
    job=apply_month_job,
    minimum_interval_seconds=600,
    default_status=dg.DefaultSensorStatus.STOPPED,
    description="Asks the publisher (one small request per tick) whether the month after the "
    "local chain's newest is published, and requests that month's run, whose first op "
    "fetches it.",
)
def publisher_sensor(
    context: dg.SensorEvaluationContext, skewtape: SkewtapeHome, publisher: PublisherSource
):
    """Request the next month's run once the publisher has its delta; a tick that requests
    nothing logs why (the UI lists it as "0 runs requested", its logs say why)."""
    try:
        month, _ = chain_tip(skewtape.history_dir, skewtape.deltas_dir)
    except ChainError as exc:
        return skipped(context, skewtape, str(exc), context.cursor)
    request = remote_month_request(skewtape, publisher, next_month(month))
    if isinstance(request, dg.SkipReason):
        return skipped(context, skewtape, request.skip_message or "", context.cursor)
    return request
