"""When a tier policy given to an archive is recorded: the archive's record of its policy
(``tiers.POLICY_RECORD``, ``_skewtape_tier_policy.json`` in the archive root) is where every
command finds the warm and cold tiers when it is given no policy.

The first policy a writer is given is recorded once its write succeeded. A policy given to an
archive that records one is compared with the record tier by tier (:func:`tier_changes`): by
where the tier's files are, its *placement* (a folder, or an S3 bucket and prefix, and the
layout), and by how its store is reached, its *endpoint* (an S3 root's query options:
``endpoint_override``, ``scheme``, ``region``):

- the same placement and endpoint: the policy is used as given, the record kept;
- the same placement, another endpoint (the server moved): accepted when the store reached
  there holds every file the catalog and the kept versions read in that tier;
- another placement: accepted only while nothing is placed in the tier: its recorded root holds
  no Parquet file (a folder or bucket that does not exist holds none; a store that cannot say
  is refused) and every file the catalog and the kept versions read in it is found in the new
  root (none, unless a write placed them there and was cut before recording its policy).

Anything else is refused with ConfigError naming both roots (redacted) and the record; nothing
changes. An accepted change is recorded by the next write that succeeds, audited
(:data:`~skewtape_pipeline.ticks.archive.store.books.EVENT_POLICY`). No policy is recorded, first
or anew, before every S3 tier it names answers (:meth:`PendingRecord.check_usable`, before the
write writes anything): a bucket that does not exist, an endpoint down or mistyped, credentials
refused stop the write instead of leaving a record that no later re-tiering can use.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from skewtape_pipeline.errors import ConfigError, ObjectStoreError
from skewtape_pipeline.locations import redacted
from skewtape_pipeline.storage import endpoint_options, placed_files, tier_store
from skewtape_pipeline.ticks.archive.store.books import EVENT_POLICY, Books
from skewtape_pipeline.ticks.archive.store.catalog import Catalog, CatalogStore
from skewtape_pipeline.ticks.archive.store.policy import CONSOLIDATED_TIERS, TierPolicy, place_of
from skewtape_pipeline.ticks.archive.store.tiers import (
    POLICY_RECORD,
    ArchiveTiers,
    record_policy,
    recorded_policy,
)
from skewtape_pipeline.ticks.archive.store.trust import hot_keys_of, unaccounted_files
from skewtape_pipeline.ticks.archive.store.versions import VersionLog


@dataclass(frozen=True)
class TierChange:
    """How a policy given changes one consolidated tier against the record: ``moved`` (another
    folder, bucket or prefix, or another layout) or, when not, only the endpoint."""

    tier: str
    moved: bool
    given: Path | str
    recorded: Path | str
    given_layout: str
    recorded_layout: str

    def described(self, root: Path) -> str:
        """The change, as a refusal names it: both roots (redacted) or endpoints, the record."""
        record = Path(root) / POLICY_RECORD
        if self.moved:
            return (
                f"the tier policy given puts {self.tier} at {redacted(str(self.given))} (layout "
                f"{self.given_layout}) but the archive {root} records "
                f"{redacted(str(self.recorded))} (layout {self.recorded_layout}) in {record}"
            )
        return (
            f"the tier policy given reaches {self.tier} at {redacted(str(self.given))} through "
            f"{_endpoint_shown(self.given)} but the archive {root} records "
            f"{_endpoint_shown(self.recorded)} in {record}"
        )

    def audited(self) -> dict[str, Any]:
        """The change as the audit record holds it (roots redacted, endpoints as options)."""
        return {
            "tier": self.tier,
            "change": "placement" if self.moved else "endpoint",
            "from": {"root": redacted(str(self.recorded)), "layout": self.recorded_layout,
                     "endpoint": endpoint_options(self.recorded)},
            "to": {"root": redacted(str(self.given)), "layout": self.given_layout,
                   "endpoint": endpoint_options(self.given)},
        }  # fmt: skip


def _endpoint_shown(root: Path | str) -> str:
    """An S3 root's endpoint options for a message (``endpoint_override=host:port, ...``)."""
    options = endpoint_options(root)
    if not options:
        return "the endpoint of the environment (AWS_ENDPOINT_URL)"
    return ", ".join(f"{key}={value}" for key, value in sorted(options.items()))


def tier_changes(root: Path, given: TierPolicy, recorded: TierPolicy) -> list[TierChange]:
    """The warm and cold tiers ``given`` places or reaches otherwise than ``recorded`` does for
    the archive at ``root``, WARM first. Roots are compared as places (:func:`_place`), never
    as text."""
    changes = []
    for tier in CONSOLIDATED_TIERS:
        new, old = given.root_for(tier, root), recorded.root_for(tier, root)
        layouts = given.layout_for(tier), recorded.layout_for(tier)
        moved = _place(new) != _place(old) or layouts[0] != layouts[1]
        if moved or endpoint_options(new) != endpoint_options(old):
            changes.append(TierChange(tier, moved, new, old, *layouts))
    return changes


def _place(root: Path | str) -> str:
    """Where the tier root ``root`` is: the folder it leads to (``policy.place_of``: a symbolic
    link to the recorded folder is no move), or an S3 root's bucket and prefix, its query
    apart."""
    return str(place_of(root)) if isinstance(root, Path) else tier_store(root).root


def check_changes(tiers: ArchiveTiers, changes: list[TierChange]) -> None:
    """Refuse unless every change of ``changes`` (:func:`tier_changes` of ``tiers.policy``) is
    safe (see the module notes). Reads only: the catalog, the kept versions' catalogs, the
    moved tiers' recorded and new roots, and the new root of a tier the archive reads files in.

    Raises ConfigError naming the tier, both roots and the record; ObjectStoreError naming the
    URI when a new root that must be listed does not answer; TickFormatError naming the catalog
    when it is unreadable.
    """
    catalog = CatalogStore(tiers.root).read()
    read = set(catalog.files) | set(VersionLog(tiers.root).kept_catalog_paths())
    for change in changes:
        if change.moved:
            _check_nothing_placed(tiers.root, change)
        wanted = sorted(path for path in read if path.startswith(f"{change.tier}/"))
        if change.moved or wanted:
            _check_found(tiers, change, wanted, catalog)


def _check_nothing_placed(root: Path, change: TierChange) -> None:
    """ConfigError unless the recorded root of ``change.tier`` holds no Parquet file."""
    try:
        placed = placed_files(tier_store(change.recorded))
    except ObjectStoreError as exc:
        raise ConfigError(
            f"{change.described(root)}; the recorded root cannot be listed to show that nothing "
            f"is placed there ({_reason(exc)}); nothing was changed; make it answer, or omit the "
            "policy to use the recorded one"
        ) from None
    if placed:
        raise ConfigError(
            f"{change.described(root)}, and {_counted(placed)} are placed there; a tier moves "
            "only while nothing is placed in it; nothing was changed; omit the policy to use "
            "the recorded one"
        )


def _check_found(
    tiers: ArchiveTiers, change: TierChange, wanted: list[str], catalog: Catalog
) -> None:
    """ConfigError unless the new store of ``change.tier`` holds every file of ``wanted``
    (catalog paths) and, for a moved tier, nothing the archive does not account for (another
    archive's files, say: ``trust.unaccounted_files``); ObjectStoreError naming the URI
    when it does not answer."""
    store = tiers.stores[change.tier]
    found = {f"{change.tier}/{store.relative(file)}": file for file in store.parquet_files()}
    missing = [path for path in wanted if path not in found]
    if missing:
        raise ConfigError(
            f"{change.described(tiers.root)}, where {len(missing)} of the {len(wanted)} file(s) "
            f"the catalog and the kept versions read in {change.tier} are not found "
            f"({_named([tiers.resolve(path) for path in missing])}); nothing was changed; give "
            "the root and endpoint that hold them, or omit the policy to use the recorded one"
        )
    if not change.moved:
        return
    others = [(change.tier, file) for path, file in found.items() if path not in wanted]
    foreign = unaccounted_files(partial(hot_keys_of, tiers.root), catalog, others, set())
    if foreign:
        raise ConfigError(
            f"{change.described(tiers.root)}, which holds {len(foreign)} file(s) the archive "
            f"does not account for ({redacted(str(foreign[0][0]))}: {foreign[0][1]}); a tier "
            "moves only to a root holding nothing else; nothing was changed; omit the policy to "
            "use the recorded one"
        )


def _counted(files: list[Any]) -> str:
    """``N file(s) (first and M more)`` for a message (:func:`_named`)."""
    return f"{len(files)} file(s) ({_named(files)})"


def _named(files: list[Any]) -> str:
    """The first of ``files`` redacted, and how many more."""
    more = f" and {len(files) - 1} more" if len(files) > 1 else ""
    return f"{redacted(str(files[0]))}{more}"


def _reason(exc: ObjectStoreError) -> str:
    """An ObjectStoreError's message without the URI it begins with."""
    return str(exc).removeprefix(f"{exc.uri}: ")


class PendingRecord:
    """The policy of ``tiers`` to record once a write succeeded: the archive's first record
    (``replaces`` None) or one replacing the record ``replaces`` (``changes``: what it changes,
    checked by :func:`check_changes`)."""

    def __init__(self, tiers: ArchiveTiers, replaces: TierPolicy | None, changes: list[TierChange]):
        self.tiers, self.replaces, self.changes = tiers, replaces, changes
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

    def write(self, books: Books) -> None:
        """After the write: record the policy (a first record never replaces one). A record
        replaced is audited first; one that another writer changed meanwhile is left as it is
        (ConfigError naming it, unless it already records this policy)."""
        root = self.tiers.root
        if self.replaces is None:
            record_policy(root, self.tiers.record)
            return
        now = recorded_policy(root)
        if now == self.tiers.policy:
            return
        if now != self.replaces:
            raise ConfigError(
                f"{root / POLICY_RECORD}: changed by another writer while this one wrote; the "
                "tier policy given was not recorded (the write itself succeeded); give it again"
            )
        books.audit([self._audit_record()])  # audited first, as every change of the archive
        record_policy(root, self.tiers.record, replace=True)

    def _audit_record(self) -> dict[str, Any]:
        return {
            "event": EVENT_POLICY,
            "archive": str(self.tiers.root.absolute()),
            "record": str((self.tiers.root / POLICY_RECORD).absolute()),
            "tiers": [change.audited() for change in self.changes],
        }


def pending_record(
    tiers: ArchiveTiers, given: TierPolicy | None, recorded: TierPolicy | None
) -> PendingRecord | None:
    """What a write with ``tiers`` (resolved from ``given``, else ``recorded``) is to record:
    nothing when no policy is given, or it places and reaches every tier as ``recorded`` does;
    ``given`` when the archive records none, or the change is safe (:func:`check_changes`,
    which raises otherwise)."""
    if given is None:
        return None
    if recorded is None:
        return PendingRecord(tiers, None, [])
    changes = tier_changes(tiers.root, given, recorded)
    if not changes:
        return None
    check_changes(tiers, changes)
    return PendingRecord(tiers, recorded, changes)
