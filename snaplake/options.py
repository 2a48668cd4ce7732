"""CoreOptions: Paimon's table option keys, defaults and value syntax, with typed accessors.

Options live in the table's ``schema-N`` file, where other engines read them,
so keys and value syntax are Paimon's (``snapshot.time-retained = "1 h"``,
``manifest.target-file-size = "8 mb"``). Each key is parsed once into a typed
value (``timedelta``, int bytes, int). snaplake-only keys start with
``snaplake.``; an unknown ``snaplake.*`` key is refused so a typo never falls
back to a default silently. Other unknown keys are kept untouched: they belong
to other Paimon engines.

Source: Paimon ``CoreOptions`` (keys and defaults), ``MemorySize.parse`` and
``TimeUtils.parseDuration`` (value syntax).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Generic, TypeVar

from snaplake.errors import InvalidOptionError

__all__ = ["ConfigOption", "CoreOptions", "parse_duration", "parse_memory_size"]

T = TypeVar("T")

_SIZE_UNITS = {
    "": 1, "b": 1, "bytes": 1,
    "k": 1 << 10, "kb": 1 << 10, "kibibytes": 1 << 10,
    "m": 1 << 20, "mb": 1 << 20, "mebibytes": 1 << 20,
    "g": 1 << 30, "gb": 1 << 30, "gibibytes": 1 << 30,
    "t": 1 << 40, "tb": 1 << 40, "tebibytes": 1 << 40,
}  # fmt: skip

_TIME_UNITS_MS = {
    "ns": 1e-6, "nano": 1e-6, "nanos": 1e-6, "nanosecond": 1e-6, "nanoseconds": 1e-6,
    "us": 1e-3, "micro": 1e-3, "micros": 1e-3, "microsecond": 1e-3, "microseconds": 1e-3,
    "ms": 1, "milli": 1, "millis": 1, "millisecond": 1, "milliseconds": 1,
    "": 1000, "s": 1000, "sec": 1000, "secs": 1000, "second": 1000, "seconds": 1000,
    "m": 60_000, "min": 60_000, "mins": 60_000, "minute": 60_000, "minutes": 60_000,
    "h": 3_600_000, "hour": 3_600_000, "hours": 3_600_000,
    "d": 86_400_000, "day": 86_400_000, "days": 86_400_000,
}  # fmt: skip

_NUMBER_UNIT = re.compile(r"^\s*(\d+)\s*([a-zA-Z]*)\s*$")


def parse_memory_size(text: str) -> int:
    """Parse Paimon's memory-size syntax (``"8 mb"``, ``"128mb"``, ``"1024"``) into bytes.

    Raises:
        ValueError: not a non-negative integer followed by a known unit.

    Source: Paimon ``MemorySize.parse`` (units are powers of 1024).
    """
    match = _NUMBER_UNIT.match(text)
    unit = match.group(2).lower() if match else None
    if match is None or unit not in _SIZE_UNITS:
        raise ValueError(f"{text!r} is not a memory size such as '8 mb' or '1024'")
    return int(match.group(1)) * _SIZE_UNITS[unit]


def parse_duration(text: str) -> timedelta:
    """Parse Paimon's duration syntax (``"1 h"``, ``"10 ms"``, ``"30 min"``, ``"5"`` = ms).

    A bare number is milliseconds, as in Paimon.

    Raises:
        ValueError: not a non-negative integer followed by a known unit.

    Source: Paimon ``TimeUtils.parseDuration``.
    """
    match = _NUMBER_UNIT.match(text)
    if match is None:
        raise ValueError(f"{text!r} is not a duration such as '1 h', '10 s' or '500 ms'")
    unit = match.group(2).lower()
    factor = 1 if unit == "" else _TIME_UNITS_MS.get(unit)
    if factor is None:
        raise ValueError(f"{text!r} has an unknown time unit {unit!r}")
    return timedelta(milliseconds=int(match.group(1)) * factor)


def _parse_bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered not in ("true", "false"):
        raise ValueError(f"{text!r} is not 'true' or 'false'")
    return lowered == "true"


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfigOption(Generic[T]):
    """One table option: its Paimon key, parser, default and meaning.

    Attributes:
        key: The option key as written in the schema file.
        parse: Turns the stored string into the typed value; raises ``ValueError``.
        default: The value when the key is absent (``None`` = no default).
        doc: One line for ``--help`` texts and docs.
    """

    key: str
    parse: Callable[[str], T]
    default: T | None
    doc: str


def _opt(key: str, parse: Callable[[str], T], default: T | None, doc: str) -> ConfigOption[T]:
    return ConfigOption(key=key, parse=parse, default=default, doc=doc)


BUCKET = _opt("bucket", int, -1, "Number of buckets; -1 = bucket-unaware append table.")
BUCKET_KEY = _opt("bucket-key", str, None, "Comma-separated bucket key columns.")
FILE_FORMAT = _opt("file.format", str, "parquet", "Format of new data files: parquet, orc, avro.")
FILE_COMPRESSION = _opt("file.compression", str, "zstd", "Compression codec of new data files.")
DATA_FILE_PREFIX = _opt("data-file.prefix", str, "data-", "File name prefix of data files.")
FILE_SUFFIX_INCLUDE_COMPRESSION = ConfigOption(
    key="file.suffix.include.compression",
    parse=_parse_bool,
    default=False,
    doc="Name data files '<prefix><uuid>-<n>.<compression>.<format>'.",
)
METADATA_STATS_MODE = _opt(
    "metadata.stats-mode", str, "truncate(16)", "none, counts, truncate(N) or full."
)


def _parse_level_map(text: str) -> dict[int, str]:
    """Parse Paimon's per-level map option (``"0:none,1:truncate(16)"``)."""
    out: dict[int, str] = {}
    for item in text.split(","):
        if not item.strip():
            continue
        level, sep, value = item.partition(":")
        if not sep or not level.strip().isdigit() or not value.strip():
            raise ValueError(f"{item.strip()!r} is not '<level>:<value>'")
        out[int(level)] = value.strip()
    return out


METADATA_STATS_MODE_PER_LEVEL: ConfigOption[dict[int, str]] = _opt(
    "metadata.stats-mode.per.level", _parse_level_map, {},
    "Per-level metadata.stats-mode of primary-key data files ('0:none,1:full').",
)  # fmt: skip
FILE_COMPRESSION_PER_LEVEL: ConfigOption[dict[int, str]] = _opt(
    "file.compression.per.level", _parse_level_map, {},
    "Per-level file.compression of primary-key data files ('0:lz4,1:zstd').",
)  # fmt: skip
FILE_FORMAT_PER_LEVEL: ConfigOption[dict[int, str]] = _opt(
    "file.format.per.level", _parse_level_map, {},
    "Per-level file.format of primary-key data files ('0:avro').",
)  # fmt: skip
CHANGELOG_PRODUCER = _opt(
    "changelog-producer", lambda t: t.strip().lower(), "none",
    "Changelog files of primary-key tables: none, input (lookup, full-compaction: refused).",
)  # fmt: skip
CHANGELOG_FILE_PREFIX = _opt(
    "changelog-file.prefix", str, "changelog-", "File name prefix of changelog files."
)
CHANGELOG_FILE_FORMAT = _opt(
    "changelog-file.format", str, None, "Format of changelog files (default: file.format)."
)
CHANGELOG_FILE_COMPRESSION = _opt(
    "changelog-file.compression", str, None, "Codec of changelog files (default: file.compression)."
)
CHANGELOG_FILE_STATS_MODE = _opt(
    "changelog-file.stats-mode", str, None,
    "Stats mode of changelog files (default: the level-0 data file mode).",
)  # fmt: skip
CHANGELOG_NUM_RETAINED_MIN = _opt(
    "changelog.num-retained.min", int, None, "Changelog retention (default: the snapshots')."
)
CHANGELOG_NUM_RETAINED_MAX = _opt(
    "changelog.num-retained.max", int, None, "Changelog retention (default: the snapshots')."
)
CHANGELOG_TIME_RETAINED = _opt(
    "changelog.time-retained", parse_duration, None,
    "Changelog retention (default: the snapshots').",
)  # fmt: skip
DYNAMIC_PARTITION_OVERWRITE = ConfigOption(
    key="dynamic-partition-overwrite",
    parse=_parse_bool,
    default=True,
    doc="An overwrite without a partition spec replaces only the partitions it writes.",
)
CONSUMER_EXPIRATION_TIME = _opt(
    "consumer.expiration-time", parse_duration, None, "Consumers idle this long stop pinning."
)
CONSUMER_CHANGELOG_ONLY = ConfigOption(
    key="consumer.changelog-only",
    parse=_parse_bool,
    default=False,
    doc="Consumers never keep snapshots from expiring.",
)
ORC_TIMESTAMP_LTZ_LEGACY_TYPE = ConfigOption(
    key="orc.timestamp-ltz.legacy.type",
    parse=_parse_bool,
    default=True,
    doc="ORC: TIMESTAMP_LTZ as a plain timestamp holding UTC (true) or as a timestamp instant.",
)
FILE_COMPRESSION_ZSTD_LEVEL = _opt(
    "file.compression.zstd-level", int, 1, "zstd level of data files (Paimon's default 1)."
)
TARGET_FILE_SIZE = _opt(
    "target-file-size", parse_memory_size, 256 << 20, "Roll data files at this size."
)
MANIFEST_FORMAT = _opt("manifest.format", str, "avro", "Manifest format (avro only).")
MANIFEST_COMPRESSION = _opt("manifest.compression", str, "zstd", "Avro codec of manifests.")
MANIFEST_TARGET_FILE_SIZE = _opt(
    "manifest.target-file-size", parse_memory_size, 8 << 20, "Target size of merged manifests."
)
MANIFEST_MERGE_MIN_COUNT = _opt(
    "manifest.merge-min-count", int, 30, "Minor merge once this many small manifests trail."
)
MANIFEST_FULL_COMPACTION_SIZE = _opt(
    "manifest.full-compaction-threshold-size",
    parse_memory_size,
    16 << 20,
    "Full manifest compaction once must-change manifests exceed this size.",
)
COMMIT_MAX_RETRIES = _opt("commit.max-retries", int, 10, "Retries of a lost publish race.")
COMMIT_TIMEOUT = _opt("commit.timeout", parse_duration, None, "Give up retrying after this.")
COMMIT_MIN_RETRY_WAIT = _opt(
    "commit.min-retry-wait", parse_duration, timedelta(milliseconds=10), "First backoff."
)
COMMIT_MAX_RETRY_WAIT = _opt(
    "commit.max-retry-wait", parse_duration, timedelta(seconds=10), "Backoff cap."
)
SNAPSHOT_NUM_RETAINED_MIN = _opt("snapshot.num-retained.min", int, 10, "Always keep this many.")
SNAPSHOT_NUM_RETAINED_MAX = _opt(
    "snapshot.num-retained.max", int, 2**31 - 1, "Never keep more than this many."
)
SNAPSHOT_TIME_RETAINED = _opt(
    "snapshot.time-retained", parse_duration, timedelta(hours=1), "Keep snapshots this young."
)
SNAPSHOT_EXPIRE_LIMIT = _opt("snapshot.expire.limit", int, 50, "Expire at most this many a run.")
COMPACTION_MIN_FILE_NUM = _opt(
    "compaction.min.file-num", int, 5, "Compact a bucket once it has this many small files."
)
COMPACTION_SMALL_FILE_RATIO = _opt(
    "compaction.small-file-ratio", float, 0.7, "Small = below target-file-size times this."
)
PARTITION_DEFAULT_NAME = _opt(
    "partition.default-name", str, "__DEFAULT_PARTITION__", "Directory name of null partitions."
)
PARTITION_LEGACY_NAME = ConfigOption(
    key="partition.legacy-name",
    parse=_parse_bool,
    default=True,
    doc="Java-compatible partition value spelling in paths (dates as day numbers, ...).",
)
PRIMARY_KEY_NULLABLE = ConfigOption(
    key="primary-key.nullable",
    parse=_parse_bool,
    default=False,
    doc="Keep primary-key columns nullable (Paimon makes them NOT NULL by default).",
)
MERGE_ENGINE = _opt(
    "merge-engine",
    str,
    "deduplicate",
    "deduplicate | partial-update | aggregation | first-row (primary-key tables).",
)
IGNORE_DELETE = ConfigOption(
    key="ignore-delete",
    parse=_parse_bool,
    default=False,
    doc="Drop -U/-D rows before writing (fallback keys <engine>.ignore-delete).",
)
IGNORE_UPDATE_BEFORE = ConfigOption(
    key="ignore-update-before", parse=_parse_bool, default=False, doc="Drop -U rows."
)
SEQUENCE_FIELD = _opt("sequence.field", str, None, "Columns ordering versions of a key.")
SEQUENCE_FIELD_SORT_ORDER = _opt(
    "sequence.field.sort-order", str, "ascending", "ascending | descending."
)
ROWKIND_FIELD = _opt("rowkind.field", str, None, "STRING column holding each row's kind.")
PARTIAL_UPDATE_REMOVE_RECORD_ON_DELETE = ConfigOption(
    key="partial-update.remove-record-on-delete",
    parse=_parse_bool,
    default=False,
    doc=(
        "A -D row removes the whole row of a partial-update table. As in Paimon, the reset "
        "lasts only while the -D is merged with the older versions: a compaction below the "
        "top level that merges the -D with a later version of the key leaves one +I, and "
        "older levels' non-null values fill its nulls again (docs/primary-key-tables.md §5)."
    ),
)
NUM_SORTED_RUNS_COMPACTION_TRIGGER = _opt(
    "num-sorted-run.compaction-trigger", int, 5, "Sorted runs per bucket that trigger compaction."
)
NUM_SORTED_RUNS_STOP_TRIGGER = _opt(
    "num-sorted-run.stop-trigger", int, None, "Sorted runs at which writers wait (trigger + 3)."
)
NUM_LEVELS = _opt("num-levels", int, None, "LSM levels per bucket (trigger + 1).")
COMPACTION_MAX_SIZE_AMPLIFICATION_PERCENT = _opt(
    "compaction.max-size-amplification-percent", int, 200, "Full compaction above this."
)
COMPACTION_SIZE_RATIO = _opt("compaction.size-ratio", int, 1, "Universal size ratio, percent.")
FULL_COMPACTION_DELTA_COMMITS = _opt(
    "full-compaction.delta-commits", int, None, "Full compaction after this many commits."
)
COMPACTION_TOTAL_SIZE_THRESHOLD = _opt(
    "compaction.total-size-threshold",
    parse_memory_size,
    None,
    "Full compaction while a bucket is smaller than this.",
)
COMPACTION_INCREMENTAL_SIZE_THRESHOLD = _opt(
    "compaction.incremental-size-threshold",
    parse_memory_size,
    None,
    "Full compaction once the non-top levels exceed this.",
)
WRITE_BUFFER_SIZE = _opt(
    "write-buffer-size", parse_memory_size, 256 << 20, "Rows buffered before a level-0 flush."
)
WRITE_ONLY = ConfigOption(
    key="write-only",
    parse=_parse_bool,
    default=False,
    doc="Writers never compact or run maintenance (snaplake.maintenance.inline is then off).",
)
MAINTENANCE_INLINE = ConfigOption(
    key="snaplake.maintenance.inline",
    parse=_parse_bool,
    default=False,
    doc="Run due manifest merge and expiry right after each successful writer commit.",
)

_ALL_OPTIONS: tuple[ConfigOption[Any], ...] = tuple(
    v for v in globals().values() if isinstance(v, ConfigOption)
)
_SNAPLAKE_OPTIONS: dict[str, ConfigOption[Any]] = {
    o.key: o for o in _ALL_OPTIONS if o.key.startswith("snaplake.")
}


class CoreOptions:
    """Typed, validated view of a table's options (a ``Mapping[str, str]``).

    Every known option is parsed at construction, so a bad value fails when the
    table is opened or created, not in the middle of a commit.

    Args:
        raw: The ``options`` map of the table schema (string keys and values).

    Raises:
        InvalidOptionError: a known key has an unparsable value, or an unknown
            ``snaplake.*`` key is present.

    Source: Paimon ``CoreOptions``.
    """

    def __init__(self, raw: Mapping[str, str]) -> None:
        self.raw: Mapping[str, str] = dict(raw)
        for key in self.raw:
            if key.startswith("snaplake.") and key not in _SNAPLAKE_OPTIONS:
                raise InvalidOptionError(
                    f"unknown option {key!r}; known snaplake options: "
                    f"{', '.join(sorted(_SNAPLAKE_OPTIONS))}",
                    key=key,
                    value=self.raw[key],
                )
        self._values = {o.key: self._parse(o) for o in _ALL_OPTIONS}

    def _parse(self, option: ConfigOption[T]) -> T | None:
        text = self.raw.get(option.key)
        if text is None:
            return option.default
        try:
            return option.parse(text)
        except ValueError as exc:
            raise InvalidOptionError(
                f"option {option.key!r} = {text!r} is invalid: {exc}; "
                f"fix it in the table options ({option.doc})",
                key=option.key,
                value=text,
            ) from exc

    def get(self, option: ConfigOption[T]) -> T | None:
        """Return the typed value of ``option`` (its default when absent)."""
        return self._values[option.key]

    def _req(self, option: ConfigOption[T]) -> T:
        value = self.get(option)
        assert value is not None
        return value

    @property
    def bucket(self) -> int:
        """Number of buckets (``-1`` = bucket-unaware)."""
        return self._req(BUCKET)

    @property
    def bucket_key(self) -> list[str]:
        """Bucket key columns, empty when not set."""
        value = self.get(BUCKET_KEY)
        return [k.strip() for k in value.split(",") if k.strip()] if value else []

    @property
    def target_file_size_bytes(self) -> int:
        """``target-file-size`` in bytes."""
        return self._req(TARGET_FILE_SIZE)

    @property
    def file_format(self) -> str:
        """``file.format`` of new data files (lower case)."""
        return self._req(FILE_FORMAT).strip().lower()

    @property
    def file_compression(self) -> str:
        """``file.compression`` of new data files."""
        return self._req(FILE_COMPRESSION)

    @property
    def data_file_prefix(self) -> str:
        """``data-file.prefix``."""
        return self._req(DATA_FILE_PREFIX)

    @property
    def file_suffix_include_compression(self) -> bool:
        """``file.suffix.include.compression``."""
        return self._req(FILE_SUFFIX_INCLUDE_COMPRESSION)

    @property
    def metadata_stats_mode(self) -> str:
        """``metadata.stats-mode`` of new data files."""
        return self._req(METADATA_STATS_MODE)

    def stats_mode_for_level(self, level: int) -> str:
        """``metadata.stats-mode.per.level`` of ``level``, else ``metadata.stats-mode``.

        Source: Paimon ``KeyValueFileWriterFactory`` (``statsModePerLevel``).
        """
        per_level = self._req(METADATA_STATS_MODE_PER_LEVEL)
        return per_level.get(level, self.metadata_stats_mode)

    def compression_for_level(self, level: int) -> str:
        """``file.compression.per.level`` of ``level``, else ``file.compression``.

        Source: Paimon ``KeyValueFileWriterFactory`` (``fileCompressionPerLevel``).
        """
        return self._req(FILE_COMPRESSION_PER_LEVEL).get(level, self.file_compression)

    def format_for_level(self, level: int) -> str:
        """``file.format.per.level`` of ``level``, else ``file.format``."""
        return self._req(FILE_FORMAT_PER_LEVEL).get(level, self.file_format)

    @property
    def changelog_producer(self) -> str:
        """``changelog-producer`` (lower case): ``none``, ``input``, ``lookup``, ..."""
        return self._req(CHANGELOG_PRODUCER)

    @property
    def changelog_file_prefix(self) -> str:
        """``changelog-file.prefix``."""
        return self._req(CHANGELOG_FILE_PREFIX)

    @property
    def changelog_file_format(self) -> str:
        """``changelog-file.format``, else the format of level-0 files."""
        return self.get(CHANGELOG_FILE_FORMAT) or self.format_for_level(0)

    @property
    def changelog_file_compression(self) -> str:
        """``changelog-file.compression``, else the compression of level-0 files."""
        return self.get(CHANGELOG_FILE_COMPRESSION) or self.compression_for_level(0)

    @property
    def changelog_file_stats_mode(self) -> str:
        """``changelog-file.stats-mode``, else the stats mode of level-0 files.

        Source: Paimon ``KeyValueFileWriterFactory`` (changelog files are written
        at level 0 with ``isChangelog``).
        """
        return self.get(CHANGELOG_FILE_STATS_MODE) or self.stats_mode_for_level(0)

    def changelog_retention(
        self, *, retain_min: int, retain_max: int, time_retained: timedelta
    ) -> tuple[int, int, timedelta]:
        """``changelog.num-retained.min/.max`` and ``changelog.time-retained``.

        Each defaults to the given snapshot retention, as in Paimon.

        Source: Paimon ``CoreOptions.expireConfig`` / ``ExpireConfig.Builder``.
        """
        rmin = self.get(CHANGELOG_NUM_RETAINED_MIN)
        rmax = self.get(CHANGELOG_NUM_RETAINED_MAX)
        tret = self.get(CHANGELOG_TIME_RETAINED)
        return (
            retain_min if rmin is None else rmin,
            retain_max if rmax is None else rmax,
            time_retained if tret is None else tret,
        )

    @property
    def dynamic_partition_overwrite(self) -> bool:
        """``dynamic-partition-overwrite``."""
        return self._req(DYNAMIC_PARTITION_OVERWRITE)

    @property
    def consumer_expiration_time(self) -> timedelta | None:
        """``consumer.expiration-time`` (``None`` = consumers never expire)."""
        return self.get(CONSUMER_EXPIRATION_TIME)

    @property
    def consumer_changelog_only(self) -> bool:
        """``consumer.changelog-only``."""
        return self._req(CONSUMER_CHANGELOG_ONLY)

    @property
    def orc_timestamp_ltz_legacy_type(self) -> bool:
        """``orc.timestamp-ltz.legacy.type``."""
        return self._req(ORC_TIMESTAMP_LTZ_LEGACY_TYPE)

    @property
    def file_compression_zstd_level(self) -> int:
        """``file.compression.zstd-level``."""
        return self._req(FILE_COMPRESSION_ZSTD_LEVEL)

    @property
    def manifest_compression(self) -> str:
        """Avro codec of manifests and lists (``zstd``, ``deflate``, ``snappy``, ``null``)."""
        return self._req(MANIFEST_COMPRESSION)

    @property
    def manifest_target_file_size_bytes(self) -> int:
        """``manifest.target-file-size`` in bytes."""
        return self._req(MANIFEST_TARGET_FILE_SIZE)

    @property
    def manifest_merge_min_count(self) -> int:
        """``manifest.merge-min-count``."""
        return self._req(MANIFEST_MERGE_MIN_COUNT)

    @property
    def manifest_full_compaction_threshold_bytes(self) -> int:
        """``manifest.full-compaction-threshold-size`` in bytes."""
        return self._req(MANIFEST_FULL_COMPACTION_SIZE)

    @property
    def commit_max_retries(self) -> int:
        """``commit.max-retries``."""
        return self._req(COMMIT_MAX_RETRIES)

    @property
    def commit_timeout(self) -> timedelta | None:
        """``commit.timeout`` (``None`` = bounded by retries only)."""
        return self.get(COMMIT_TIMEOUT)

    @property
    def commit_min_retry_wait(self) -> timedelta:
        """``commit.min-retry-wait``."""
        return self._req(COMMIT_MIN_RETRY_WAIT)

    @property
    def commit_max_retry_wait(self) -> timedelta:
        """``commit.max-retry-wait``."""
        return self._req(COMMIT_MAX_RETRY_WAIT)

    @property
    def snapshot_num_retained_min(self) -> int:
        """``snapshot.num-retained.min``."""
        return self._req(SNAPSHOT_NUM_RETAINED_MIN)

    @property
    def snapshot_num_retained_max(self) -> int:
        """``snapshot.num-retained.max``."""
        return self._req(SNAPSHOT_NUM_RETAINED_MAX)

    @property
    def snapshot_time_retained(self) -> timedelta:
        """``snapshot.time-retained``."""
        return self._req(SNAPSHOT_TIME_RETAINED)

    @property
    def snapshot_expire_limit(self) -> int:
        """``snapshot.expire.limit``."""
        return self._req(SNAPSHOT_EXPIRE_LIMIT)

    @property
    def compaction_min_file_num(self) -> int:
        """``compaction.min.file-num``."""
        return self._req(COMPACTION_MIN_FILE_NUM)

    @property
    def compaction_small_file_ratio(self) -> float:
        """``compaction.small-file-ratio``."""
        return self._req(COMPACTION_SMALL_FILE_RATIO)

    @property
    def partition_default_name(self) -> str:
        """``partition.default-name``."""
        return self._req(PARTITION_DEFAULT_NAME)

    @property
    def partition_legacy_name(self) -> bool:
        """``partition.legacy-name``."""
        return self._req(PARTITION_LEGACY_NAME)

    @property
    def maintenance_inline(self) -> bool:
        """``snaplake.maintenance.inline``."""
        return self._req(MAINTENANCE_INLINE)

    # primary-key tables ----------------------------------------------------
    def target_file_size(self, *, has_primary_key: bool) -> int:
        """``target-file-size`` in bytes; absent: 128 MB with a primary key, else 256 MB.

        Source: Paimon ``CoreOptions.targetFileSize(hasPrimaryKey)``.
        """
        if TARGET_FILE_SIZE.key in self.raw:
            return self._req(TARGET_FILE_SIZE)
        return (128 << 20) if has_primary_key else (256 << 20)

    @property
    def primary_key_nullable(self) -> bool:
        """``primary-key.nullable``."""
        return self._req(PRIMARY_KEY_NULLABLE)

    @property
    def merge_engine(self) -> str:
        """``merge-engine`` as written (lower case), default ``deduplicate``."""
        return self._req(MERGE_ENGINE).strip().lower()

    @property
    def ignore_delete(self) -> bool:
        """``ignore-delete`` or, when absent, one of its Paimon fallback keys."""
        if IGNORE_DELETE.key in self.raw:
            return self._req(IGNORE_DELETE)
        for key in _IGNORE_DELETE_FALLBACK_KEYS:
            text = self.raw.get(key)
            if text is not None:
                try:
                    return _parse_bool(text)
                except ValueError as exc:
                    raise InvalidOptionError(
                        f"option {key!r} = {text!r} is invalid: {exc}", key=key, value=text
                    ) from exc
        return False

    @property
    def ignore_update_before(self) -> bool:
        """``ignore-update-before``."""
        return self._req(IGNORE_UPDATE_BEFORE)

    @property
    def sequence_field(self) -> list[str]:
        """``sequence.field`` columns (empty when unset)."""
        value = self.get(SEQUENCE_FIELD)
        return [k.strip() for k in value.split(",") if k.strip()] if value else []

    @property
    def sequence_field_descending(self) -> bool:
        """``sequence.field.sort-order = descending``."""
        return self._req(SEQUENCE_FIELD_SORT_ORDER).strip().lower() == "descending"

    @property
    def rowkind_field(self) -> str | None:
        """``rowkind.field`` (``None`` when unset)."""
        value = self.get(ROWKIND_FIELD)
        return value.strip() if value else None

    @property
    def partial_update_remove_record_on_delete(self) -> bool:
        """``partial-update.remove-record-on-delete``."""
        return self._req(PARTIAL_UPDATE_REMOVE_RECORD_ON_DELETE)

    @property
    def num_sorted_run_compaction_trigger(self) -> int:
        """``num-sorted-run.compaction-trigger``."""
        return self._req(NUM_SORTED_RUNS_COMPACTION_TRIGGER)

    @property
    def num_sorted_run_stop_trigger(self) -> int:
        """``num-sorted-run.stop-trigger``; default trigger + 3, never below the trigger."""
        trigger = self.num_sorted_run_compaction_trigger
        stop = self.get(NUM_SORTED_RUNS_STOP_TRIGGER)
        return max(trigger, trigger + 3 if stop is None else stop)

    @property
    def num_levels(self) -> int:
        """``num-levels``; default ``num-sorted-run.compaction-trigger + 1``."""
        value = self.get(NUM_LEVELS)
        return self.num_sorted_run_compaction_trigger + 1 if value is None else value

    @property
    def compaction_max_size_amplification_percent(self) -> int:
        """``compaction.max-size-amplification-percent``."""
        return self._req(COMPACTION_MAX_SIZE_AMPLIFICATION_PERCENT)

    @property
    def compaction_size_ratio(self) -> int:
        """``compaction.size-ratio`` (percent)."""
        return self._req(COMPACTION_SIZE_RATIO)

    @property
    def full_compaction_delta_commits(self) -> int | None:
        """``full-compaction.delta-commits`` (``None`` = unset)."""
        return self.get(FULL_COMPACTION_DELTA_COMMITS)

    @property
    def compaction_total_size_threshold(self) -> int | None:
        """``compaction.total-size-threshold`` in bytes (``None`` = unset)."""
        return self.get(COMPACTION_TOTAL_SIZE_THRESHOLD)

    @property
    def compaction_incremental_size_threshold(self) -> int | None:
        """``compaction.incremental-size-threshold`` in bytes (``None`` = unset)."""
        return self.get(COMPACTION_INCREMENTAL_SIZE_THRESHOLD)

    @property
    def write_buffer_size(self) -> int:
        """``write-buffer-size`` in bytes."""
        return self._req(WRITE_BUFFER_SIZE)

    @property
    def write_only(self) -> bool:
        """``write-only`` (or its fallback key ``write.compaction-skip``)."""
        if WRITE_ONLY.key not in self.raw and "write.compaction-skip" in self.raw:
            return _parse_bool(self.raw["write.compaction-skip"])
        return self._req(WRITE_ONLY)

    def field_option(self, field: str, suffix: str) -> str | None:
        """The raw value of ``fields.<field>.<suffix>`` (``None`` when absent)."""
        return self.raw.get(f"fields.{field}.{suffix}")

    def field_aggregate_function(self, field: str) -> str | None:
        """``fields.<field>.aggregate-function``, else ``fields.default-aggregate-function``."""
        value = self.raw.get(self.field_aggregate_function_key(field))
        return value.strip() if value is not None else None

    def field_aggregate_function_key(self, field: str) -> str:
        """The key :meth:`field_aggregate_function` reads for ``field`` (for messages).

        ``fields.<field>.aggregate-function`` when it is set, else
        ``fields.default-aggregate-function``: an error about the function
        names the key the user wrote.
        """
        key = f"fields.{field}.aggregate-function"
        return key if key in self.raw else "fields.default-aggregate-function"

    def field_flag(self, field: str, suffix: str) -> bool:
        """A boolean ``fields.<field>.<suffix>`` option (``ignore-retract``, ``distinct``).

        Raises:
            InvalidOptionError: the value is not ``true`` or ``false``.
        """
        text = self.field_option(field, suffix)
        if text is None:
            return False
        try:
            return _parse_bool(text)
        except ValueError as exc:
            key = f"fields.{field}.{suffix}"
            raise InvalidOptionError(
                f"option {key!r} = {text!r} is invalid: {exc}", key=key, value=text
            ) from exc

    def field_listagg_delimiter(self, field: str) -> str:
        """``fields.<field>.list-agg-delimiter`` (default ``,``)."""
        value = self.field_option(field, "list-agg-delimiter")
        return "," if value is None else value


_IGNORE_DELETE_FALLBACK_KEYS = (
    "first-row.ignore-delete",
    "deduplicate.ignore-delete",
    "partial-update.ignore-delete",
)
