"""The option registry: every Paimon table option, declared once, with what snaplake does with it.

Principle: an option that changes what a Paimon engine writes, reads, keeps
or deletes is either honoured by snaplake or refused, for the operations it
affects, before anything is read or written. Each option below is declared
once (:class:`~snaplake.options.config_option.ConfigOption`): its key, its
status, the values snaplake accepts and the operations it refuses otherwise,
and, for the options snaplake reads, the parser and default
:class:`~snaplake.options.core_options.CoreOptions` uses. The statuses:

* ``honoured``: snaplake implements it (see the note; a test proves each);
* ``refused``: any value other than the accepted ones (usually Paimon's
  default) is refused for the listed operations with
  :class:`~snaplake.errors.UnsupportedTableError`;
* ``primary-key``: matters only to primary-key tables (Paimon ignores it on
  append tables); on a primary-key table it is honoured, or refused for the
  operations its declaration lists (the ``feature`` it would turn on; see
  docs/primary-key-tables.md §1);
* ``dependent``: takes effect only together with another option (or column
  type) that snaplake refuses, so it can never change what snaplake does;
* ``layout``: changes only how bytes are laid out, never which rows a reader
  gets nor which files a snapshot holds: sizes of row groups, stripes,
  batches and files, encodings, the order of rows or manifest entries, which
  optional statistics and file indexes are kept for pruning, when another
  engine's writer compacts. Any value is accepted; snaplake's files are
  laid out its own way and every engine reads them the same;
* ``engine-specific``: tunes another engine's runtime (parallelism, memory,
  caches, spilling, Flink/Spark scheduling, lookup joins, streaming source
  and sink behaviour, catalog and metastore integration, callbacks and
  ALTER TABLE rules that engine applies) and has no effect on the files of
  the table, on what a batch reader of the table returns, or on what is
  kept or deleted. Accepted and ignored.

Keys not listed and not in a listed family (other engines' connector
options such as Flink's ``sink.parallelism``, ``s3.*`` storage settings)
are kept in the schema untouched: they are not Paimon ``CoreOptions``.
:func:`snaplake.store.support.check_supported` is the one caller of the
refusals.

Source: Paimon ``CoreOptions`` (keys, defaults, meaning), read at apache/paimon
``5dacde5`` (2026-08).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any, TypeVar

from snaplake.options.config_option import (
    ALL_OPERATIONS,
    ConfigOption,
    Operation,
    OptionStatus,
    accepts_any,
    parse_bool,
    parse_duration,
    parse_memory_size,
    parse_zone,
)
from snaplake.options.partition_time import TimestampFormatter

__all__ = [
    "iter_option_families",
    "iter_options",
    "lookup_option",
    "option_refusal",
    "options_markdown",
    "primary_key_option_refusal",
    "typed_options",
]

T = TypeVar("T")

CREATE, READ, WRITE, COMMIT, MAINTENANCE = (
    Operation.CREATE, Operation.READ, Operation.WRITE, Operation.COMMIT, Operation.MAINTENANCE,
)  # fmt: skip
_CHANGES = frozenset({WRITE, COMMIT, MAINTENANCE})
_READ_ONLY = frozenset({READ})
_WRITE = frozenset({WRITE, MAINTENANCE})
_COMMIT = frozenset({COMMIT})
_MAINT = frozenset({MAINTENANCE})
_NOT_READ = frozenset({WRITE, COMMIT, MAINTENANCE})
_PK_ALL = ALL_OPERATIONS
"""A primary-key refusal of every operation (creating the table included)."""
_PK_WRITE = frozenset({CREATE, WRITE, COMMIT, MAINTENANCE})
"""A primary-key refusal of everything but reads (what is stored would differ)."""


def _is(*values: str) -> Callable[[str], bool]:
    allowed = frozenset(v.lower() for v in values)
    return lambda value: value.strip().lower() in allowed


def _unset(value: str) -> bool:
    return not value.strip()


def _not_true(value: str) -> bool:
    return value.strip().lower() != "true"


def _never(_value: str) -> bool:
    return False


def _accepting(
    status: OptionStatus,
    key: str,
    note: str,
    values: tuple[str, ...],
    *,
    refused_for: frozenset[Operation],
    parse: Callable[[str], T] | None,
    default: T | None,
    doc: str,
) -> ConfigOption[T]:
    """An option whose values other than ``values`` (none given: unset) refuse ``refused_for``."""
    return ConfigOption(
        key=key, status=status, note=note, parse=parse, default=default, doc=doc,
        accepts=_is(*values) if values else _unset,
        accepted=" / ".join(values) if values else "unset",
        refused_for=refused_for | {CREATE},
    )  # fmt: skip


def _honoured(
    key: str,
    note: str,
    *values: str,
    refused_for: frozenset[Operation] = ALL_OPERATIONS,
    parse: Callable[[str], T] | None = None,
    default: T | None = None,
    doc: str = "",
) -> ConfigOption[T]:
    """An honoured option; with ``values``, any other value is refused for ``refused_for``."""
    if values:
        return _accepting(
            OptionStatus.HONOURED, key, note, values, refused_for=refused_for, parse=parse,
            default=default, doc=doc,
        )  # fmt: skip
    return ConfigOption(
        key=key, status=OptionStatus.HONOURED, note=note, parse=parse, default=default, doc=doc
    )


def _refused(
    key: str,
    note: str,
    *values: str,
    refused_for: frozenset[Operation] = ALL_OPERATIONS,
    parse: Callable[[str], T] | None = None,
    default: T | None = None,
    doc: str = "",
) -> ConfigOption[T]:
    """A refused option: any value but ``values`` (none given: unset) refuses ``refused_for``."""
    return _accepting(
        OptionStatus.REFUSED, key, note, values, refused_for=refused_for, parse=parse,
        default=default, doc=doc,
    )  # fmt: skip


def _pk(
    key: str,
    note: str = "",
    *,
    feature: str = "",
    accepts: Callable[[str], bool] = accepts_any,
    accepted: str = "any",
    refused_for: frozenset[Operation] = frozenset(),
    parse: Callable[[str], T] | None = None,
    default: T | None = None,
    doc: str = "",
) -> ConfigOption[T]:
    """A ``primary-key`` option; refused on primary-key tables as ``feature`` when not accepted."""
    return ConfigOption(
        key=key, status=OptionStatus.PRIMARY_KEY, note=note or _PK, parse=parse,
        default=default, doc=doc, feature=feature, accepts=accepts, accepted=accepted,
        refused_for=refused_for,
    )  # fmt: skip


def _engine(key: str, note: str) -> ConfigOption[Any]:
    return ConfigOption(key=key, status=OptionStatus.ENGINE, note=note)


def _layout(key: str, note: str) -> ConfigOption[Any]:
    return ConfigOption(key=key, status=OptionStatus.LAYOUT, note=note)


def _dependent(key: str, on: str) -> ConfigOption[Any]:
    return ConfigOption(
        key=key,
        status=OptionStatus.DEPENDENT,
        note=f"takes effect only with {on}, which snaplake refuses",
    )


def _bucket(value: str) -> bool:
    text = value.strip()
    return text.lstrip("-").isdigit() and (int(text) in (-1, -2) or int(text) > 0)


def _positive_int(text: str) -> int:
    value = int(text)
    if not 0 < value < 2**31:
        raise ValueError("must be a positive 32-bit integer")
    return value


def _stats_mode(value: str) -> bool:
    mode = value.strip().lower()
    return mode in ("none", "counts", "full") or bool(_TRUNCATE.fullmatch(mode))


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


def _parse_positive(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise ValueError(f"{value} is not a positive count")
    return value


def _parse_max_buckets(text: str) -> int:
    value = int(text)
    if value != -1 and not 1 <= value <= 32767:
        raise ValueError(f"{value} is not -1 or a count in 1..32767")
    return value


def _parse_fields(text: str) -> tuple[str, ...]:
    return tuple(f.strip() for f in text.split(",") if f.strip())


def _lower(text: str) -> str:
    return text.strip().lower()


def _choice(*values: str) -> Callable[[str], str]:
    """A parser of an enumerated option: the value, lower case, if one of ``values``."""

    def parse(text: str) -> str:
        value = text.strip().lower()
        if value not in values:
            raise ValueError(f"{text!r} is not one of {', '.join(values)}")
        return value

    return parse


def _time_zone(text: str) -> str:
    """Parse a time zone id (``UTC``, ``Asia/Shanghai``, ``+08:00``); see :func:`parse_zone`."""
    parse_zone(text)
    return text.strip()


_SCAN_MODES = (
    "default", "latest-full", "full", "latest", "latest-delta", "compacted-full",
    "from-timestamp", "from-file-creation-time", "from-creation-timestamp", "from-snapshot",
    "from-snapshot-full", "incremental",
)  # fmt: skip
"""The ``scan.mode`` values snaplake's batch reads honour (Paimon's ``StartupMode``)."""

_TRUNCATE = re.compile(r"truncate\(\d*[1-9]\d*\)")
_ENGINE_STREAM = "streaming source/sink behaviour of Flink or Spark jobs"
_LOOKUP = "lookup joins and lookup caches of another engine"
_PK = "primary-key tables only (see docs/primary-key-tables.md)"
_ICEBERG = (
    "Iceberg metadata written next to Paimon's at every commit (Paimon IcebergOptions); "
    "snaplake writes none"
)
_EXPIRY = "snapshot expiry"
_CHANGELOG_EXPIRY = (
    "changelog files expire with their snapshots; a value retaining changelog longer than "
    "snapshots (decoupled changelog) is refused by expiry"
)

# fmt: off
# The options snaplake reads (CoreOptions parses each once) ------------------------------
BUCKET: ConfigOption[int] = ConfigOption(
    key="bucket", status=OptionStatus.HONOURED,
    note="-1 = bucket-unaware; N > 0 = fixed buckets hashed like Java; other modes (dynamic, "
    "postpone = -2) are primary-key modes",
    accepts=_bucket, accepted="-1, -2 or N > 0", refused_for=ALL_OPERATIONS,
    parse=int, default=-1, doc="Number of buckets; -1 = bucket-unaware append table.")
BUCKET_KEY = _honoured(
    "bucket-key", "columns hashed for fixed buckets (none: every row in one bucket, the empty "
    "row's hash, as pypaimon and Java's bucket function place them)",
    parse=str, doc="Comma-separated bucket key columns.")
FILE_FORMAT = _honoured(
    "file.format", "format of new data files; files are read by their extension, so tables "
    "whose format changed read whole", "parquet", "orc", "avro", refused_for=_CHANGES,
    parse=str, default="parquet", doc="Format of new data files: parquet, orc, avro.")
FILE_COMPRESSION = _honoured(
    "file.compression", "codec of new data files, per format (refused when the format lacks "
    "it)", parse=str, default="zstd", doc="Compression codec of new data files.")
FILE_COMPRESSION_ZSTD_LEVEL = _honoured(
    "file.compression.zstd-level", "zstd level of Parquet and Avro files; ORC files only at "
    "level 1 (pyarrow's ORC writer has no level setting)",
    parse=int, default=1, doc="zstd level of data files (Paimon's default 1).")
DATA_FILE_PREFIX = _honoured(
    "data-file.prefix", "file name prefix of new data files",
    parse=str, default="data-", doc="File name prefix of data files.")
FILE_SUFFIX_INCLUDE_COMPRESSION = _honoured(
    "file.suffix.include.compression", "new files named "
    "<prefix><uuid>-<n>.<compression>.<format> (zst, snappy, gz, ...)",
    parse=parse_bool, default=False,
    doc="Name data files '<prefix><uuid>-<n>.<compression>.<format>'.")
METADATA_STATS_MODE: ConfigOption[str] = ConfigOption(
    key="metadata.stats-mode", status=OptionStatus.HONOURED,
    note="value stats of new data files", accepts=_stats_mode,
    accepted="none / counts / truncate(N) / full", refused_for=_CHANGES | {CREATE},
    parse=str, default="truncate(16)", doc="none, counts, truncate(N) or full.")
METADATA_STATS_MODE_PER_LEVEL: ConfigOption[dict[int, str]] = _pk(
    "metadata.stats-mode.per.level", _PK + ": value stats of primary-key files per level "
    "(Java's append writers ignore it)", parse=_parse_level_map, default={},
    doc="Per-level metadata.stats-mode of primary-key data files ('0:none,1:full').")
FILE_COMPRESSION_PER_LEVEL: ConfigOption[dict[int, str]] = _pk(
    "file.compression.per.level", _PK + ": codec of primary-key files per level (Java's "
    "append writers ignore it)", parse=_parse_level_map, default={},
    doc="Per-level file.compression of primary-key data files ('0:lz4,1:zstd').")
FILE_FORMAT_PER_LEVEL: ConfigOption[dict[int, str]] = _pk(
    "file.format.per.level", _PK + ": format of primary-key files per level (parquet, orc, "
    "avro); Java's append writers ignore it", parse=_parse_level_map, default={},
    doc="Per-level file.format of primary-key data files ('0:avro').")
CHANGELOG_PRODUCER = _pk(
    "changelog-producer", feature="a changelog producer Paimon does not define",
    accepts=_is("none", "input", "lookup", "full-compaction"),
    accepted="none / input / lookup / full-compaction", refused_for=_PK_WRITE,
    parse=_lower, default="none",
    doc="Changelog files of primary-key tables: none, input, lookup or full-compaction "
    "(the last two written by compaction).")
CHANGELOG_PRODUCER_ROW_DEDUPLICATE: ConfigOption[bool] = _pk(
    "changelog-producer.row-deduplicate", parse=parse_bool, default=False,
    doc="lookup / full-compaction changelog: no -U/+U pair when the values are equal.")
CHANGELOG_PRODUCER_ROW_DEDUPLICATE_IGNORE_FIELDS: ConfigOption[tuple[str, ...]] = _pk(
    "changelog-producer.row-deduplicate-ignore-fields", parse=_parse_fields,
    doc="Fields row-deduplicate does not compare (comma separated).")
LOOKUP_WAIT: ConfigOption[bool] = _pk(
    "lookup-wait", parse=parse_bool, default=True,
    doc="lookup changelog: a writer's prepare_commit compacts its level-0 files so the "
    "changelog lands with the commit (fallback key changelog-producer.lookup-wait).")
CHANGELOG_FILE_PREFIX = _pk(
    "changelog-file.prefix", _PK + ": name prefix of changelog files",
    parse=str, default="changelog-", doc="File name prefix of changelog files.")
CHANGELOG_FILE_FORMAT = _pk(
    "changelog-file.format", _PK + ": format of changelog files (parquet, orc, avro)",
    parse=str, doc="Format of changelog files (default: file.format).")
CHANGELOG_FILE_COMPRESSION = _pk(
    "changelog-file.compression", _PK + ": codec of changelog files",
    parse=str, doc="Codec of changelog files (default: file.compression).")
CHANGELOG_FILE_STATS_MODE = _pk(
    "changelog-file.stats-mode", _PK + ": value stats of changelog files",
    parse=str, doc="Stats mode of changelog files (default: the level-0 data file mode).")
CHANGELOG_NUM_RETAINED_MIN = _honoured(
    "changelog.num-retained.min", _CHANGELOG_EXPIRY,
    parse=int, doc="Changelog retention (default: the snapshots').")
CHANGELOG_NUM_RETAINED_MAX = _honoured(
    "changelog.num-retained.max", _CHANGELOG_EXPIRY,
    parse=int, doc="Changelog retention (default: the snapshots').")
CHANGELOG_TIME_RETAINED = _honoured(
    "changelog.time-retained", _CHANGELOG_EXPIRY,
    parse=parse_duration, doc="Changelog retention (default: the snapshots').")
DYNAMIC_PARTITION_OVERWRITE = _honoured(
    "dynamic-partition-overwrite", "overwrite=True replaces only the partitions written "
    "(true) or the whole table (false)", parse=parse_bool, default=True,
    doc="An overwrite without a partition spec replaces only the partitions it writes.")
CONSUMER_EXPIRATION_TIME = _honoured(
    "consumer.expiration-time", "expiry ignores and removes consumers idle longer",
    parse=parse_duration, doc="Consumers idle this long stop pinning.")
PARTITION_EXPIRATION_TIME = _honoured(
    "partition.expiration-time", "table.expire_partitions, the CLI and the daemon's "
    "expire_partitions task drop partitions older than this (an OVERWRITE snapshot)",
    parse=parse_duration, doc="Partitions older than this are dropped.")
PARTITION_EXPIRATION_STRATEGY = _honoured(
    "partition.expiration-strategy", "the partition's time: its values (values-time) or its "
    "newest file's creation time (update-time)", "values-time", "update-time",
    refused_for=_NOT_READ, parse=_lower, default="values-time",
    doc="values-time or update-time.")
PARTITION_EXPIRATION_CHECK_INTERVAL = _honoured(
    "partition.expiration-check-interval", "the daemon checks a table at most this often "
    "(the API and CLI always check); a shorter partition.expiration-time is refused",
    parse=parse_duration, default=timedelta(hours=1),
    doc="The daemon checks a table for expired partitions at most this often.")
PARTITION_EXPIRATION_MAX_NUM = _honoured(
    "partition.expiration-max-num", "at most this many partitions (the first by value) are "
    "dropped per check", parse=_parse_positive, default=100,
    doc="Partitions dropped per check at most.")
PARTITION_EXPIRATION_BATCH_SIZE = _honoured(
    "partition.expiration-batch-size", "expired partitions are dropped in snapshots of this "
    "many (unset: one snapshot)", parse=_parse_positive,
    doc="Partitions dropped per snapshot.")
PARTITION_TIMESTAMP_FORMATTER = _honoured(
    "partition.timestamp-formatter", "the Java DateTimeFormatter pattern partition times are "
    "parsed with (yyyyMMdd, yyyy-MM-dd HH)", parse=TimestampFormatter.parse,
    doc="How partition times are parsed.")
PARTITION_TIMESTAMP_PATTERN = _honoured(
    "partition.timestamp-pattern", "how partition values form a time ($dt $hour:00:00); "
    "each $name must be a partition key", parse=str,
    doc="How partition values form a time.")
CONSUMER_CHANGELOG_ONLY = _honoured(
    "consumer.changelog-only", "consumers never keep snapshots from expiring",
    parse=parse_bool, default=False, doc="Consumers never keep snapshots from expiring.")
# automatic tags and tag retention (snaplake/options/tag_options.py checks them together)
TAG_AUTOMATIC_CREATION = _honoured(
    "tag.automatic-creation", "create_tag_automatically / the daemon's auto_tag task create "
    "tags by process time, watermark or per batch, with Paimon's names",
    parse=_choice("none", "process-time", "watermark", "batch"), default="none",
    doc="none, process-time, watermark or batch.")
TAG_CREATION_PERIOD = _honoured(
    "tag.creation-period", "the period of automatic tags", parse=_choice(
        "daily", "hourly", "two-hours"), default="daily", doc="daily, hourly or two-hours.")
TAG_CREATION_PERIOD_DURATION = _honoured(
    "tag.creation-period-duration", "a custom period of automatic tags (named yyyyMMddHHmm)",
    parse=parse_duration, doc="A custom tag period (wins over tag.creation-period).")
TAG_CREATION_DELAY = _honoured(
    "tag.creation-delay", "a period's tag waits this long past the period's end",
    parse=parse_duration, default=timedelta(0), doc="Delay after a period before its tag.")
TAG_PERIOD_FORMATTER = _honoured(
    "tag.period-formatter", "automatic tag names with or without dashes", parse=_choice(
        "with_dashes", "without_dashes", "without_dashes_and_spaces"), default="with_dashes",
    doc="with_dashes, without_dashes or without_dashes_and_spaces.")
TAG_NUM_RETAINED_MAX = _honoured(
    "tag.num-retained-max", "expire_tags deletes the oldest automatic tags beyond this count",
    parse=_parse_positive, doc="Automatic tags kept at most.")
TAG_AUTOMATIC_COMPLETION = _honoured(
    "tag.automatic-completion", "a late snapshot tags the next missing period instead of its "
    "own", parse=parse_bool, default=False, doc="Tag the missing periods one by one.")
TAG_BATCH_CUSTOMIZED_NAME = _honoured(
    "tag.batch.customized-name", "the tag name of tag.automatic-creation = batch",
    parse=str, doc="Tag name of batch mode (default batch-write-<yyyy-MM-dd>).")
TAG_DEFAULT_TIME_RETAINED = _honoured(
    "tag.default-time-retained", "written into new tags (tagTimeRetained); expire_tags "
    "deletes tags older than their retention", parse=parse_duration,
    doc="Retention written into new tags.")
SINK_WATERMARK_TIME_ZONE = _honoured(
    "sink.watermark-time-zone", "time zone of watermarks, for tag.automatic-creation = "
    "watermark", parse=_time_zone, default="UTC", doc="Time zone of snapshot watermarks.")
ORC_TIMESTAMP_LTZ_LEGACY_TYPE = _honoured(
    "orc.timestamp-ltz.legacy.type", "ORC: TIMESTAMP_LTZ as a plain timestamp of UTC (true, "
    "Java's default) or a timestamp instant", "true", "false", refused_for=_CHANGES,
    parse=parse_bool, default=True,
    doc="ORC: TIMESTAMP_LTZ as a plain timestamp holding UTC (true) or as a timestamp instant.")
TARGET_FILE_SIZE = _honoured(
    "target-file-size", "data files roll, and compaction aims, at this size",
    parse=parse_memory_size, default=256 << 20, doc="Roll data files at this size.")
MANIFEST_FORMAT = _refused(
    "manifest.format", "manifests are Avro; snaplake reads and writes no other manifest "
    "format", "avro", parse=str, default="avro", doc="Manifest format (avro only).")
MANIFEST_COMPRESSION = _honoured(
    "manifest.compression", "Avro codec of new manifests and manifest lists; any codec is "
    "read; lz4 is never written (Java's Avro has no lz4 codec and pypaimon refuses it)",
    "zstd", "zstandard", "snappy", "deflate", "bzip2", "xz", "null", "none", "uncompressed",
    refused_for=_CHANGES, parse=str, default="zstd", doc="Avro codec of manifests.")
MANIFEST_TARGET_FILE_SIZE = _honoured(
    "manifest.target-file-size", "size of merged manifests",
    parse=parse_memory_size, default=8 << 20, doc="Target size of merged manifests.")
MANIFEST_MERGE_MIN_COUNT = _honoured(
    "manifest.merge-min-count", "minor manifest merge trigger",
    parse=int, default=30, doc="Minor merge once this many small manifests trail.")
MANIFEST_FULL_COMPACTION_SIZE = _honoured(
    "manifest.full-compaction-threshold-size", "full manifest compaction trigger",
    parse=parse_memory_size, default=16 << 20,
    doc="Full manifest compaction once must-change manifests exceed this size.")
COMMIT_MAX_RETRIES = _honoured(
    "commit.max-retries", "commit retry budget",
    parse=int, default=10, doc="Retries of a lost publish race.")
COMMIT_TIMEOUT = _honoured(
    "commit.timeout", "commit retry budget",
    parse=parse_duration, doc="Give up retrying after this.")
COMMIT_MIN_RETRY_WAIT = _honoured(
    "commit.min-retry-wait", "commit backoff",
    parse=parse_duration, default=timedelta(milliseconds=10), doc="First backoff.")
COMMIT_MAX_RETRY_WAIT = _honoured(
    "commit.max-retry-wait", "commit backoff",
    parse=parse_duration, default=timedelta(seconds=10), doc="Backoff cap.")
SNAPSHOT_NUM_RETAINED_MIN = _honoured(
    "snapshot.num-retained.min", _EXPIRY, parse=int, default=10, doc="Always keep this many.")
SNAPSHOT_NUM_RETAINED_MAX = _honoured(
    "snapshot.num-retained.max", _EXPIRY,
    parse=int, default=2**31 - 1, doc="Never keep more than this many.")
SNAPSHOT_TIME_RETAINED = _honoured(
    "snapshot.time-retained", _EXPIRY,
    parse=parse_duration, default=timedelta(hours=1), doc="Keep snapshots this young.")
SNAPSHOT_EXPIRE_LIMIT = _honoured(
    "snapshot.expire.limit", "snapshots expired per run",
    parse=int, default=50, doc="Expire at most this many a run.")
COMPACTION_MIN_FILE_NUM = _honoured(
    "compaction.min.file-num", "small-file compaction trigger",
    parse=int, default=5, doc="Compact a bucket once it has this many small files.")
COMPACTION_SMALL_FILE_RATIO = _honoured(
    "compaction.small-file-ratio", "small-file compaction: which files are small",
    parse=float, default=0.7, doc="Small = below target-file-size times this.")
PARTITION_DEFAULT_NAME = _honoured(
    "partition.default-name", "directory name of null/empty partition values",
    parse=str, default="__DEFAULT_PARTITION__", doc="Directory name of null partitions.")
PARTITION_LEGACY_NAME = _honoured(
    "partition.legacy-name", "spelling of partition values in paths", parse=parse_bool,
    default=True,
    doc="Java-compatible partition value spelling in paths (dates as day numbers, ...).")
DYNAMIC_BUCKET_TARGET_ROW_NUM: ConfigOption[int] = _pk(
    "dynamic-bucket.target-row-num", _PK + ": distinct keys a dynamic bucket takes before "
    "new keys go to a new bucket", parse=_parse_positive, default=2_000_000,
    doc="Keys per dynamic bucket (bucket = -1) before a new bucket is opened.")
DYNAMIC_BUCKET_INITIAL_BUCKETS: ConfigOption[int] = _pk(
    "dynamic-bucket.initial-buckets", _PK + ": the number of assigners (min with the "
    "assigner parallelism, 1 in snaplake); creates no bucket up front, as in Paimon",
    parse=_parse_positive, doc="Assigners of a dynamic-bucket table (immutable).")
DYNAMIC_BUCKET_MAX_BUCKETS: ConfigOption[int] = _pk(
    "dynamic-bucket.max-buckets", _PK + ": largest number of buckets per partition; a "
    "capped partition puts new keys into one of its buckets at random",
    parse=_parse_max_buckets, default=-1,
    doc="Buckets per partition of a dynamic-bucket table at most (-1 = no cap).")
CROSS_PARTITION_UPSERT_INDEX_TTL: ConfigOption[timedelta] = _pk(
    "cross-partition-upsert.index-ttl", _PK + ": a cross-partition writer forgets a key's "
    "partition this long after it last wrote or bootstrapped it (the key may then be "
    "duplicated, as Paimon documents)", parse=parse_duration,
    doc="Age after which a cross-partition writer forgets a key (unset = never).")
CROSS_PARTITION_UPSERT_BOOTSTRAP_PARALLELISM: ConfigOption[int] = _pk(
    "cross-partition-upsert.bootstrap-parallelism", _PK + ": threads reading the keys of a "
    "cross-partition table when a writer starts", parse=_parse_positive, default=10,
    doc="Threads bootstrapping a cross-partition writer's key index.")
PRIMARY_KEY_NULLABLE = _pk(
    "primary-key.nullable", parse=parse_bool, default=False,
    doc="Keep primary-key columns nullable (Paimon makes them NOT NULL by default).")
MERGE_ENGINE = _pk(
    "merge-engine", parse=str, default="deduplicate",
    doc="deduplicate | partial-update | aggregation | first-row (primary-key tables).")
IGNORE_DELETE = _pk(
    "ignore-delete", parse=parse_bool, default=False,
    doc="Drop -U/-D rows before writing (fallback keys <engine>.ignore-delete).")
IGNORE_UPDATE_BEFORE = _pk(
    "ignore-update-before", parse=parse_bool, default=False, doc="Drop -U rows.")
SEQUENCE_FIELD = _pk(
    "sequence.field", parse=str, doc="Columns ordering versions of a key.")
SEQUENCE_FIELD_SORT_ORDER = _pk(
    "sequence.field.sort-order", parse=str, default="ascending", doc="ascending | descending.")
ROWKIND_FIELD = _pk(
    "rowkind.field", parse=str, doc="STRING column holding each row's kind.")
PARTIAL_UPDATE_REMOVE_RECORD_ON_DELETE = _pk(
    "partial-update.remove-record-on-delete", _PK + "; as in Paimon, a -D resets a key only "
    "until a compaction below the top level merges it with a later version (older non-null "
    "values then show again): compact fully before re-inserting",
    parse=parse_bool, default=False,
    doc="A -D row removes the whole row of a partial-update table. As in Paimon, the reset "
    "lasts only while the -D is merged with the older versions: a compaction below the top "
    "level that merges the -D with a later version of the key leaves one +I, and older "
    "levels' non-null values fill its nulls again (docs/primary-key-tables.md §5).")
NUM_SORTED_RUNS_COMPACTION_TRIGGER = _pk(
    "num-sorted-run.compaction-trigger", parse=int, default=5,
    doc="Sorted runs per bucket that trigger compaction.")
NUM_SORTED_RUNS_STOP_TRIGGER = _pk(
    "num-sorted-run.stop-trigger", parse=int,
    doc="Sorted runs at which writers wait (trigger + 3).")
NUM_LEVELS = _pk("num-levels", parse=int, doc="LSM levels per bucket (trigger + 1).")
COMPACTION_MAX_SIZE_AMPLIFICATION_PERCENT = _pk(
    "compaction.max-size-amplification-percent", parse=int, default=200,
    doc="Full compaction above this.")
COMPACTION_SIZE_RATIO = _pk(
    "compaction.size-ratio", parse=int, default=1, doc="Universal size ratio, percent.")
POSTPONE_DEFAULT_BUCKET_NUM = _pk(
    "postpone.default-bucket-num", "postpone-bucket tables: buckets a compaction gives a "
    "partition without real buckets (unset: postpone.target-row-num-per-bucket, then "
    "postpone.target-size-per-bucket when set, else 1 as in Paimon 1.1-2.0)",
    parse=_positive_int, doc="Buckets of a new partition of a postpone-bucket table.")
POSTPONE_TARGET_ROW_NUM_PER_BUCKET = _pk(
    "postpone.target-row-num-per-bucket", "postpone-bucket tables without "
    "postpone.default-bucket-num: a new partition gets ceil(pending rows / this) buckets",
    parse=_positive_int, doc="Pending rows per bucket of a new postpone partition.")
POSTPONE_TARGET_SIZE_PER_BUCKET = _pk(
    "postpone.target-size-per-bucket", "postpone-bucket tables without "
    "postpone.default-bucket-num or postpone.target-row-num-per-bucket: a new partition gets "
    "ceil(pending file bytes / this) buckets", parse=parse_memory_size,
    doc="Pending bytes per bucket of a new postpone partition.")
FULL_COMPACTION_DELTA_COMMITS = _honoured(
    "full-compaction.delta-commits", "primary-key tables: compaction is full after this many "
    "commits since the last full one; how often a Java writer compacts",
    parse=int, doc="Full compaction after this many commits.")
COMPACTION_TOTAL_SIZE_THRESHOLD = _pk(
    "compaction.total-size-threshold", parse=parse_memory_size,
    doc="Full compaction while a bucket is smaller than this.")
COMPACTION_INCREMENTAL_SIZE_THRESHOLD = _pk(
    "compaction.incremental-size-threshold", parse=parse_memory_size,
    doc="Full compaction once the non-top levels exceed this.")
WRITE_BUFFER_SIZE = _honoured(
    "write-buffer-size", "the primary-key writer flushes a bucket's buffer at this size; "
    "other engines' writers", parse=parse_memory_size, default=256 << 20,
    doc="Rows buffered before a level-0 flush.")
WRITE_ONLY = _honoured(
    "write-only", "writers never maintain the table: snaplake.maintenance.inline is off",
    parse=parse_bool, default=False,
    doc="Writers never compact or run maintenance (snaplake.maintenance.inline is then off).")
DELETION_VECTORS_ENABLED: ConfigOption[bool] = ConfigOption(
    key="deletion-vectors.enabled", status=OptionStatus.HONOURED,
    note="primary-key tables: lookup compaction (at each writer's commit unless write-only) "
    "marks superseded rows in per-bucket deletion vectors; reads and append-table writes "
    "refused", parse=parse_bool, default=False, accepts=_is("false"), accepted="false",
    refused_for=_READ_ONLY,
    doc="Compaction marks superseded rows in deletion vectors (readers skip level 0).")
MAINTENANCE_INLINE = _honoured(
    "snaplake.maintenance.inline", "snaplake's own: run due merge and expiry after each "
    "writer commit", parse=parse_bool, default=False,
    doc="Run due manifest merge and expiry right after each successful writer commit.")
DELETION_VECTORS_ENABLED = _honoured(
    "deletion-vectors.enabled", "deletion vectors: read (each file's vector drops its "
    "deleted rows; primary-key batch reads skip level 0); primary-key tables: written by "
    "the lookup compaction (at prepare_commit unless write-only); append tables: written by "
    "Table.delete, applied and dropped by compaction", parse=parse_bool, default=False,
    doc="Deletion vectors mark deleted rows of data files.")
DELETION_VECTOR_INDEX_FILE_TARGET_SIZE = _honoured(
    "deletion-vector.index-file.target-size", "bucket-unaware append tables: new "
    "deletion vector files roll at this size", parse=parse_memory_size, default=2 << 20,
    doc="Size at which a bucket-unaware table's deletion vector files roll.")
DELETION_VECTORS_BITMAP64 = _honoured(
    "deletion-vectors.bitmap64", "new vectors are 64-bit (Java 0.9 and pypaimon 2.1.0 read "
    "only 32-bit ones); reads take either width by its magic",
    parse=parse_bool, default=False, doc="New deletion vectors are 64-bit bitmaps.")
DELETION_VECTORS_MERGE_ON_READ = _honoured(
    "deletion-vectors.merge-on-read", "primary-key batch reads of a deletion-vector table "
    "also merge level 0", parse=parse_bool, default=False,
    doc="Batch reads of deletion-vector tables merge level 0 instead of skipping it.")

# Every option, in the README's order ------------------------------------------------------
_OPTIONS: tuple[ConfigOption[Any], ...] = (
    # table kind and layout ------------------------------------------------------------
    _refused("type", "only normal tables are stored as Paimon tables snaplake reads",
             "table", "materialized-table"),
    BUCKET,
    BUCKET_KEY,
    _engine("bucket-append-ordered", _ENGINE_STREAM + " (read order of buckets)"),
    _refused("bucket-function.type", "only the default bucket function places rows as "
             "snaplake hashes them", "default", refused_for=_WRITE),
    _dependent("data-file.external-paths", "data-file.external-paths.strategy"),
    _refused("data-file.external-paths.strategy", "new files are written under the table "
             "directory only (existing files' external paths are read)", "none",
             refused_for=_WRITE),
    _dependent("data-file.external-paths.specific-fs", "data-file.external-paths.strategy"),
    _dependent("data-file.external-paths.weights", "data-file.external-paths.strategy"),
    _layout("compaction.force-rewrite-all-files", "which files a Java full compaction picks"),
    _engine("path", "table location as a catalog resolves it; snaplake's catalog resolves "
            "<warehouse>/<db>.db/<table>"),
    _refused("branch", "branches (branch/branch-<name>/) are not supported", "main"),
    _refused("chain-table.enabled", "chain tables are not supported", "false"),
    _refused("scan.fallback-snapshot-branch", "chain-table reads from other branches",
             refused_for=_READ_ONLY),
    _refused("scan.fallback-delta-branch", "chain-table reads from other branches",
             refused_for=_READ_ONLY),
    _dependent("chain-table.chain-partition-keys", "chain-table.enabled"),
    _dependent("chain-table.streaming.merge-snapshot", "chain-table.enabled"),
    _dependent("chain-table.split.key-range-enabled", "chain-table.enabled"),
    # data files -----------------------------------------------------------------------
    FILE_FORMAT,
    FILE_COMPRESSION_PER_LEVEL,
    FILE_FORMAT_PER_LEVEL,
    FILE_COMPRESSION,
    FILE_COMPRESSION_ZSTD_LEVEL,
    DATA_FILE_PREFIX,
    _refused("data-file.path-directory", "data files below a sub-directory of the table "
             "are not supported"),
    CHANGELOG_FILE_PREFIX,
    CHANGELOG_FILE_FORMAT,
    CHANGELOG_FILE_COMPRESSION,
    CHANGELOG_FILE_STATS_MODE,
    FILE_SUFFIX_INCLUDE_COMPRESSION,
    _layout("file.block-size", "Parquet row group / ORC stripe size"),
    _layout("file-index.in-manifest-threshold", "where file indexes are kept; snaplake "
            "writes none (file-index.<type>.columns: layout, readers only lose pruning)"),
    _engine("file-index.read.enabled", "whether a reader uses file indexes; snaplake "
            "prunes with value stats only"),
    *(_dependent(k, "a VARIANT column (snaplake refuses VARIANT)") for k in (
        "variant.shreddingSchema", "variant.inferShreddingSchema",
        "variant.shredding.inferenceMode", "variant.shredding.maxSchemaWidth",
        "variant.shredding.maxSchemaDepth", "variant.shredding.minFieldCardinalityRatio",
        "variant.shredding.maxInferBufferRow", "variant.shredding.adaptive.maxInferBufferRow",
        "variant.shredding.adaptive.retentionRatio")),
    # manifests --------------------------------------------------------------------------
    MANIFEST_FORMAT,
    MANIFEST_COMPRESSION,
    MANIFEST_TARGET_FILE_SIZE,
    MANIFEST_FULL_COMPACTION_SIZE,
    MANIFEST_MERGE_MIN_COUNT,
    _layout("manifest-sort.enabled", "order of entries inside manifests"),
    _layout("manifest-sort.partition-field", "order of entries inside manifests"),
    _layout("manifest-sort.max-rewrite-size", "order of entries inside manifests"),
    _layout("manifest.merge-optimize.enabled", "how Java's merger rewrites manifests"),
    PARTITION_DEFAULT_NAME,
    PARTITION_LEGACY_NAME,
    # snapshots, changelog, expiry ----------------------------------------------------------
    SNAPSHOT_NUM_RETAINED_MIN,
    SNAPSHOT_NUM_RETAINED_MAX,
    SNAPSHOT_TIME_RETAINED,
    CHANGELOG_NUM_RETAINED_MIN,
    CHANGELOG_NUM_RETAINED_MAX,
    CHANGELOG_TIME_RETAINED,
    _engine("snapshot.expire.execution-mode", "whether Java expires synchronously"),
    SNAPSHOT_EXPIRE_LIMIT,
    _layout("snapshot.clean-empty-directories", "empty partition directories left by expiry"),
    _engine("continuous.discovery-interval", _ENGINE_STREAM),
    _engine("scan.max-splits-per-task", _ENGINE_STREAM),
    _pk("scan.bucket", feature="a read of a single bucket (snaplake reads every bucket)",
        accepts=_unset, accepted="unset", refused_for=frozenset({READ})),
    # primary-key tables ----------------------------------------------------------------
    MERGE_ENGINE,
    IGNORE_DELETE,
    IGNORE_UPDATE_BEFORE,
    _pk("sort-engine"),
    _engine("sort-spill-threshold", "memory and spilling of another engine's writers"),
    _engine("sort-spill-buffer-size", "memory and spilling of another engine's writers"),
    _engine("spill-compression", "memory and spilling of another engine's writers"),
    _engine("spill-compression.zstd-level", "memory and spilling of another engine's writers"),
    WRITE_ONLY,
    _engine("source.split.target-size", "split sizing of another engine's readers"),
    _engine("source.split.open-file-cost", "split sizing of another engine's readers"),
    WRITE_BUFFER_SIZE,
    _engine("write-buffer-spill.max-disk-size", "memory of another engine's writers"),
    _engine("write-buffer-spillable", "memory of another engine's writers"),
    _engine("write-buffer-for-append", "memory of another engine's writers"),
    _engine("write-max-writers-to-spill", "memory of another engine's writers"),
    _engine("local-sort.max-num-file-handles", "external sort of another engine"),
    _engine("page-size", "memory pages of another engine"),
    _engine("cache-page-size", "memory pages of another engine"),
    TARGET_FILE_SIZE,
    _layout("target-file-row-num", "rows per data file (files roll by size in snaplake)"),
    COMPACTION_SMALL_FILE_RATIO,
    *(_dependent(k, "a BLOB column (blob-field)") for k in (
        "blob.target-file-size", "blob.split-by-file-size", "blob.copy-buffer-size")),
    NUM_SORTED_RUNS_COMPACTION_TRIGGER,
    NUM_SORTED_RUNS_STOP_TRIGGER,
    NUM_LEVELS,
    _layout("commit.force-compact", "whether a Java writer compacts before committing"),
    _pk("write.sequence-number-init-mode", feature="sequence numbers from snapshot properties",
        accepts=_is("scan"), accepted="scan", refused_for=_PK_WRITE),
    COMMIT_TIMEOUT,
    COMMIT_MAX_RETRIES,
    COMMIT_MIN_RETRY_WAIT,
    COMMIT_MAX_RETRY_WAIT,
    COMPACTION_MAX_SIZE_AMPLIFICATION_PERCENT,
    _pk("compaction.force-up-level-0", feature="forced level-0 compaction", accepts=_not_true,
        accepted="false", refused_for=_PK_WRITE),
    COMPACTION_SIZE_RATIO,
    *(_pk(k) for k in (
        "compaction.offpeak.start.hour", "compaction.offpeak.end.hour",
        "compaction.offpeak-ratio")),
    _pk("compaction.optimization-interval", feature="time-based full compaction",
        accepts=_unset, accepted="unset", refused_for=_PK_WRITE),
    COMPACTION_TOTAL_SIZE_THRESHOLD,
    COMPACTION_INCREMENTAL_SIZE_THRESHOLD,
    COMPACTION_MIN_FILE_NUM,
    _layout("compaction.file-num-limit", "files one Java compaction plans at most"),
    _layout("compaction.delete-ratio-threshold", "when another engine compacts files with "
            "deleted rows (snaplake picks files by size)"),
    CHANGELOG_PRODUCER,
    CHANGELOG_PRODUCER_ROW_DEDUPLICATE,
    CHANGELOG_PRODUCER_ROW_DEDUPLICATE_IGNORE_FIELDS,
    *(_pk(k) for k in ("table-read.sequence-number.enabled", "key-value.sequence_number.enabled")),
    SEQUENCE_FIELD,
    SEQUENCE_FIELD_SORT_ORDER,
    _pk("sequence.snapshot-ordering", feature="merge ordered by commit snapshot id",
        accepts=_not_true, accepted="false", refused_for=_PK_ALL),
    _pk("aggregation.remove-record-on-delete", feature="aggregation removing rows on delete",
        accepts=_not_true, accepted="false", refused_for=_PK_ALL),
    PARTIAL_UPDATE_REMOVE_RECORD_ON_DELETE,
    _pk("partial-update.remove-record-on-sequence-group", feature="sequence groups",
        accepts=_unset, accepted="unset", refused_for=_PK_ALL),
    ROWKIND_FIELD,
    # reads that select other rows -------------------------------------------------------
    _honoured("scan.mode", "the snapshot or changes a batch read returns (table option or "
              "read-time options=); Paimon's batch meaning of each value", *_SCAN_MODES,
              refused_for=_READ_ONLY, parse=_lower, default="default",
              doc="Batch read start: default, latest-full, full, latest, latest-delta, "
              "compacted-full, from-timestamp, from-file-creation-time, "
              "from-creation-timestamp, from-snapshot, from-snapshot-full, incremental."),
    _honoured("scan.snapshot-id", "a batch read of this snapshot (from-snapshot)", parse=int),
    _honoured("scan.timestamp-millis", "a batch read of the newest snapshot at or before "
              "this epoch-millisecond time (from-timestamp)", parse=int),
    _honoured("scan.tag-name", "a batch read of this tag's snapshot (from-snapshot)"),
    _honoured("scan.file-creation-time-millis", "a batch read of the latest snapshot's files "
              "created at or after this epoch-millisecond time (from-file-creation-time)",
              parse=int),
    _honoured("scan.creation-time-millis", "a batch read from this epoch-millisecond time "
              "(from-creation-timestamp): the first snapshot committed at or after it, or "
              "the latest snapshot's files created since", parse=int),
    _honoured("scan.timestamp", "a batch read of the newest snapshot at or before this "
              "local date-time 'yyyy-MM-dd HH:mm:ss' (from-timestamp)"),
    *(_refused(k, "a batch read of another snapshot; pass snapshot_id/as_of/tag to "
               "snaplake instead", refused_for=_READ_ONLY) for k in (
        "scan.watermark", "scan.version")),
    _engine("scan.bounded.watermark", _ENGINE_STREAM),
    _engine("scan.manifest.parallelism", "planning threads of another engine"),
    _dependent("format-table.scan.list-parallelism", "type = format-table"),
    _engine("streaming.read.snapshot.delay", _ENGINE_STREAM),
    _refused("scan.ignore-corrupt-files", "readers that skip corrupt files return fewer rows; "
             "snaplake raises instead", "false", refused_for=_READ_ONLY),
    _refused("scan.ignore-lost-files", "readers that skip lost files return fewer rows; "
             "snaplake raises instead", "false", refused_for=_READ_ONLY),
    _engine("auto-create", "whether another engine's catalog creates missing storage"),
    _engine("streaming-read-overwrite", _ENGINE_STREAM),
    _engine("streaming-read-append-overwrite", _ENGINE_STREAM),
    DYNAMIC_PARTITION_OVERWRITE,
    # partition expiry and marking ---------------------------------------------------------
    PARTITION_EXPIRATION_TIME,
    PARTITION_EXPIRATION_STRATEGY,
    PARTITION_EXPIRATION_CHECK_INTERVAL,
    PARTITION_EXPIRATION_MAX_NUM,
    PARTITION_EXPIRATION_BATCH_SIZE,
    _layout("compaction.skip-expired-partitions", "whether another engine's compaction "
            "skips partitions about to expire"),
    PARTITION_TIMESTAMP_FORMATTER,
    PARTITION_TIMESTAMP_PATTERN,
    _refused("partition.timestamp-format.strict", "a strict partition-time check snaplake "
             "does not implement; only the default is accepted",
             "false", refused_for=_NOT_READ),
    _engine("end-input.check-partition-expire", "a Flink/Spark batch job's expiry at its end"),
    _engine("partition.end-input-to-done", "done-markers of Flink/Spark sinks"),
    _engine("scan.plan-sort-partition", "split order of another engine's reads"),
    _honoured("primary-key", "create_table moves it into the schema's primary keys, as "
              "Paimon does"),
    PRIMARY_KEY_NULLABLE,
    _honoured("partition", "create_table moves it into the schema's partition keys"),
    *(_engine(k, _LOOKUP) for k in (
        "lookup.hash-load-factor", "lookup.cache-rows", "lookup.continuous.discovery-interval",
        "lookup.cache-file-retention", "lookup.cache-max-disk-size",
        "lookup.cache-spill-compression", "lookup.cache-max-memory-size",
        "lookup.blob-as-descriptor", "lookup.cache.high-priority-pool-ratio",
        "lookup.cache.bloom.filter.enabled", "lookup.cache.bloom.filter.fpp",
        "lookup.remote-file.enabled", "lookup.remote-file.level-threshold")),
    _engine("read.batch-size", "batch sizes of another engine's readers"),
    _layout("write.batch-size", "batch sizes of another engine's writers"),
    _layout("write.batch-memory", "batch sizes of another engine's writers"),
    _engine("consumer-id", "the id a streaming reader records its progress under (snaplake "
            "honours every consumer file in expiry)"),
    FULL_COMPACTION_DELTA_COMMITS,
    _engine("stream-scan-mode", "internal to Paimon's system tables"),
    _engine("batch-scan-mode", "internal to Paimon's system tables"),
    CONSUMER_EXPIRATION_TIME,
    _engine("consumer.mode", _ENGINE_STREAM),
    _engine("consumer.ignore-progress", _ENGINE_STREAM),
    CONSUMER_CHANGELOG_ONLY,
    DYNAMIC_BUCKET_TARGET_ROW_NUM,
    DYNAMIC_BUCKET_INITIAL_BUCKETS,
    DYNAMIC_BUCKET_MAX_BUCKETS,
    _engine("dynamic-bucket.assigner-parallelism", "parallelism of another engine's "
            "dynamic-bucket assigners (snaplake runs one assigner per partition writer)"),
    _honoured("incremental-between", "a batch read of the changes of snapshots (a, b] "
              "(Table.changes(a + 1, b)), or of two tags: the diff of their snapshots"),
    _honoured("incremental-between-timestamp", "a batch read of the changes committed in "
              "(t1, t2] (epoch milliseconds)"),
    _refused("incremental-to-auto-tag", "a batch read of the changes up to an automatic tag",
             refused_for=_READ_ONLY),
    _honoured("incremental-between-scan-mode", "which changes incremental-between reads",
              "auto", "delta", "changelog", "diff", refused_for=_READ_ONLY, parse=_lower,
              default="auto"),
    _honoured("incremental-between-tag-to-snapshot", "incremental-between of two tags reads "
              "the changes of the snapshots between them (true) instead of their diff",
              "true", "false", refused_for=_READ_ONLY, parse=parse_bool, default=False),
    # statistics -----------------------------------------------------------------------
    METADATA_STATS_MODE,
    METADATA_STATS_MODE_PER_LEVEL,
    _layout("metadata.stats-dense-store", "how columns without stats are stored in manifests"),
    _layout("metadata.stats-keep-first-n-columns", "stats of the first N columns only "
            "(snaplake keeps them for every column)"),
    # callbacks and catalog integration ------------------------------------------------------
    _refused("metadata.iceberg.storage", _ICEBERG, "disabled", refused_for=_NOT_READ),
    _engine("commit.callbacks", "Java classes another engine calls after its commits"),
    _engine("commit.callback.#.param", "Java classes another engine calls after its commits"),
    _engine("tag.callbacks", "Java classes another engine calls after creating tags"),
    _engine("tag.callback.#.param", "Java classes another engine calls after creating tags"),
    *(_engine(k, "done-markers of Flink/Spark sinks") for k in (
        "partition.mark-done-action", "partition.mark-done-action.custom.class",
        "partition.mark-done-action.http.url", "partition.mark-done-action.http.params")),
    _engine("partition.sink-strategy", "shuffling in Flink/Spark sinks"),
    _engine("metastore.partitioned-table", "Hive metastore registration"),
    _engine("metastore.tag-to-partition", "Hive metastore registration"),
    _engine("metastore.tag-to-partition.preview", "Hive metastore registration"),
    # tags -----------------------------------------------------------------------------
    TAG_AUTOMATIC_CREATION,
    _refused("tag.create-success-file", "Paimon writes a _SUCCESS file beside each automatic "
             "tag; snaplake does not", "false", refused_for=_MAINT),
    TAG_CREATION_PERIOD,
    TAG_CREATION_DELAY,
    TAG_PERIOD_FORMATTER,
    TAG_CREATION_PERIOD_DURATION,
    TAG_NUM_RETAINED_MAX,
    TAG_AUTOMATIC_COMPLETION,
    TAG_BATCH_CUSTOMIZED_NAME,
    TAG_DEFAULT_TIME_RETAINED,
    _engine("tag.time-expire-enabled", "tag expiry run by Paimon's committers"),
    _engine("scan.plan-auto-tag-for-read.time-retained", "temporary tags another engine's "
            "readers create to protect their own reads"),
    _engine("snapshot.watermark-idle-timeout", _ENGINE_STREAM),
    _layout("parquet.enable.dictionary", "Parquet dictionary encoding"),
    ORC_TIMESTAMP_LTZ_LEGACY_TYPE,
    MAINTENANCE_INLINE,
    SINK_WATERMARK_TIME_ZONE,
    _engine("sink.process-time-zone", _ENGINE_STREAM),
    _pk("local-merge-buffer-size"),
    CROSS_PARTITION_UPSERT_INDEX_TTL,
    CROSS_PARTITION_UPSERT_BOOTSTRAP_PARALLELISM,
    _layout("zorder.var-length-contribution", "sort compaction of another engine"),
    _engine("file-reader-async-threshold", "read-ahead of another engine"),
    _engine("commit.force-create-snapshot", "whether a streaming job publishes empty "
            "snapshots (no rows change)"),
    # deletion vectors, row tracking, data evolution ------------------------------------------
    DELETION_VECTORS_ENABLED,
    ConfigOption(key="deletion-vectors.modifiable", status=OptionStatus.DEPENDENT,
                 note="takes effect only when another engine writes deletion vectors",
                 parse=parse_bool, default=False),
    DELETION_VECTOR_INDEX_FILE_TARGET_SIZE,
    DELETION_VECTORS_MERGE_ON_READ,
    DELETION_VECTORS_BITMAP64,
    _pk("delete.force-produce-changelog"),
    _layout("sort-compaction.range-strategy", "sort compaction of another engine"),
    _layout("sort-compaction.local-sample.magnification", "sort compaction of another engine"),
    _pk("record-level.expire-time", feature="record-level expiry", accepts=_unset,
        accepted="unset", refused_for=_PK_WRITE),
    _pk("record-level.time-field"),
    _engine("commit.user-prefix", "how another engine names its commit users (snaplake's "
            "commit_user is given by the caller)"),
    _pk("force-lookup", "a writer compacts level 0 with lookup at prepare_commit (no changelog)"),
    LOOKUP_WAIT,
    _pk("changelog-producer.lookup-wait"),
    _pk("lookup-compact"),
    _pk("lookup-compact.max-interval"),
    _engine("file-operation.thread-num", "I/O threads of another engine"),
    _refused("scan.fallback-branch", "reads falling back to another branch",
             refused_for=_READ_ONLY),
    _dependent("scan.fallback-branch.read-fail-fast", "scan.fallback-branch"),
    _refused("scan.primary-branch", "reads preferring another branch", refused_for=_READ_ONLY),
    _engine("async-file-write", "I/O scheduling of another engine"),
    _layout("manifest.delete-file-drop-stats", "stats of DELETE manifest entries"),
    _pk("data-file.thin-mode", feature="thin data files (no _KEY_ columns)", accepts=_not_true,
        accepted="false", refused_for=_PK_WRITE),
    _engine("partition.idle-time-to-report-statistic", "Hive metastore statistics"),
    _refused("query-auth.enabled", "the catalog filters rows and columns by permission; "
             "snaplake reads files directly", "false"),
    *(_engine(k, "Flink materialized-table metadata") for k in (
        "materialized-table.definition-query", "materialized-table.interval-freshness",
        "materialized-table.interval-freshness.time-unit",
        "materialized-table.logical-refresh-mode", "materialized-table.refresh-mode",
        "materialized-table.refresh-status", "materialized-table.refresh-handler-description",
        "materialized-table.refresh-handler-bytes")),
    _honoured("alter-column-null-to-not-null.disabled", "alter_table's rule for making a "
              "column NOT NULL"),
    _honoured("disable-explicit-type-casting", "alter_table never casts explicitly (only "
              "lossless widening), whatever the value"),
    _honoured("add-column-before-partition", "alter_table adds columns before the first "
              "partition column"),
    _refused("commit.strict-mode.last-safe-snapshot", "a commit-time check of other users' "
             "snapshots snaplake does not make", refused_for=_COMMIT),
    *(_layout(k, "clustering (sort order) of data files") for k in (
        "clustering.columns", "clustering.strategy", "clustering.incremental",
        "clustering.history-partition.limit", "clustering.history-partition.idle-to-full-sort",
        "clustering.incremental.optimize-write", "clustering.incremental.mode")),
    _engine("local-kv-db.block-size", "local state of another engine"),
    _refused("row-tracking.enabled", "row ids are assigned at commit; snaplake does not "
             "assign them (reading works)", "false", refused_for=_NOT_READ),
    _dependent("row-tracking.partition-group-on-commit", "row-tracking.enabled"),
    _refused("data-evolution.enabled", "rows are merged from partial files by row id",
             "false"),
    *(_dependent(k, "data-evolution.enabled") for k in (
        "data-evolution.reassign.skip-contiguous-row-count",
        "data-evolution.row-id-conflict-rewrite.max-size", "data-evolution.row-sidecar.enabled",
        "data-evolution.row-sidecar.max-selected-rows",
        "data-evolution.row-sidecar.max-selection-ratio", "data-evolution.merge-into.file-pruning",
        "data-evolution.merge-into.source-persist", "data-evolution.compaction.rewrite-row-ids",
        "blob-compaction.enabled")),
    _engine("snapshot.ignore-empty-commit", "whether a job publishes empty snapshots (no rows "
            "change); snaplake publishes no empty append"),
    _dependent("index-file-in-data-file-dir", "deletion vectors or a global index"),
    *(_dependent(k, "row-tracking.enabled (global indexes)") for k in (
        "global-index.external-path", "global-index.column-update-action",
        "global-index.row-count-per-shard", "global-index.build.max-shard",
        "global-index.build.max-parallelism", "global-index.enabled", "global-index.search-mode",
        "scalar-index.search-mode", "vector-index.search-mode", "full-text-index.search-mode",
        "global-index.thread-num")),
    _engine("lookup.merge-buffer-size", _LOOKUP),
    _engine("lookup.merge-records-threshold", _LOOKUP),
    *(_dependent(k, "type = format-table") for k in (
        "format-table.implementation", "format-table.partition-path-only-value",
        "format-table.file.compression", "format-table.commit-hive-sync-url")),
    _refused("blob-field", "BLOB columns live in separate .blob files"),
    _refused("blob-descriptor-field", "BLOB columns hold descriptors of other files"),
    _refused("blob-view-field", "BLOB view columns are resolved from other tables"),
    *(_dependent(k, "a BLOB column (blob-field)") for k in (
        "blob-view.resolve.enabled", "blob-as-descriptor", "blob-write-null-on-missing-file",
        "blob-write-null-on-fetch-failure")),
    _refused("commit.discard-duplicate-files", "commits that drop files already in the "
             "table", "false", refused_for=_COMMIT),
    POSTPONE_DEFAULT_BUCKET_NUM,
    POSTPONE_TARGET_ROW_NUM_PER_BUCKET,
    POSTPONE_TARGET_SIZE_PER_BUCKET,
    _pk("postpone.batch-write-fixed-bucket", "postpone-bucket tables: snaplake's writers "
        "always write pending files into bucket-postpone (rows visible after compaction)",
        feature="batch writes into real buckets of a postpone-bucket table", accepts=_not_true,
        accepted="false / unset", refused_for=frozenset({CREATE, WRITE})),
    *(_dependent(k, "postpone.batch-write-fixed-bucket = true") for k in (
        "postpone.batch-write-fixed-bucket.max-parallelism",
        "postpone.batch-write-fixed-bucket.rescale-load-factor")),
    _pk("postpone.merge-on-read", "postpone-bucket tables: batch reads skip pending files, "
        "as Paimon's do by default", feature="merge-on-read of pending postpone files",
        accepts=_not_true, accepted="false", refused_for=frozenset({CREATE, READ})),
    _pk("overwrite-upgrade"),
    _engine("visibility-callback.enabled", "whether another engine's writer waits for "
            "compaction after committing"),
    _engine("visibility-callback.timeout", "whether another engine's writer waits for "
            "compaction after committing"),
    _engine("visibility-callback.check-interval", "whether another engine's writer waits "
            "for compaction after committing"),
    _dependent("vector.file.format", "vector-field"),
    _refused("vector-field", "VECTOR columns live in separate vector-store files"),
    _dependent("vector.target-file-size", "vector-field"),
    _engine("vector-search.distribute.enabled", "vector search of another engine"),
    _engine("vector-search.lateral-join.batch-size", "vector search of another engine"),
    *(_pk(k) for k in (
        "pk-vector.index.columns", "pk-btree.index.columns", "pk-bitmap.index.columns",
        "pk-multivalue.index.columns", "pk-full-text.index.columns")),
    _pk("pk-clustering-override", feature="clustering-ordered primary-key files",
        accepts=_not_true, accepted="false", refused_for=_PK_ALL),
)
# fmt: on

_PREFIXES: tuple[tuple[str, ConfigOption[Any]], ...] = (
    (
        "fields.",
        _pk(
            "fields.<name>.*",
            _PK + ": per-field aggregation and sequence groups; "
            "fields.<name>.stats-mode only narrows statistics (layout)",
        ),
    ),
    (
        "file-index.",
        _layout(
            "file-index.<type>.*",
            "file indexes (bloom filter, bitmap, ...); "
            "snaplake writes none, readers only lose pruning",
        ),
    ),
    ("metadata.iceberg.", _refused("metadata.iceberg.*", _ICEBERG, refused_for=_NOT_READ)),
    ("orc.", _layout("orc.*", "ORC writer settings passed to Java's ORC library")),
    ("parquet.", _layout("parquet.*", "Parquet writer settings passed to Java's Parquet library")),
    ("avro.", _layout("avro.*", "Avro writer settings passed to Java's Avro library")),
)
"""Option families matched by prefix when the key itself is not listed."""

# fmt: off
_FAMILY_MEMBERS: tuple[ConfigOption[Any], ...] = (
    _pk("fields.#.sequence-group", feature="partial-update sequence groups", accepts=_never,
        accepted="unset", refused_for=_PK_ALL),
    _pk("fields.#.distinct", feature="listagg with distinct = true", accepts=_not_true,
        accepted="false", refused_for=_PK_ALL),
    _pk("fields.#.nested-key", feature="nested_update aggregation", accepts=_never,
        accepted="unset", refused_for=_PK_ALL),
)
"""Keys of a family (``#`` = a column name) that refuse values; the README lists the family."""
# fmt: on

_BY_KEY: dict[str, ConfigOption[Any]] = {o.key: o for o in _OPTIONS if "#" not in o.key}
_PATTERNS: tuple[tuple[re.Pattern[str], ConfigOption[Any]], ...] = tuple(
    (
        re.compile(
            "".join(".+" if part == "#" else re.escape(part) for part in re.split("(#)", o.key))
        ),
        o,
    )
    for o in (*_FAMILY_MEMBERS, *(o for o in _OPTIONS if "#" in o.key))
)


def lookup_option(key: str) -> ConfigOption[Any] | None:
    """Return the declaration of option ``key`` (``None`` = not a Paimon core option).

    A listed key first, then a key with ``#`` standing for any text
    (``commit.callback.#.param``, ``fields.#.sequence-group``), then a family
    matched by prefix (``fields.``, ``orc.``).
    """
    found = _BY_KEY.get(key)
    if found is None:
        found = next((o for pattern, o in _PATTERNS if pattern.fullmatch(key)), None)
    if found is None:
        found = next((o for prefix, o in _PREFIXES if key.startswith(prefix)), None)
    return found


def iter_option_families() -> Iterator[tuple[str, ConfigOption[Any]]]:
    """Yield ``(prefix, declaration)`` of the option families matched by prefix."""
    return iter(_PREFIXES)


def iter_options() -> Iterator[ConfigOption[Any]]:
    """Yield every listed option, in the README's order, then the family members."""
    yield from _OPTIONS
    yield from _FAMILY_MEMBERS


def typed_options() -> tuple[ConfigOption[Any], ...]:
    """The options snaplake reads (those with a parser), for :class:`CoreOptions`."""
    return tuple(o for o in _OPTIONS if o.parse is not None)


def option_refusal(key: str, value: str, operation: Operation) -> str | None:
    """Return why ``key = value`` makes snaplake refuse ``operation`` on any table, or ``None``.

    Options of status ``primary-key`` are not asked here (Paimon ignores them
    on append tables): see :func:`primary_key_option_refusal`.

    Returns:
        A reason to put in the error message, or ``None`` when the operation
        may go ahead (unknown options never refuse).
    """
    option = lookup_option(key)
    if option is None or option.status is OptionStatus.PRIMARY_KEY:
        return None
    return option.refusal(value, operation)


def primary_key_option_refusal(key: str, value: str, operation: Operation) -> str | None:
    """Return why ``key = value`` makes snaplake refuse ``operation`` on a primary-key table.

    Only options of status ``primary-key`` are asked (the others:
    :func:`option_refusal`); ``None`` when the operation may go ahead.
    """
    option = lookup_option(key)
    if option is None or option.status is not OptionStatus.PRIMARY_KEY:
        return None
    return option.refusal(value, operation)


def options_markdown() -> str:
    """Return the README's option table (Markdown): every option, its status and note.

    ``README.md`` holds this text between ``<!-- options:begin -->`` and
    ``<!-- options:end -->``; a test keeps the two equal. The values a
    primary-key option refuses are in docs/primary-key-tables.md §1.
    """
    lines = [
        "| Option | Status | Refused unless | Note |",
        "|---|---|---|---|",
    ]

    def row(key: str, o: ConfigOption[Any]) -> str:
        refused = o.status is OptionStatus.REFUSED or (
            o.status is not OptionStatus.PRIMARY_KEY and o.accepted != "any"
        )
        ops = sorted(o.refused_for - {CREATE}) if refused else []
        scope = "all operations" if len(ops) == 4 else ", ".join(ops)
        when = f"{o.accepted} ({scope})" if refused else ""
        return f"| `{key}` | {o.status.value} | {when} | {o.note} |"

    lines += [row(o.key, o) for o in _OPTIONS]
    lines += [row(prefix + "*", o) for prefix, o in _PREFIXES]
    return "\n".join(lines) + "\n"
