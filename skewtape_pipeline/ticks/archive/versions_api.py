"""``archive.versions``: the version verbs of one :class:`~.handle.Archive` (list, latest, tags,
tag, prune, past bytes), part of the front door. Reading as of a version stays on
``Archive.read``."""

from __future__ import annotations

import builtins
from datetime import UTC, date, datetime, time

from skewtape_pipeline.errors import ConfigError, quoted
from skewtape_pipeline.ticks.archive.core import ArchiveCore
from skewtape_pipeline.ticks.archive.ops.version_pruning import (
    PruneResult,
    past_version_bytes,
    prune_versions,
)
from skewtape_pipeline.ticks.archive.store.version_files import Version
from skewtape_pipeline.ticks.archive.store.version_recording import check_tag_arguments


class ArchiveVersions:
    """The versions of one archive: every writing verb commits one when it changes something.

    Reached as ``archive.versions``; holds the archive's core (its root, audit log and lock), so
    it audits and locks as the archive's other verbs do.

    Examples
    --------
    >>> archive.versions.tag("paper-2026")  # pins the latest version
    12
    >>> [v.version for v in archive.versions.list()][-2:]
    [11, 12]
    """

    def __init__(self, core: ArchiveCore):
        self._core = core

    def __repr__(self) -> str:
        return f"ArchiveVersions({str(self._core.root)!r})"

    def list(self) -> builtins.list[Version]:
        """The kept versions, oldest first.

        Returns
        -------
        list of Version
            One per kept version (empty before the first), each with its number, time,
            operation and the symbol-days it changed.

        Raises
        ------
        VersionError
            A version record that does not parse.
        DamagedFileError
            A version record that changed after it was written (not the bytes its sha256
            records), named.
        """
        return self._core.versions.list()

    def latest(self) -> Version | None:
        """The latest version (never pruned).

        Returns
        -------
        Version or None
            The latest version; None before the first.

        Raises
        ------
        VersionError
            Its record does not parse.
        DamagedFileError
            Its record changed after it was written, named.
        """
        return self._core.versions.latest()

    def at(self, when: datetime | date) -> int | None:
        """The number of the latest version committed at or before ``when``.

        Parameters
        ----------
        when
            A time (naive: UTC), or a date: its midnight, UTC (as ``Archive.read``'s
            ``as_of`` takes one).

        Returns
        -------
        int or None
            Its number; None when none was committed by then.

        Raises
        ------
        ConfigError
            ``when`` is neither a datetime nor a date.
        DamagedFileError
            An entry of the versions' index it reads is not the one its sum records (naming
            ``index.bin``).
        """
        if not isinstance(when, date):
            raise ConfigError(f"when = {quoted(when)}: expected a datetime or a date")
        if not isinstance(when, datetime):
            when = datetime.combine(when, time(), tzinfo=UTC)
        return self._core.versions.at(when)

    def tags(self) -> dict[str, int]:
        """Every tag and the version it pins.

        Returns
        -------
        dict of str to int
            ``{tag: version}``, by name (empty when none).

        Raises
        ------
        VersionError
            A tag record that does not parse.
        DamagedFileError
            A tag record that changed after it was written, named.
        """
        return self._core.versions.tags()

    def tag(self, name: str, version: int | None = None) -> int:
        """Pin ``version`` as ``name``, audited, under the archive's lock (so a version pruning,
        which reads the tags under it, never drops a version tagged meanwhile).

        Parameters
        ----------
        name
            The tag; a tag never moves: tagging the version it pins again changes nothing.
        version
            The number of the version to pin (an int); None: what a read shows now (for a new
            tag, the latest version once the changes no version recorded are recorded as one,
            ``unrecorded changes (found by tag)``; a tag that exists is never moved).

        Returns
        -------
        int
            The version pinned.

        Raises
        ------
        ConfigError
            A bad tag name, or a ``version`` that is not an int.
        VersionError
            A version that is not kept, or a name that pins another version already.
        ArchiveBusyError
            Another writer held the archive's lock beyond its ``lock_timeout`` seconds.
        """
        check_tag_arguments(name, version)  # before writing: nothing turned on for a refusal
        with self._core.writing(), self._core.locked("tagging a version"):
            return self._core.versions.tag(name, version=version)

    def prune(self, *, keep_last: int | None = None, older_than: date | None = None) -> PruneResult:
        """Drop old versions, then the files only they read; the latest and every tagged
        version are kept. Audited.

        Parameters
        ----------
        keep_last
            Keep the ``keep_last`` newest versions (an int >= 1).
        older_than
            Drop the versions committed before this day (UTC). Give exactly one of the two.

        Returns
        -------
        PruneResult
            The versions pruned and kept, the files removed.

        Raises
        ------
        ConfigError
            Neither or both of ``keep_last`` and ``older_than``, or a bad value.
        WriteOnceError
            The archive is in ``books_and_records`` mode (audited; nothing removed).
        ArchiveBusyError
            Another writer held the archive's lock beyond its ``lock_timeout`` seconds.
        DamagedFileError
            A kept version's catalog snapshot or manifest differs from its content name, or a
            version record or tag from the sha256 it carries (those read before any version is
            pruned).
        ObjectStoreError
            An S3 tier root cannot be listed (endpoint down, bucket missing, credentials
            refused): raised before any version is pruned.

        Examples
        --------
        >>> archive.versions.prune(older_than=date(2026, 1, 1)).pruned
        [1, 2, 3]
        """
        return prune_versions(self._core, keep_last=keep_last, older_than=older_than)

    def past_bytes(self) -> int:
        """Bytes on disk that only past versions read: what pruning every past version would free.

        Returns
        -------
        int
            The bytes of consolidated files the catalog no longer lists and of hot files kept
            only under their content names.
        """
        return past_version_bytes(self._core)
