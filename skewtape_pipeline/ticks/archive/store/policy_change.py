"""When a tier policy given to an archive is recorded: the archive's record of its policy
(``tiers.POLICY_RECORD``, ``_skewtape_tier_policy.json`` in the archive root) is where every
command finds the warm and cold tiers when it is given no policy.

The first policy a writer is given is recorded once its write succeeded (a policy that places a
tier elsewhere than the record is refused: ``tiers.check_same_placement``). No policy is
recorded before every S3 tier it names answers (:meth:`PendingRecord.check_usable`, before the
write writes anything): a bucket that does not exist, an endpoint down or mistyped, credentials
refused stop the write instead of leaving a record that no later re-tiering can use.
"""

from __future__ import annotations

from skewtape_pipeline.errors import ObjectStoreError
from skewtape_pipeline.ticks.archive.store.policy import TierPolicy
from skewtape_pipeline.ticks.archive.store.tiers import ArchiveTiers, record_policy


def _reason(exc: ObjectStoreError) -> str:
    """An ObjectStoreError's message without the URI it begins with."""
    return str(exc).removeprefix(f"{exc.uri}: ")


class PendingRecord:
    """The policy of ``tiers`` to record once a write succeeded: the archive's first record."""

    def __init__(self, tiers: ArchiveTiers):
        self.tiers = tiers
        self._usable = False

    def check_usable(self) -> None:
        """Before the write: ObjectStoreError, naming the tier, its root and what is wrong,
        when an S3 tier of the policy does not answer (bucket missing, endpoint unreachable,
        credentials refused); asked once (one request per S3 tier), nothing for folders."""
        if self._usable:
            return
        for tier, store in self.tiers.stores.items():
            try:
                store.check_reachable()
            except ObjectStoreError as exc:
                raise ObjectStoreError(
                    f"the tier policy given puts {tier} at {exc.uri}, which cannot be used: "
                    f"{_reason(exc)}; nothing was written and the policy was not recorded",
                    uri=exc.uri,
                ) from None
        self._usable = True

    def write(self) -> None:
        """After the write: record the policy (a first record never replaces one)."""
        record_policy(self.tiers.root, self.tiers.record)


def pending_record(
    tiers: ArchiveTiers, given: TierPolicy | None, recorded: TierPolicy | None
) -> PendingRecord | None:
    """What a write with ``tiers`` (resolved from ``given``, else ``recorded``) is to record:
    ``given`` when the archive records none, else nothing."""
    if given is None or recorded is not None:
        return None
    return PendingRecord(tiers)
