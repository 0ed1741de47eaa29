"""The tier policy resolved for one archive root (:class:`ArchiveTiers`): each tier's writer
settings, the warm and cold stores (folders or S3 prefixes, ``skewtape_pipeline.storage``), their
listing, and the catalog paths that name the files in them.

The policy itself (tier names, ages, settings, layouts, roots as configured) is
``store.policy``. Tier roots must lie apart (:func:`check_roots_apart`): each tier lists
every Parquet file under its root as its own. The archive records its policy
(:data:`POLICY_RECORD`); when a policy given may change that record: ``store.policy_change``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from skewtape_pipeline import fsio
from skewtape_pipeline.errors import ConfigError, NotAnArchiveError, TickFormatError
from skewtape_pipeline.hashing import FileStamp
from skewtape_pipeline.locations import named_roots
from skewtape_pipeline.storage import (
    S3_SCHEME,
    ObjectFile,
    TierFile,
    TierStore,
    is_object_uri,
    parquet_files_of,
)
from skewtape_pipeline.ticks.archive.store.layout import ARCHIVE_MARKER
from skewtape_pipeline.ticks.archive.store.policy import (
    COLD,
    CONSOLIDATED_TIERS,
    TIERS,
    WARM,
    TierPolicy,
    TierSettings,
    place_of,
)
from skewtape_pipeline.ticks.encode.writer_settings import WriterSettings


@dataclass(frozen=True)
class ArchiveTiers:
    """The tier policy resolved once for the archive at ``root``: each tier's writer settings
    (a hot file is written at the settings of its age's tier), the warm and cold stores
    (folders or S3 prefixes, :meth:`TierPolicy.store_for`), settings, layouts and roots, and
    the catalog paths that name files in the stores. An ``Archive`` builds one
    (``Archive.tiers``) and its writing verbs hand it down instead of the policy. Build one
    with :meth:`of`."""

    root: Path
    policy: TierPolicy
    writers: Mapping[str, WriterSettings]
    """Each tier's writer settings alone: what the Parquet writer is handed (compaction reads
    every tier's, re-tiering WARM's and COLD's through :attr:`settings`)."""
    stores: Mapping[str, TierStore]
    """The store of WARM and of COLD, in that order (what listings follow:
    ``storage.parquet_files_of``)."""
    settings: Mapping[str, TierSettings]
    """WARM's and COLD's settings (the consolidation's row groups besides the writer's)."""
    layouts: Mapping[str, str]
    """WARM's and COLD's layout (:meth:`TierPolicy.layout_for`)."""
    roots: Mapping[str, Path | str]
    """WARM's and COLD's root (:meth:`TierPolicy.root_for`: a default or relative one beside
    the folder the archive root leads to; what messages name)."""
    record: Mapping[str, Any]
    """The policy as reports and the archive's policy record hold it
    (:meth:`TierPolicy.to_dict`), made once."""

    @classmethod
    def of(cls, root: Path | str, policy: TierPolicy | None = None) -> ArchiveTiers:
        """``policy`` (None: the default policy) resolved for the archive at ``root``."""
        policy, root = TierPolicy.or_default(policy), Path(root)
        check_roots_apart(root, policy)
        return cls(
            root,
            policy,
            writers={tier: policy.settings_for(tier).writer for tier in TIERS},
            stores={tier: policy.store_for(tier, root) for tier in CONSOLIDATED_TIERS},
            settings={tier: policy.settings_for(tier) for tier in CONSOLIDATED_TIERS},
            layouts={tier: policy.layout_for(tier) for tier in CONSOLIDATED_TIERS},
            roots={tier: policy.root_for(tier, root) for tier in CONSOLIDATED_TIERS},
            record=policy.to_dict(),
        )

    def check_reachable(self) -> None:
        """Raise ObjectStoreError naming the URI when a tier root in an object store cannot
        be used (endpoint unreachable, bucket missing, credentials refused); local roots pass."""
        for store in self.stores.values():
            store.check_reachable()

    def consolidated_files(self) -> list[tuple[str, TierFile]]:
        """``(tier, file)`` of every Parquet file under the warm and cold roots, COLD first,
        sorted within a tier. ObjectStoreError naming the URI when an S3 root cannot be listed."""
        stores = {tier: self.stores[tier] for tier in (COLD, WARM)}
        return [(tier, f) for tier, f, _ in parquet_files_of(stores)]

    def listing(self) -> list[tuple[str, TierFile, str]]:
        """``(tier, file, catalog path)`` of every Parquet file under the warm and cold roots,
        warm first, sorted within a tier: each store listed once, once every store is known to
        answer (``storage.parquet_files_of``: never a request per file). ObjectStoreError naming
        the URI of a store that does not answer or cannot be listed."""
        listed = parquet_files_of(self.stores)
        return [(tier, file, f"{tier}/{inside}") for tier, file, inside in listed]

    def relative(self, path: TierFile | str) -> str:
        """The catalog path of ``path`` (a file, or its URI or path as text, as a re-tiering's
        moves name it): ``<TIER>/<path inside the tier root>`` for a file under the warm or
        cold root, else the path relative to the archive root (a hot file), POSIX style.
        TickFormatError for a path outside the archive root and its tier roots."""
        if isinstance(path, str):
            path = _tier_file_named(path)
        for tier, store in self.stores.items():
            inside = store.relative(path)
            if inside is not None:
                return f"{tier}/{inside}"
        if isinstance(path, Path):
            target, base = normalized(path), normalized(self.root)
            if target.is_relative_to(base):
                return target.relative_to(base).as_posix()
        raise TickFormatError(
            f"{path}: outside the archive root {self.root} and its warm and cold roots"
        )

    def relative_text(self, text: str, root_name: str = "the archive root") -> str:
        """``text`` (a finding of ``verify_archive``, a message) with every file it names under
        the warm or cold root or the archive root named as :meth:`relative` names it
        (``<TIER>/<path inside the tier root>``, a hot file relative to the archive root), a
        warm or cold root itself as ``the <TIER> root`` and the archive root itself as
        ``root_name``: what may be shown where the roots' place must not be (it names the
        machine's folders and moves with the archive). A root is found as messages name files
        (``storage.file_text``: absolute, an S3 URI without its query), whole: not inside a
        longer path (``/mnt/<root>``, ``<root>.bak``), the longest root first; other text is
        kept."""
        named = {
            _shown(where).rstrip("/"): (f"{tier}/", f"the {tier} root")
            for tier, where in self.roots.items()
        }
        named.setdefault(str(self.root.absolute()).rstrip("/"), ("", root_name))
        return named_roots(text, named)

    def resolve(self, relative: str) -> TierFile:
        """The file a catalog path names: ``WARM/...`` and ``COLD/...`` inside that tier's
        store (an object for an S3 root), any other path inside the archive root (a Path).
        TickFormatError for a path that would leave its root (``..``, absolute, empty)."""
        tier, _, rest = relative.partition("/")
        if tier in self.stores:
            return self.stores[tier].file(inside_path(rest, relative).as_posix())
        return normalized(self.root) / inside_path(relative, relative)


def check_roots_apart(root: Path, policy: TierPolicy) -> None:
    """Raise ConfigError, naming both, when a tier's root (:meth:`TierPolicy.root_for`: the
    archive root for HOT) is another's or lies inside it: each tier lists every Parquet file
    under its root as its own, so a nested root would take another tier's files for its own."""
    roots = [(tier, policy.root_for(tier, root)) for tier in TIERS]
    for index, (tier, where) in enumerate(roots):
        for other, inner in roots[index + 1 :]:
            if _nested(where, inner):
                raise ConfigError(
                    f"the {other} root {_shown(inner)} and the {tier} root {_shown(where)}: one "
                    "is, or lies inside, the other; give each tier a folder or prefix of its "
                    "own (set [warm] root and [cold] root apart from the archive root and from "
                    "each other)"
                )


def check_apart_from_other_archives(root: Path) -> None:
    """Raise NotAnArchiveError, naming ``root`` and what it lies in, when ``root`` (a new
    archive root: one holding no archive marker yet) is, or lies inside, another archive's root
    or one of its warm or cold roots: that archive would take the new one's files for its own
    (consolidated files it never committed) and refuse its commands. A few stats per folder
    from the folder ``root`` leads to up (no listing): a folder holding an archive marker (an
    archive root, or a tier root holding files), or one named ``<X>-warm`` or ``<X>-cold`` where
    the archive ``<X>`` beside it keeps that tier (its recorded policy, else the default)."""
    place = place_of(root)
    for folder in (place, *place.parents):
        inside = _tier_of_archive_beside(folder) or _holder_of_marker(folder)
        if inside is not None:
            raise NotAnArchiveError(
                f"{root}: is, or lies inside, {inside}; an archive there would break that one "
                "(which would take its files for its own): choose a folder outside every "
                "archive and its tiers"
            )


def _tier_of_archive_beside(folder: Path) -> str | None:
    """``the WARM tier root <folder> of the archive <X>`` when ``folder`` is named
    ``<X>-warm`` (``-cold``) and the archive ``<X>`` beside it keeps that tier there."""
    base, _, suffix = folder.name.rpartition("-")
    tier = suffix.upper()
    owner = folder.with_name(base) if base else None
    if tier not in CONSOLIDATED_TIERS or owner is None or not (owner / ARCHIVE_MARKER).exists():
        return None
    try:
        policy = recorded_policy(owner)
    except ConfigError:  # an unreadable record: its tiers may well be the default ones
        policy = None
    kept = TierPolicy.or_default(policy).root_for(tier, owner)
    if isinstance(kept, Path) and place_of(kept) == folder:
        return f"the {tier} tier root {folder} of the archive {owner}"
    return None


def _holder_of_marker(folder: Path) -> str | None:
    """``<folder>, an archive root or ...`` when ``folder`` holds an archive marker."""
    if not (folder / ARCHIVE_MARKER).exists():
        return None
    return f"{folder}, an archive root or a tier root holding files (it holds {ARCHIVE_MARKER})"


def _nested(a: Path | str, b: Path | str) -> bool:
    """True when the roots ``a`` and ``b`` are the same folder (as places: links followed,
    ``policy.place_of``), or S3 prefix on the same endpoint, or one lies inside the other."""
    if is_object_uri(a) != is_object_uri(b):
        return False
    if isinstance(a, Path) and isinstance(b, Path):
        x, y = place_of(a), place_of(b)
        return x.is_relative_to(y) or y.is_relative_to(x)
    (x, endpoint_a), (y, endpoint_b) = _prefix(str(a)), _prefix(str(b))
    return endpoint_a == endpoint_b and (x.is_relative_to(y) or y.is_relative_to(x))


def _prefix(uri: str) -> tuple[PurePosixPath, str | None]:
    """``(bucket/prefix, endpoint_override)`` of an ``s3://`` root."""
    parts = urlsplit(uri)
    endpoint = dict(parse_qsl(parts.query)).get("endpoint_override")
    return PurePosixPath("/", parts.netloc + parts.path), endpoint


def _shown(root: Path | str) -> str:
    """``root`` for a message: an S3 URI without its query."""
    return str(root).partition("?")[0]


def inside_path(rest: str, whole: str) -> PurePosixPath:
    """``rest`` (of the catalog path ``whole``) as a relative POSIX path; TickFormatError when
    it would leave its root (empty, absolute, ``..``, a backslash)."""
    part = PurePosixPath(rest)
    if not rest or part.is_absolute() or ".." in part.parts or "\\" in rest:
        raise TickFormatError(
            f"catalog path {whole!r}: outside its root (expected a relative path inside it)"
        )
    return part


def normalized(path: Path) -> Path:
    """``path`` absolute, with ``.`` and ``..`` folded as the file system takes them
    (``fsio.folded``: a link before a ``..`` followed, any other kept): how catalog paths and
    files on disk are compared."""
    return fsio.folded(path)


POLICY_RECORD = "_skewtape_tier_policy.json"
"""In the archive root: the tier policy the archive records (where its tiers are): the first one
a writer was given, or one that changed it since (``store.policy_change``)."""


def recorded_policy(root: Path) -> TierPolicy | None:
    """The policy ``<root>/_skewtape_tier_policy.json`` records; None when there is none.

    Raises ConfigError naming the file when it is unreadable or not a policy.
    """
    path = Path(root) / POLICY_RECORD
    if not path.exists():
        return None
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{path}: unreadable tier policy record ({exc.strerror})") from None
    return TierPolicy.from_dict(fsio.load_json(raw, path, error=ConfigError), source=str(path))


class PolicyRecordWatch:
    """The archive's policy record as an archive opened it (:meth:`open`): :attr:`recorded`,
    and :meth:`check_unchanged`, what a writer calls once it holds the lock, so it never writes
    under tiers another writer's policy record moved since."""

    def __init__(self, root: Path):
        self.path = Path(root) / POLICY_RECORD
        self._stamp = _stamp_or_none(self.path)  # before the read: a change between is seen
        self.recorded = recorded_policy(root)
        """The policy the record held when opened (``recorded_policy``; None: none)."""
        self._opened = None if self.recorded is None else self.recorded.to_dict()

    def check_unchanged(self, resolved: Mapping[str, Any]) -> None:
        """ConfigError when another process replaced the record since it was opened with a
        policy neither the record opened nor ``resolved`` (the tiers in use: their
        ``ArchiveTiers.record``) gives; one stat while the record is unchanged."""
        stamp = _stamp_or_none(self.path)
        if stamp == self._stamp:
            return
        now = recorded_policy(self.path.parent)
        if now is not None and now.to_dict() not in (self._opened, resolved):
            raise ConfigError(
                f"{self.path}: another writer changed the archive's tier policy since this one "
                "opened the archive; refused before writing under the old one: run it again"
            )
        self._stamp = stamp


def _stamp_or_none(path: Path) -> FileStamp | None:
    """The stamp of the file at ``path``; None when there is none."""
    try:
        return FileStamp.of(path)
    except FileNotFoundError:
        return None


def record_policy(root: Path, record: Mapping[str, Any], *, replace: bool = False) -> None:
    """Write ``record`` (a policy's ``TierPolicy.to_dict``) as the archive's record
    (atomically); a record there is replaced only when ``replace`` is True (a change that
    ``store.policy_change`` found safe)."""
    path = Path(root) / POLICY_RECORD
    if replace or not path.exists():
        text = json.dumps(record, indent=2, sort_keys=True) + "\n"
        fsio.atomic_write_bytes(path, text.encode())


def _tier_file_named(text: str) -> TierFile:
    """The file ``text`` names (an ``s3://`` URI or a path), to be placed among the tiers only
    (an object's client is not needed for that)."""
    if is_object_uri(text):
        return ObjectFile(text, text.removeprefix(S3_SCHEME), None)  # type: ignore[arg-type]
    return Path(text)
