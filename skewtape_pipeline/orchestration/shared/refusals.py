"""A refusal by the core fails a run with its reason as the message the UI shows first, paths
under the data root named ``$SKEWTAPE_HOME/...`` (``SkewtapeHome.shown``)."""

import contextlib
from collections.abc import Callable, Iterator, Mapping

import dagster as dg

from skewtape_pipeline.errors import SkewtapeError
from skewtape_pipeline.orchestration.shared.keys import HISTORY_SNAPSHOT
from skewtape_pipeline.orchestration.shared.resources import SkewtapeHome

Observer = Callable[[str, dict[str, dg.MetadataValue]], None]
"""Called with a refusal's description and metadata before the run fails (e.g. to record it on
the partition it concerns)."""


@contextlib.contextmanager
def refusal_as_failure(
    what: str,
    skewtape: SkewtapeHome,
    metadata: Mapping[str, dg.MetadataValue] | None = None,
    observe: Observer | None = None,
) -> Iterator[None]:
    """Turn an error of ours met in the block (a :class:`SkewtapeError`) into a
    :class:`dagster.Failure`, so the run shows the reason first (Dagster prints its stack
    trace under it), with ``metadata`` and the error's type and text as metadata; ``observe``
    sees both first. Its text names paths under ``skewtape``'s data root as
    ``$SKEWTAPE_HOME/...`` (``SkewtapeHome.shown``; a path outside it is kept as it is).

    The core's refusal (bad configuration, bad input, a check that failed) is described
    ``<what> refused (<error type>): <reason>`` and never retried; an operating-system error
    of ours (``StorageError``, ``TransferError``: a full disk, the network) ``<what> failed
    (<error type>): <reason>``, retried as the error itself would be (``allow_retries``).
    Other errors pass unchanged."""
    try:
        yield
    except SkewtapeError as exc:
        refused = not isinstance(exc, OSError)
        reason = skewtape.shown(str(exc))
        how = "refused" if refused else "failed"
        description = f"{what} {how} ({type(exc).__name__}): {reason}"
        described = {
            **(metadata or {}),
            f"{how}_by": dg.MetadataValue.text(type(exc).__name__),
            "reason": dg.MetadataValue.text(reason),
        }
        if observe is not None:
            observe(description, described)
        raise dg.Failure(
            description=description, metadata=described, allow_retries=not refused
        ) from None


def month_refused(
    context: dg.OpExecutionContext, skewtape: SkewtapeHome, month: str | None
) -> contextlib.AbstractContextManager[None]:
    """The core's refusal of ``month`` fails the run with its reason (``refusal_as_failure``),
    recorded on the month's partition too as an observation (the asset's Events list it;
    ``month`` None: a catch-up over several months, no partition to record it on)."""

    def observe(description: str, metadata: dict[str, dg.MetadataValue]) -> None:
        context.log_event(
            dg.AssetObservation(
                HISTORY_SNAPSHOT, partition=month, description=description, metadata=metadata
            )
        )

    named = {"month": dg.MetadataValue.text(month or "pending months")}
    return refusal_as_failure(month or "catch-up", skewtape, named, observe if month else None)
