"""The tier policy: storage tiers by age, as explicit, validated configuration, recorded on
every report.

A batch's tier follows from its real age in days (``age_days`` has no default anywhere): up to
``hot_max_age_days`` it is HOT, up to ``warm_max_age_days`` WARM, older COLD. Each tier carries
its own Parquet writer settings (``ticks.encode.writer_settings``: hot favours speed, cold
size), which its :class:`TierSettings` extend with the tier's layout and root.

Each tier also has a layout and a storage root. HOT holds one file per symbol-day under the
archive root (where compaction writes). WARM and COLD hold consolidated files, one per period
(``month`` or ``year``) of the archive, rows sorted by symbol then time, packed into row groups
of about ``consolidated_row_group_size`` rows that end on symbol-day boundaries; re-tiering
(``ops.retier``) moves symbol-days into them as they age. A layout left unset takes the
tier's default (:data:`DEFAULT_LAYOUTS`); a root left unset is a folder beside the archive root
(``<archive>-warm``, ``<archive>-cold``); a relative root is taken from the archive root's parent.
Beside the folder the archive root leads to, that is (:func:`place_of`): an archive reached
through a symbolic link finds its tiers beside the folder the link leads to, never beside the
link.
A warm or cold root may also be an S3 prefix, ``s3://bucket/prefix`` (``skewtape_pipeline.storage``:
the endpoint in the URI's query or ``AWS_ENDPOINT_URL``, credentials only from the environment).

Configuration file (TOML or JSON, every key optional)::

    hot_max_age_days = 7
    warm_max_age_days = 90
    [hot]
    compression = "zstd"
    compression_level = 1
    encoding_sample_rows = 65536   # 0: measure candidate encodings on the whole batch
    row_group_size = 1048576
    byte_stream_split = true       # a measured candidate for price and quantity (INT64)
    [warm]
    layout = "month"               # hot: "symbol-day"; warm and cold: "month" or "year"
    consolidated_row_group_size = 2048
    root = "archive-warm"          # default: beside the archive root; or "s3://bucket/warm"
    ...
    [cold]                         # defaults: zstd 19, layout "year", row groups of 8192
    ...

What the policy says for one archive root (its stores, their listing, catalog paths) is
``ticks.archive.store.tiers.ArchiveTiers``. The policy knows no archive: this module imports nothing
else of ``ticks.archive``, only the standard library, ``skewtape_pipeline``'s ``errors``,
``fsio``, ``locations`` and ``storage`` (a tier's store) and the writer settings of
``ticks.encode``.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from datetime import date
from pathlib import Path, PurePath
from typing import Any

from skewtape_pipeline.errors import ConfigError
from skewtape_pipeline.fsio import load_json, resolved
from skewtape_pipeline.locations import redacted
from skewtape_pipeline.storage import TierStore, check_tier_root, is_object_uri, tier_store
from skewtape_pipeline.ticks.encode.writer_settings import (
    COLD_WRITER,
    COMPRESSION_LEVELS,
    HOT_WRITER,
    WARM_WRITER,
    WriterSettings,
    is_int,
)

HOT = "HOT"


WARM = "WARM"


COLD = "COLD"


TIERS: tuple[str, ...] = (HOT, WARM, COLD)
"""Tier names from the newest data to the oldest (a tier later in the tuple is colder)."""


CONSOLIDATED_TIERS: tuple[str, ...] = (WARM, COLD)
"""The tiers of consolidated files, each with a root, a store and a layout of its own (HOT's
files live in the archive root, one per symbol-day)."""


LAYOUT_SYMBOL_DAY = "symbol-day"


LAYOUT_MONTH = "month"


LAYOUT_YEAR = "year"


LAYOUTS: tuple[str, ...] = (LAYOUT_SYMBOL_DAY, LAYOUT_MONTH, LAYOUT_YEAR)


CONSOLIDATED_LAYOUTS: tuple[str, ...] = (LAYOUT_MONTH, LAYOUT_YEAR)


DEFAULT_LAYOUTS: Mapping[str, str] = {HOT: LAYOUT_SYMBOL_DAY, WARM: LAYOUT_MONTH, COLD: LAYOUT_YEAR}
"""The layout of a tier whose settings leave ``layout`` unset."""


DEFAULT_CONSOLIDATED_TARGET_BYTES = 1_000_000_000
"""A consolidated file's target size unless the tier says otherwise (1 GB)."""


@dataclass(frozen=True)
class TierSettings(WriterSettings):
    """How one tier writes its Parquet files (the writer settings, see
    :class:`~skewtape_pipeline.ticks.encode.writer_settings.WriterSettings`) and where and how
    they are laid out.

    Built directly, the keys left out take the general defaults (zstd 3, row groups of 2,048);
    to change one key of a tier and keep its other defaults, as a policy file's table does,
    use ``dataclasses.replace(TierPolicy().cold, root=...)``.

    Parameters
    ----------
    layout
        ``symbol-day`` (hot only), ``month`` or ``year`` (warm and cold: one consolidated file
        per period); None takes the tier's default (:data:`DEFAULT_LAYOUTS`).
    consolidated_row_group_size
        Target rows per row group of a consolidated file; groups end on symbol-day boundaries
        (a symbol-day larger than the target gets groups of its own, at most
        ``row_group_size`` rows each). Small groups let readers skip to a symbol and a date
        by row-group statistics; each costs a few hundred bytes of footer.
    consolidated_target_bytes
        The size a consolidated file grows to (default 1 GB): once a file holds this many
        bytes, the period's next symbol-day begins a new file (a file passes the target by
        at most a row group; each file is catalogued). Files written before were one per
        period; both read alike.
    root
        Folder of the tier's consolidated files (warm and cold only); None: beside the
        archive root. A relative path is taken from the archive root's parent (both: of the
        folder the archive root leads to, a symbolic link followed). An
        ``s3://bucket/prefix`` URI puts the tier in an object store (query options
        ``endpoint_override``, ``scheme``, ``region`` only; never credentials).

    Raises
    ------
    ConfigError
        On an invalid writer setting (see ``WriterSettings``), an unknown layout, a
        negative/zero row group size or an empty root.
    """

    layout: str | None = None
    consolidated_row_group_size: int = 2_048
    root: str | None = None
    consolidated_target_bytes: int = DEFAULT_CONSOLIDATED_TARGET_BYTES

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.layout is not None and self.layout not in LAYOUTS:
            raise ConfigError(f"layout = {self.layout!r}: expected one of {', '.join(LAYOUTS)}")
        size = self.consolidated_row_group_size
        if not is_int(size) or size < 1:
            raise ConfigError(f"consolidated_row_group_size = {size!r}: expected an integer >= 1")
        target = self.consolidated_target_bytes
        if not is_int(target) or target < 1:
            raise ConfigError(
                f"consolidated_target_bytes = {target!r}: expected an integer >= 1 (bytes)"
            )
        if self.root is not None and (not isinstance(self.root, str) or not self.root.strip()):
            raise ConfigError(f"root = {self.root!r}: expected a folder path (or leave it unset)")
        if self.root is not None:  # a URL other than s3:// is refused, never taken for a folder
            object.__setattr__(self, "root", check_tier_root(self.root))

    @classmethod
    def writing_as(cls, writer: WriterSettings, **tier: Any) -> TierSettings:
        """The tier settings that write as ``writer``, with the tier's own keys ``tier``."""
        return cls(**_writer_fields(writer), **tier)

    @property
    def writer(self) -> WriterSettings:
        """The writer settings alone: what the Parquet writer is handed (it never sees a
        tier's layout or root)."""
        return WriterSettings(**_writer_fields(self))


def _writer_fields(settings: WriterSettings) -> dict[str, Any]:
    return {f.name: getattr(settings, f.name) for f in fields(WriterSettings)}


def _default_hot() -> TierSettings:
    return TierSettings.writing_as(HOT_WRITER)


def _default_warm() -> TierSettings:
    return TierSettings.writing_as(WARM_WRITER)


def _default_cold() -> TierSettings:
    # Larger row groups than warm: smaller files, and at scale fewer footer bytes per query
    # (measured in benchmarks/archive_tiers.py: 2.5% worst read share against 4.0% at 2,048).
    return TierSettings.writing_as(COLD_WRITER, consolidated_row_group_size=8_192)


@dataclass(frozen=True)
class TierPolicy:
    """Age thresholds (inclusive, in days) and the Parquet settings of each tier.

    The defaults are house choices (7 and 90 days), not a standard; calibrate them against
    query patterns and storage prices and write them down in a config file.

    Raises
    ------
    ConfigError
        When a threshold is negative or ``warm_max_age_days <= hot_max_age_days``.
    """

    hot_max_age_days: int = 7
    warm_max_age_days: int = 90
    hot: TierSettings = field(default_factory=_default_hot)
    warm: TierSettings = field(default_factory=_default_warm)
    cold: TierSettings = field(default_factory=_default_cold)

    def __post_init__(self) -> None:
        if not is_int(self.hot_max_age_days) or self.hot_max_age_days < 0:
            raise ConfigError(
                f"hot_max_age_days = {self.hot_max_age_days!r}: expected an integer >= 0"
            )
        if not is_int(self.warm_max_age_days) or self.warm_max_age_days <= self.hot_max_age_days:
            raise ConfigError(
                f"warm_max_age_days = {self.warm_max_age_days!r}: expected an integer greater "
                f"than hot_max_age_days ({self.hot_max_age_days})"
            )
        for name in ("hot", "warm", "cold"):
            if not isinstance(getattr(self, name), TierSettings):
                raise ConfigError(f"{name}: expected TierSettings, got {getattr(self, name)!r}")
        if self.hot.layout not in (None, LAYOUT_SYMBOL_DAY):
            raise ConfigError(
                f"[hot] layout = {self.hot.layout!r}: the hot tier holds one file per symbol-day "
                f"(where compaction writes); expected {LAYOUT_SYMBOL_DAY!r}"
            )
        if self.hot.root is not None:
            raise ConfigError(
                f"[hot] root = {redacted(self.hot.root)!r}: hot files live in the archive root "
                "itself (the folder compaction writes to); leave it unset"
            )
        for name in ("warm", "cold"):
            layout = getattr(self, name).layout
            if layout not in (None, *CONSOLIDATED_LAYOUTS):
                raise ConfigError(
                    f"[{name}] layout = {layout!r}: {name} holds consolidated files; expected "
                    f"one of {', '.join(CONSOLIDATED_LAYOUTS)}"
                )

    @classmethod
    def or_default(cls, policy: TierPolicy | None) -> TierPolicy:
        """``policy``, or the default policy when it is None (the one default of the project;
        an ``Archive`` passes the policy the archive records instead)."""
        return cls() if policy is None else policy

    def tier_for(self, age_days: int) -> str:
        """The tier of a batch that is ``age_days`` old (HOT, WARM or COLD).

        Raises
        ------
        ConfigError
            When ``age_days`` is missing (None), not an integer, or negative.
        """
        check_age_days(age_days)
        if age_days <= self.hot_max_age_days:
            return HOT
        if age_days <= self.warm_max_age_days:
            return WARM
        return COLD

    def placement(
        self, day: date, age_days: int, reached: str | None = None
    ) -> tuple[str, str | None, bool]:
        """``(tier, period, held)`` of a symbol-day of ``day`` that is ``age_days`` old: the
        tier its age calls for (:meth:`TierPolicy.tier_for`), or ``reached`` (the tier it
        reached before) when that is colder, then ``held`` is True (a day never gets warmer);
        the period of that tier's layout (:meth:`layout_for`, :func:`period_of`; None for HOT).
        ConfigError for a bad ``age_days``."""
        tier, held = self.tier_for(age_days), False
        if reached is not None and is_colder(reached, tier):
            tier, held = reached, True
        return tier, None if tier == HOT else period_of(day, self.layout_for(tier)), held

    def settings_for(self, tier: str) -> TierSettings:
        """The Parquet settings of ``tier``; ConfigError for an unknown tier name."""
        if tier not in TIERS:
            raise ConfigError(f"tier = {tier!r}: expected one of {', '.join(TIERS)}")
        return getattr(self, tier.lower())

    def layout_for(self, tier: str) -> str:
        """The layout of ``tier``: its ``layout`` setting, else :data:`DEFAULT_LAYOUTS`."""
        return self.settings_for(tier).layout or DEFAULT_LAYOUTS[tier]

    def root_for(self, tier: str, archive_root: Path) -> Path | str:
        """The folder of ``tier``'s files for the archive at ``archive_root`` (or its
        ``s3://`` URI).

        HOT is the archive root itself, as spelled; WARM and COLD use their ``root`` setting (a
        relative one from the parent of the folder the archive root leads to, :func:`place_of`;
        an S3 URI as it is) or, unset, ``<archive root>-warm`` / ``-cold`` beside that folder:
        the same folders whichever way the root is spelled (a symbolic link to it or to a
        folder above it, ``..``). ConfigError naming ``tier`` when it is not a tier name, or
        the root when its links cannot be followed (a loop).
        """
        if tier == HOT:
            return Path(archive_root)
        configured = self.settings_for(tier).root
        if configured is not None and is_object_uri(configured):
            return configured
        place = place_of(archive_root)
        if configured is None:
            return place.with_name(f"{place.name}-{tier.lower()}")
        return place.parent / PurePath(configured)

    def store_for(self, tier: str, archive_root: Path) -> TierStore:
        """The store of ``tier``'s files, at :meth:`root_for`: HOT's is the archive root (a
        folder), WARM's and COLD's hold their consolidated files (a folder or an S3 prefix).
        ConfigError naming ``tier`` when it is not a tier name, as :meth:`root_for` raises."""
        return tier_store(self.root_for(tier, archive_root))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict that :meth:`from_dict` turns back into an equal policy."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, source: str = "tier policy") -> TierPolicy:
        """Build a policy from a mapping; unknown keys are errors, missing keys take defaults.

        Raises
        ------
        ConfigError
            Naming ``source`` and the key on an unknown key, a wrong type or a bad value.
        """
        _check_keys(data, cls, source=source)
        defaults = cls()
        kwargs: dict[str, Any] = {}
        for key, value in data.items():
            if key in ("hot", "warm", "cold"):
                kwargs[key] = _settings_from_dict(
                    value, getattr(defaults, key), source=f"{source}: [{key}]"
                )
            else:
                kwargs[key] = value
        try:
            return cls(**kwargs)
        except ConfigError as exc:
            raise ConfigError(f"{source}: {exc}") from None

    @classmethod
    def load(cls, path: Path | str) -> TierPolicy:
        """Read a policy from a ``.toml`` or ``.json`` file.

        Raises
        ------
        ConfigError
            The file is missing, unreadable, not valid TOML/JSON, or holds an invalid value.
        """
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read tier policy ({exc.strerror})") from None
        except UnicodeDecodeError as exc:
            raise ConfigError(
                f"{path}: not UTF-8 text (byte {exc.start}); expected a TOML or JSON tier policy"
            ) from None
        try:
            if path.suffix == ".toml":
                data = tomllib.loads(text)
            elif path.suffix == ".json":
                data = load_json(text, path, error=ConfigError)
            else:
                raise ConfigError(f"{path}: expected a .toml or .json tier policy file")
        except (tomllib.TOMLDecodeError, RecursionError) as exc:  # RecursionError: too deep
            raise ConfigError(f"{path}: not valid {path.suffix[1:].upper()}: {exc}") from None
        return cls.from_dict(data, source=str(path))


def _check_keys(data: Any, kind: type, *, source: str) -> None:
    """Raise ConfigError naming ``source`` unless ``data`` is a mapping whose keys are all
    fields of the dataclass ``kind`` (the unknown ones and the expected ones named, sorted)."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"{source}: expected a table of settings, got {type(data).__name__}")
    known = {f.name for f in fields(kind)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ConfigError(
            f"{source}: unknown key(s) {', '.join(unknown)}; expected {', '.join(sorted(known))}"
        )


def _settings_from_dict(data: Any, default: TierSettings, *, source: str) -> TierSettings:
    """A tier's settings from its table: the keys it leaves out keep the tier's ``default``
    (a ``[cold]`` naming only its ``root`` still writes zstd 19), but a codec other than the
    default's named without a level takes that codec's general default level (none for a codec
    without levels, 3 otherwise), never a level meant for another codec."""
    _check_keys(data, TierSettings, source=source)
    codec = data.get("compression", default.compression)
    if "compression_level" not in data and isinstance(codec, str) and codec != default.compression:
        general = WriterSettings().compression_level if COMPRESSION_LEVELS.get(codec) else None
        data = {**data, "compression_level": general}  # a level given is still checked
    try:
        return replace(default, **data)
    except ConfigError as exc:
        raise ConfigError(f"{source}: {exc}") from None


def place_of(folder: Path | str) -> Path:
    """The folder ``folder`` leads to: absolute, every symbolic link in it followed and each
    ``..`` taken where they lead (it need not exist: the part that does is followed). How
    local roots are compared as places, and what the default and relative tier roots are
    placed beside. ConfigError naming ``folder``, on one line, when its links loop
    (``fsio.resolved``)."""
    return resolved(folder)


def period_of(day: date, layout: str) -> str:
    """``YYYY-MM`` (layout ``month``) or ``YYYY`` (layout ``year``) of ``day``: the period of
    the consolidated file that holds it."""
    if layout == LAYOUT_MONTH:
        return f"{day.year:04d}-{day.month:02d}"
    if layout == LAYOUT_YEAR:
        return f"{day.year:04d}"
    raise ConfigError(f"layout = {layout!r}: expected {LAYOUT_MONTH!r} or {LAYOUT_YEAR!r}")


def is_colder(tier: str, than: str) -> bool:
    """True when ``tier`` comes after ``than`` in :data:`TIERS` (holds older data)."""
    return TIERS.index(tier) > TIERS.index(than)


def check_age_days(age_days: object) -> int:
    """Return ``age_days`` if it is an integer >= 0, else raise ConfigError (no default)."""
    if age_days is None:
        raise ConfigError(
            "age_days is required: the tier follows from the batch's real age, and a guessed "
            "age gives a confident tier that can be wrong by two tiers"
        )
    if not is_int(age_days) or age_days < 0:  # type: ignore[operator]
        raise ConfigError(f"age_days = {age_days!r}: expected an integer >= 0")
    return age_days  # type: ignore[return-value]
