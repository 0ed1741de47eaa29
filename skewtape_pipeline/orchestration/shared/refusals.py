"""A refusal by the core fails a run with its reason as the message the UI shows first."""

import contextlib
from collections.abc import Callable, Iterator, Mapping

import dagster as dg

from skewtape_pipeline.errors import SkewtapeError
from skewtape_pipeline.orchestration.shared.keys import HISTORY_SNAPSHOT

Observer = Callable[[str, dict[str, dg.MetadataValue]], None]
"""Called with a refusal's description and metadata before the run fails (e.g. to record it on
the partition it concerns)."""


@contextlib.contextmanager
def refusal_as_failure(
    what: str,
    metadata: Mapping[str, dg.MetadataValue] | None = None,
    observe: Observer | None = None,
) -> Iterator[None]:
    """Turn the core's refusal met in the block (a :class:`SkewtapeError` that is not an OS
    error: bad configuration, bad input, a check that failed) into a :class:`dagster.Failure`
    described ``<what> refused (<error type>): <reason>``, so the run shows the reason first
    (Dagster prints its stack trace under it), with ``metadata`` and the error's type and
    text as metadata; ``observe`` sees both first. A refusal is never retried; other errors
    pass unchanged."""
    try:
        yield
    except SkewtapeError as exc:
        if isinstance(exc, OSError):
            raise
        description = f"{what} refused ({type(exc).__name__}): {exc}"
        described = {
            **(metadata or {}),
            "refused_by": dg.MetadataValue.text(type(exc).__name__),
            "reason": dg.MetadataValue.text(str(exc)),
        }
        if observe is not None:
            observe(description, described)
        raise dg.Failure(description=description, metadata=described, allow_retries=False) from None


def month_refused(
    context: dg.OpExecutionContext, month: str | None
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
    return refusal_as_failure(month or "catch-up", named, observe if month else None)
