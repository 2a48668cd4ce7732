"""Every Paimon table option and what snaplake does with it: honoured, refused or engine-specific.

Principle: an option that changes what a Paimon engine writes, reads, keeps
or deletes is either honoured by snaplake or refused, for the operations it
affects, before anything is read or written. The statuses:

* ``honoured``: snaplake implements it (see the note; a test proves each);
* ``refused``: any value other than the accepted ones (usually Paimon's
  default) is refused for the listed operations with
  :class:`~snaplake.errors.UnsupportedTableError`;
* ``primary-key``: matters only to primary-key tables (Paimon ignores it on
  append tables); on a primary-key table it is honoured, or refused for the
  operations it affects by ``TableSchema.check_primary_key_table``
  (``snaplake/store/format/primary_key.py``; docs/primary-key-tables.md §1);
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

Source: Paimon ``CoreOptions`` (keys, defaults, meaning), read at apache/paimon
``5dacde5`` (2026-08).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import StrEnum

__all__ = [
    "ALL_OPERATIONS",
    "OptionStatus",
    "OptionSupport",
    "iter_option_families",
    "iter_option_support",
    "option_refusal",
    "option_support",
]


class OptionStatus(StrEnum):
    """How snaplake treats one option (see the module docstring)."""

    HONOURED = "honoured"
    REFUSED = "refused"
    PRIMARY_KEY = "primary-key"
    DEPENDENT = "dependent"
    LAYOUT = "layout"
    ENGINE = "engine-specific"


ALL_OPERATIONS = frozenset({"create", "read", "write", "commit", "maintenance"})
"""The operation names of :class:`snaplake.store.support.Operation`."""

_CHANGES = frozenset({"create", "write", "commit", "maintenance"})


def _any(_value: str) -> bool:
    return True


@dataclass(frozen=True, slots=True, kw_only=True)
class OptionSupport:
    """snaplake's treatment of one Paimon option.

    Attributes:
        key: The option key.
        status: See :class:`OptionStatus`.
        note: One line: what snaplake does, or why it refuses.
        accepts: The values that are fine; any other value is refused for
            ``refused_for`` (``honoured`` options may also refuse some values,
            e.g. ``file.format = lance``).
        accepted: Human-readable form of ``accepts`` for the README.
        refused_for: Operations refused when the value is not accepted.
    """

    key: str
    status: OptionStatus
    note: str
    accepts: Callable[[str], bool] = _any
    accepted: str = "any"
    refused_for: frozenset[str] = ALL_OPERATIONS


def _is(*values: str) -> Callable[[str], bool]:
    allowed = frozenset(v.lower() for v in values)
    return lambda value: value.strip().lower() in allowed


def _honoured(
    key: str, note: str, *values: str, refused_for: frozenset[str] = ALL_OPERATIONS
) -> OptionSupport:
    if values:
        return OptionSupport(
            key=key,
            status=OptionStatus.HONOURED,
            note=note,
            accepts=_is(*values),
            accepted=" / ".join(values),
            refused_for=refused_for | {"create"},
        )
    return OptionSupport(key=key, status=OptionStatus.HONOURED, note=note)


def _refused(
    key: str, note: str, *values: str, refused_for: frozenset[str] = ALL_OPERATIONS
) -> OptionSupport:
    return OptionSupport(
        key=key,
        status=OptionStatus.REFUSED,
        note=note,
        accepts=_is(*values) if values else (lambda v: not v.strip()),
        accepted=" / ".join(values) if values else "unset",
        refused_for=refused_for | {"create"},
    )


def _pk(key: str, note: str = "primary-key tables only") -> OptionSupport:
    return OptionSupport(key=key, status=OptionStatus.PRIMARY_KEY, note=note)


def _engine(key: str, note: str) -> OptionSupport:
    return OptionSupport(key=key, status=OptionStatus.ENGINE, note=note)


_READ = frozenset({"read"})
_WRITE = frozenset({"write", "maintenance"})
_COMMIT = frozenset({"commit"})
_MAINT = frozenset({"maintenance"})
_NOT_READ = frozenset({"write", "commit", "maintenance"})


def _layout(key: str, note: str) -> OptionSupport:
    return OptionSupport(key=key, status=OptionStatus.LAYOUT, note=note)


def _dependent(key: str, on: str) -> OptionSupport:
    return OptionSupport(
        key=key,
        status=OptionStatus.DEPENDENT,
        note=f"takes effect only with {on}, which snaplake refuses",
    )


def _bucket(value: str) -> bool:
    text = value.strip()
    return text.lstrip("-").isdigit() and (int(text) == -1 or int(text) > 0)


def _stats_mode(value: str) -> bool:
    mode = value.strip().lower()
    return mode in ("none", "counts", "full") or bool(_TRUNCATE.fullmatch(mode))


_TRUNCATE = re.compile(r"truncate\(\d*[1-9]\d*\)")
_ENGINE_STREAM = "streaming source/sink behaviour of Flink or Spark jobs"
_LOOKUP = "lookup joins and lookup caches of another engine"
_PK = "primary-key tables only (see docs/primary-key-tables.md)"

# fmt: off
_OPTIONS: tuple[OptionSupport, ...] = (
    # table kind and layout ------------------------------------------------------------
    _refused("type", "only normal tables are stored as Paimon tables snaplake reads",
             "table", "materialized-table"),
    OptionSupport(key="bucket", status=OptionStatus.HONOURED,
                  note="-1 = bucket-unaware; N > 0 = fixed buckets hashed like Java; other "
                  "modes (dynamic, postpone) are primary-key modes",
                  accepts=_bucket, accepted="-1 or N > 0", refused_for=ALL_OPERATIONS),
    _honoured("bucket-key", "columns hashed for fixed buckets (none: every row in one bucket, "
              "the empty row's hash, as pypaimon and Java's bucket function place them)"),
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
             refused_for=_READ),
    _refused("scan.fallback-delta-branch", "chain-table reads from other branches",
             refused_for=_READ),
    _dependent("chain-table.chain-partition-keys", "chain-table.enabled"),
    _dependent("chain-table.streaming.merge-snapshot", "chain-table.enabled"),
    _dependent("chain-table.split.key-range-enabled", "chain-table.enabled"),
    # data files -----------------------------------------------------------------------
    _honoured("file.format", "format of new data files; files are read by their "
              "extension, so tables whose format changed read whole",
              "parquet", "orc", "avro", refused_for=_CHANGES),
    _pk("file.compression.per.level", _PK + ": codec of primary-key files per level (Java's "
        "append writers ignore it)"),
    _pk("file.format.per.level", _PK + ": only parquet (primary-key files are Parquet); "
        "Java's append writers ignore it"),
    _honoured("file.compression", "codec of new data files, per format (refused when the "
              "format lacks it)"),
    _honoured("file.compression.zstd-level", "zstd level of Parquet and Avro files; ORC "
              "files only at level 1 (pyarrow's ORC writer has no level setting)"),
    _honoured("data-file.prefix", "file name prefix of new data files"),
    _refused("data-file.path-directory", "data files below a sub-directory of the table "
             "are not supported"),
    _pk("changelog-file.prefix", _PK + ": name prefix of changelog files"),
    _pk("changelog-file.format", _PK + ": only parquet"),
    _pk("changelog-file.compression", _PK + ": codec of changelog files"),
    _pk("changelog-file.stats-mode", _PK + ": value stats of changelog files"),
    _honoured("file.suffix.include.compression", "new files named "
              "<prefix><uuid>-<n>.<compression>.<format> (zst, snappy, gz, ...)"),
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
    _honoured("manifest.compression", "Avro codec of new manifests and manifest lists; any "
              "codec is read; lz4 is never written (Java's Avro has no lz4 codec and "
              "pypaimon refuses it)",
              "zstd", "zstandard", "snappy", "deflate", "bzip2", "xz", "null", "none",
              "uncompressed", refused_for=_CHANGES),
    _honoured("manifest.target-file-size", "size of merged manifests"),
    _honoured("manifest.full-compaction-threshold-size", "full manifest compaction trigger"),
    _honoured("manifest.merge-min-count", "minor manifest merge trigger"),
    _layout("manifest-sort.enabled", "order of entries inside manifests"),
    _layout("manifest-sort.partition-field", "order of entries inside manifests"),
    _layout("manifest-sort.max-rewrite-size", "order of entries inside manifests"),
    _layout("manifest.merge-optimize.enabled", "how Java's merger rewrites manifests"),
    _honoured("partition.default-name", "directory name of null/empty partition values"),
    _honoured("partition.legacy-name", "spelling of partition values in paths"),
    # snapshots, changelog, expiry ----------------------------------------------------------
    _honoured("snapshot.num-retained.min", "snapshot expiry"),
    _honoured("snapshot.num-retained.max", "snapshot expiry"),
    _honoured("snapshot.time-retained", "snapshot expiry"),
    *(_honoured(k, "changelog files expire with their snapshots; a value retaining "
                "changelog longer than snapshots (decoupled changelog) is refused by expiry")
      for k in ("changelog.num-retained.min", "changelog.num-retained.max",
                "changelog.time-retained")),
    _engine("snapshot.expire.execution-mode", "whether Java expires synchronously"),
    _honoured("snapshot.expire.limit", "snapshots expired per run"),
    _layout("snapshot.clean-empty-directories", "empty partition directories left by expiry"),
    _engine("continuous.discovery-interval", _ENGINE_STREAM),
    _engine("scan.max-splits-per-task", _ENGINE_STREAM),
    _pk("scan.bucket", _PK),
    # primary-key tables ----------------------------------------------------------------
    _pk("merge-engine", _PK),
    _pk("ignore-delete", _PK),
    _pk("ignore-update-before", _PK),
    _pk("sort-engine", _PK),
    _engine("sort-spill-threshold", "memory and spilling of another engine's writers"),
    _engine("sort-spill-buffer-size", "memory and spilling of another engine's writers"),
    _engine("spill-compression", "memory and spilling of another engine's writers"),
    _engine("spill-compression.zstd-level", "memory and spilling of another engine's writers"),
    _honoured("write-only", "writers never maintain the table: snaplake.maintenance.inline "
              "is off"),
    _engine("source.split.target-size", "split sizing of another engine's readers"),
    _engine("source.split.open-file-cost", "split sizing of another engine's readers"),
    _honoured("write-buffer-size", "the primary-key writer flushes a bucket's buffer at this "
              "size; other engines' writers"),
    _engine("write-buffer-spill.max-disk-size", "memory of another engine's writers"),
    _engine("write-buffer-spillable", "memory of another engine's writers"),
    _engine("write-buffer-for-append", "memory of another engine's writers"),
    _engine("write-max-writers-to-spill", "memory of another engine's writers"),
    _engine("local-sort.max-num-file-handles", "external sort of another engine"),
    _engine("page-size", "memory pages of another engine"),
    _engine("cache-page-size", "memory pages of another engine"),
    _honoured("target-file-size", "data files roll, and compaction aims, at this size"),
    _layout("target-file-row-num", "rows per data file (files roll by size in snaplake)"),
    _honoured("compaction.small-file-ratio", "small-file compaction: which files are small"),
    *(_dependent(k, "a BLOB column (blob-field)") for k in (
        "blob.target-file-size", "blob.split-by-file-size", "blob.copy-buffer-size")),
    _pk("num-sorted-run.compaction-trigger", _PK),
    _pk("num-sorted-run.stop-trigger", _PK),
    _pk("num-levels", _PK),
    _layout("commit.force-compact", "whether a Java writer compacts before committing"),
    _pk("write.sequence-number-init-mode", _PK),
    _honoured("commit.timeout", "commit retry budget"),
    _honoured("commit.max-retries", "commit retry budget"),
    _honoured("commit.min-retry-wait", "commit backoff"),
    _honoured("commit.max-retry-wait", "commit backoff"),
    *(_pk(k, _PK) for k in (
        "compaction.max-size-amplification-percent", "compaction.force-up-level-0",
        "compaction.size-ratio", "compaction.offpeak.start.hour", "compaction.offpeak.end.hour",
        "compaction.offpeak-ratio", "compaction.optimization-interval",
        "compaction.total-size-threshold", "compaction.incremental-size-threshold")),
    _honoured("compaction.min.file-num", "small-file compaction trigger"),
    _layout("compaction.file-num-limit", "files one Java compaction plans at most"),
    _dependent("compaction.delete-ratio-threshold", "deletion-vectors.enabled"),
    *(_pk(k, _PK) for k in (
        "changelog-producer", "changelog-producer.row-deduplicate",
        "changelog-producer.row-deduplicate-ignore-fields", "table-read.sequence-number.enabled",
        "key-value.sequence_number.enabled", "sequence.field", "sequence.field.sort-order",
        "sequence.snapshot-ordering", "aggregation.remove-record-on-delete")),
    _pk("partial-update.remove-record-on-delete", _PK + "; as in Paimon, a -D resets a "
        "key only until a compaction below the top level merges it with a later version "
        "(older non-null values then show again): compact fully before re-inserting"),
    *(_pk(k, _PK) for k in ("partial-update.remove-record-on-sequence-group", "rowkind.field")),
    # reads that select other rows -------------------------------------------------------
    _refused("scan.mode", "a batch read of another snapshot or of changes; snaplake reads "
             "the snapshot the caller names", "default", "latest-full", "full", "latest",
             refused_for=_READ),
    *(_refused(k, "a batch read of another snapshot or of only some files; pass "
               "snapshot_id/as_of/tag to snaplake instead", refused_for=_READ) for k in (
        "scan.timestamp", "scan.timestamp-millis", "scan.watermark",
        "scan.file-creation-time-millis", "scan.creation-time-millis", "scan.snapshot-id",
        "scan.tag-name", "scan.version")),
    _engine("scan.bounded.watermark", _ENGINE_STREAM),
    _engine("scan.manifest.parallelism", "planning threads of another engine"),
    _dependent("format-table.scan.list-parallelism", "type = format-table"),
    _engine("streaming.read.snapshot.delay", _ENGINE_STREAM),
    _refused("scan.ignore-corrupt-files", "readers that skip corrupt files return fewer rows; "
             "snaplake raises instead", "false", refused_for=_READ),
    _refused("scan.ignore-lost-files", "readers that skip lost files return fewer rows; "
             "snaplake raises instead", "false", refused_for=_READ),
    _engine("auto-create", "whether another engine's catalog creates missing storage"),
    _engine("streaming-read-overwrite", _ENGINE_STREAM),
    _engine("streaming-read-append-overwrite", _ENGINE_STREAM),
    _honoured("dynamic-partition-overwrite", "overwrite=True replaces only the partitions "
              "written (true) or the whole table (false)"),
    # partition expiry and marking ---------------------------------------------------------
    _refused("partition.expiration-time", "Paimon's writers drop expired partitions at "
             "commit; snaplake does not expire partitions", refused_for=_NOT_READ),
    *(_dependent(k, "partition.expiration-time") for k in (
        "partition.expiration-strategy", "partition.expiration-check-interval",
        "partition.expiration-max-num", "partition.expiration-batch-size",
        "compaction.skip-expired-partitions", "partition.timestamp-formatter",
        "partition.timestamp-pattern", "partition.timestamp-format.strict",
        "end-input.check-partition-expire")),
    _engine("partition.end-input-to-done", "done-markers of Flink/Spark sinks"),
    _engine("scan.plan-sort-partition", "split order of another engine's reads"),
    _honoured("primary-key", "create_table moves it into the schema's primary keys, as "
              "Paimon does"),
    _pk("primary-key.nullable", _PK),
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
    _honoured("full-compaction.delta-commits", "primary-key tables: compaction is full after "
              "this many commits since the last full one; how often a Java writer compacts"),
    _engine("stream-scan-mode", "internal to Paimon's system tables"),
    _engine("batch-scan-mode", "internal to Paimon's system tables"),
    _honoured("consumer.expiration-time", "expiry ignores and removes consumers idle longer"),
    _engine("consumer.mode", _ENGINE_STREAM),
    _engine("consumer.ignore-progress", _ENGINE_STREAM),
    _honoured("consumer.changelog-only", "consumers never keep snapshots from expiring"),
    *(_pk(k, _PK) for k in (
        "dynamic-bucket.target-row-num", "dynamic-bucket.initial-buckets",
        "dynamic-bucket.max-buckets", "dynamic-bucket.assigner-parallelism")),
    *(_refused(k, "a batch read of the changes between two snapshots instead of the table",
               refused_for=_READ) for k in (
        "incremental-between", "incremental-between-timestamp", "incremental-to-auto-tag")),
    _dependent("incremental-between-scan-mode", "incremental-between"),
    _dependent("incremental-between-tag-to-snapshot", "incremental-between"),
    # statistics -----------------------------------------------------------------------
    OptionSupport(
        key="metadata.stats-mode", status=OptionStatus.HONOURED,
        note="value stats of new data files", accepts=_stats_mode,
        accepted="none / counts / truncate(N) / full", refused_for=_CHANGES | {"create"}),
    _pk("metadata.stats-mode.per.level", _PK + ": value stats of primary-key files per "
        "level (Java's append writers ignore it)"),
    _layout("metadata.stats-dense-store", "how columns without stats are stored in manifests"),
    _layout("metadata.stats-keep-first-n-columns", "stats of the first N columns only "
            "(snaplake keeps them for every column)"),
    # callbacks and catalog integration ------------------------------------------------------
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
    _refused("tag.automatic-creation", "Paimon's writers create (and expire) tags at commit; "
             "snaplake does not", "none", refused_for=_NOT_READ),
    *(_dependent(k, "tag.automatic-creation") for k in (
        "tag.create-success-file", "tag.creation-period", "tag.creation-delay",
        "tag.period-formatter", "tag.creation-period-duration", "tag.num-retained-max",
        "tag.automatic-completion", "tag.batch.customized-name")),
    _refused("tag.default-time-retained", "tags with a retention time expire; snaplake "
             "neither writes nor expires retention times", refused_for=_MAINT),
    _engine("tag.time-expire-enabled", "tag expiry run by Paimon's committers"),
    _engine("scan.plan-auto-tag-for-read.time-retained", "temporary tags another engine's "
            "readers create to protect their own reads"),
    _engine("snapshot.watermark-idle-timeout", _ENGINE_STREAM),
    _layout("parquet.enable.dictionary", "Parquet dictionary encoding"),
    _honoured("orc.timestamp-ltz.legacy.type", "ORC: TIMESTAMP_LTZ as a plain timestamp of "
              "UTC (true, Java's default) or a timestamp instant", "true", "false",
              refused_for=_CHANGES),
    _honoured("snaplake.maintenance.inline", "snaplake's own: run due merge and expiry after "
              "each writer commit"),
    _engine("sink.watermark-time-zone", _ENGINE_STREAM),
    _engine("sink.process-time-zone", _ENGINE_STREAM),
    _pk("local-merge-buffer-size", _PK),
    _pk("cross-partition-upsert.index-ttl", _PK),
    _pk("cross-partition-upsert.bootstrap-parallelism", _PK),
    _layout("zorder.var-length-contribution", "sort compaction of another engine"),
    _engine("file-reader-async-threshold", "read-ahead of another engine"),
    _engine("commit.force-create-snapshot", "whether a streaming job publishes empty "
            "snapshots (no rows change)"),
    # deletion vectors, row tracking, data evolution ------------------------------------------
    _refused("deletion-vectors.enabled", "deletion vectors hide deleted rows; snaplake would "
             "read them", "false"),
    *(_dependent(k, "deletion-vectors.enabled") for k in (
        "deletion-vectors.modifiable", "deletion-vector.index-file.target-size",
        "deletion-vectors.merge-on-read", "deletion-vectors.bitmap64")),
    _pk("delete.force-produce-changelog", _PK),
    _layout("sort-compaction.range-strategy", "sort compaction of another engine"),
    _layout("sort-compaction.local-sample.magnification", "sort compaction of another engine"),
    _pk("record-level.expire-time", _PK),
    _pk("record-level.time-field", _PK),
    _engine("commit.user-prefix", "how another engine names its commit users (snaplake's "
            "commit_user is given by the caller)"),
    _pk("force-lookup", _PK),
    _pk("lookup-wait", _PK),
    _pk("lookup-compact", _PK),
    _pk("lookup-compact.max-interval", _PK),
    _engine("file-operation.thread-num", "I/O threads of another engine"),
    _refused("scan.fallback-branch", "reads falling back to another branch",
             refused_for=_READ),
    _dependent("scan.fallback-branch.read-fail-fast", "scan.fallback-branch"),
    _refused("scan.primary-branch", "reads preferring another branch", refused_for=_READ),
    _engine("async-file-write", "I/O scheduling of another engine"),
    _layout("manifest.delete-file-drop-stats", "stats of DELETE manifest entries"),
    _pk("data-file.thin-mode", _PK),
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
    *(_pk(k, _PK) for k in (
        "postpone.batch-write-fixed-bucket", "postpone.merge-on-read",
        "postpone.batch-write-fixed-bucket.max-parallelism",
        "postpone.batch-write-fixed-bucket.rescale-load-factor", "postpone.default-bucket-num",
        "postpone.target-row-num-per-bucket", "postpone.target-size-per-bucket",
        "overwrite-upgrade")),
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
    *(_pk(k, _PK) for k in (
        "pk-vector.index.columns", "pk-btree.index.columns", "pk-bitmap.index.columns",
        "pk-multivalue.index.columns", "pk-full-text.index.columns", "pk-clustering-override")),
)
# fmt: on

_PREFIXES: tuple[tuple[str, OptionSupport], ...] = (
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
    ("orc.", _layout("orc.*", "ORC writer settings passed to Java's ORC library")),
    ("parquet.", _layout("parquet.*", "Parquet writer settings passed to Java's Parquet library")),
    ("avro.", _layout("avro.*", "Avro writer settings passed to Java's Avro library")),
)
"""Option families matched by prefix when the key itself is not listed."""

_BY_KEY: dict[str, OptionSupport] = {o.key: o for o in _OPTIONS}


def option_support(key: str) -> OptionSupport | None:
    """Return snaplake's treatment of option ``key`` (``None`` = not a Paimon core option)."""
    found = _BY_KEY.get(key)
    if found is None:
        found = next((o for prefix, o in _PREFIXES if key.startswith(prefix)), None)
    return found


def iter_option_families() -> Iterator[tuple[str, OptionSupport]]:
    """Yield ``(prefix, treatment)`` of the option families matched by prefix."""
    return iter(_PREFIXES)


def iter_option_support() -> Iterator[OptionSupport]:
    """Yield every listed option, in the order of the table (for docs and tests)."""
    return iter(_OPTIONS)


def option_refusal(key: str, value: str, operation: str) -> str | None:
    """Return why ``key = value`` makes snaplake refuse ``operation``, or ``None``.

    Args:
        key: An option key of the table schema.
        value: Its value as stored.
        operation: ``create``, ``read``, ``write``, ``commit`` or ``maintenance``.

    Returns:
        A reason to put in the error message, or ``None`` when the operation
        may go ahead (honoured, engine-specific, primary-key-only and unknown
        options never refuse).
    """
    support = option_support(key)
    if support is None or operation not in support.refused_for or support.accepts(value):
        return None
    return f"{support.note} (snaplake accepts: {support.accepted})"


def options_markdown() -> str:
    """Return the README's option table (Markdown): every option, its status and note.

    ``README.md`` holds this text between ``<!-- options:begin -->`` and
    ``<!-- options:end -->``; a test keeps the two equal.
    """
    lines = [
        "| Option | Status | Refused unless | Note |",
        "|---|---|---|---|",
    ]

    def row(key: str, o: OptionSupport) -> str:
        refused = o.status is OptionStatus.REFUSED or o.accepted != "any"
        ops = sorted(o.refused_for - {"create"}) if refused else []
        scope = "all operations" if len(ops) == 4 else ", ".join(ops)
        when = f"{o.accepted} ({scope})" if refused else ""
        return f"| `{key}` | {o.status.value} | {when} | {o.note} |"

    lines += [row(o.key, o) for o in _OPTIONS]
    lines += [row(prefix + "*", o) for prefix, o in _PREFIXES]
    return "\n".join(lines) + "\n"
