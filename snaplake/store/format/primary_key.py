"""Rules of primary-key tables: schema shape, bucket mode, merge engine and its options.

One place decides whether snaplake can create, write, read or compact a
primary-key table (``check_primary_key_table``, run by
:func:`snaplake.store.support.check_supported` only; the options it refuses
are declared in :mod:`snaplake.options.registry`) and which aggregate function
each column of an aggregation table uses (``aggregate_functions``). Anything
Paimon would store or merge differently from what snaplake implements is
refused with :class:`~snaplake.errors.UnsupportedTableError` before a file is
read or written; an option Paimon itself rejects is an
:class:`~snaplake.errors.InvalidOptionError`.

Source: Paimon ``Schema.normalizeFields`` / ``normalizePrimaryKeys``,
``TableSchema.trimmedPrimaryKeys`` / ``originalBucketKeys``,
``SchemaValidation`` (primary-key types, sequence field, rowkind field),
``PartialUpdateMergeFunction.Factory``, ``AggregateMergeFunction.getAggFuncName``
and the ``FieldAggregatorFactory`` implementations.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Any, Final

from snaplake.errors import InvalidOptionError, SchemaMismatchError, UnsupportedTableError
from snaplake.options import CoreOptions, Operation
from snaplake.options.registry import (
    CHANGELOG_FILE_FORMAT,
    FILE_COMPRESSION_PER_LEVEL,
    FILE_FORMAT_PER_LEVEL,
    METADATA_STATS_MODE_PER_LEVEL,
    primary_key_option_refusal,
)
from snaplake.store.format.file_format import file_format
from snaplake.store.format.paths import POSTPONE_BUCKET
from snaplake.store.format.stats import check_stats_mode
from snaplake.store.format.types import DataType, TypeRoot, parse_type

__all__ = [
    "AGGREGATE_FUNCTIONS",
    "RETRACTABLE_FUNCTIONS",
    "MergeEngine",
    "aggregate_functions",
    "check_primary_key_table",
    "normalize_primary_key_fields",
]


class MergeEngine(StrEnum):
    """``merge-engine`` values (Paimon ``CoreOptions.MergeEngine``)."""

    DEDUPLICATE = "deduplicate"
    PARTIAL_UPDATE = "partial-update"
    AGGREGATION = "aggregation"
    FIRST_ROW = "first-row"


PRIMARY_KEY_FUNCTION: Final = "primary_key"
"""Internal function of primary-key columns in an aggregation (keeps the last value)."""

AGGREGATE_FUNCTIONS: Final[frozenset[str]] = frozenset(
    {
        "sum",
        "product",
        "min",
        "max",
        "last_value",
        "last_non_null_value",
        "first_value",
        "first_non_null_value",
        "listagg",
        "bool_and",
        "bool_or",
    }
)
"""``fields.<f>.aggregate-function`` values snaplake merges exactly as Paimon does."""

RETRACTABLE_FUNCTIONS: Final[frozenset[str]] = frozenset(
    {"sum", "product", "last_value", "last_non_null_value", PRIMARY_KEY_FUNCTION}
)
"""Functions that accept ``-U``/``-D`` rows without ``fields.<f>.ignore-retract``."""

_PAIMON_ONLY_FUNCTIONS: Final = frozenset(
    {
        "collect",
        "merge_map",
        "merge_map_with_keytime",
        "nested_update",
        "nested_partial_update",
        "rbm32",
        "rbm64",
        "hll_sketch",
        "theta_sketch",
    }
)
_NUMERIC: Final = frozenset(
    {
        TypeRoot.TINYINT,
        TypeRoot.SMALLINT,
        TypeRoot.INT,
        TypeRoot.BIGINT,
        TypeRoot.FLOAT,
        TypeRoot.DOUBLE,
        TypeRoot.DECIMAL,
    }
)
_KEY_REFUSED_ROOTS: Final = frozenset(
    {TypeRoot.ARRAY, TypeRoot.MULTISET, TypeRoot.MAP, TypeRoot.ROW, TypeRoot.VARIANT,
     TypeRoot.BLOB}
)  # fmt: skip

_SYSTEM_NAMES: Final = frozenset({"_SEQUENCE_NUMBER", "_VALUE_KIND", "_LEVEL", "_ROW_ID"})


def normalize_primary_key_fields(
    fields: Sequence[Mapping[str, Any]], primary_keys: Sequence[str], *, nullable: bool
) -> tuple[dict[str, Any], ...]:
    """Return ``fields`` with every primary-key column's nullability set to ``nullable``.

    Args:
        fields: Paimon field JSON objects of the schema.
        primary_keys: Primary-key column names.
        nullable: ``primary-key.nullable`` (Paimon's default: NOT NULL keys).

    Source: Paimon ``Schema.normalizeFields``.
    """
    keys = set(primary_keys)
    out = []
    for f in fields:
        field = dict(f)
        if field["name"] in keys:
            dtype = parse_type(field["type"])
            if dtype.nullable != nullable:
                field["type"] = dtype.with_nullable(nullable=nullable).to_json()
        out.append(field)
    return tuple(out)


def _refuse(message: str, *, feature: str, operation: str, key: str | None = None) -> None:
    raise UnsupportedTableError(message, feature=feature, operation=str(operation), key=key)


def _check_cross_partition(core: CoreOptions, operation: Operation) -> None:
    """Refuse a cross-partition table whose rows move as snaplake does not move them.

    Paimon writes a partial-update or aggregation row whose key lives in
    another partition into that OLD partition (its ``UseOldExistingProcessor``);
    snaplake implements deduplicate and first-row only, in arrival order (so
    no ``sequence.field``).

    Source: Paimon ``GlobalIndexAssigner`` / ``ExistingProcessor``.
    """
    engine = core.merge_engine
    if engine in (MergeEngine.PARTIAL_UPDATE, MergeEngine.AGGREGATION):
        _refuse(
            f"cross-partition upserts (bucket = -1, primary key lacking a partition key) with "
            f"merge-engine = {engine!r} are not supported: Paimon writes a row whose key lives "
            "in another partition into that old partition, which snaplake does not implement; "
            "use deduplicate or first-row, or add the partition keys to the primary key",
            feature=f"cross-partition upsert with merge-engine = {engine!r}",
            operation=operation,
            key="merge-engine",
        )
    if core.sequence_field:
        _refuse(
            f"cross-partition upserts with sequence.field = {core.sequence_field} are not "
            "supported: snaplake moves a key to the partition of its latest row in arrival "
            "order, which a sequence field may contradict; remove 'sequence.field' or add the "
            "partition keys to the primary key",
            feature="cross-partition upsert with sequence.field",
            operation=operation,
            key="sequence.field",
        )


def check_primary_key_table(
    *,
    field_types: Mapping[str, DataType],
    partition_keys: Sequence[str],
    primary_keys: Sequence[str],
    options: Mapping[str, str],
    operation: Operation,
) -> None:
    """Refuse a primary-key table snaplake cannot handle for ``operation``.

    Called by :func:`snaplake.store.support.check_supported` (the one door),
    through ``TableSchema.check_primary_key_table``.

    Args:
        field_types: Column name -> Paimon type, in schema order.
        partition_keys: Partition columns.
        primary_keys: Primary-key columns (non-empty).
        options: Table options.
        operation: What the caller is about to do.

    Raises:
        SchemaMismatchError: a key names no column, repeats, the primary key
            misses a partition key (unless ``bucket = -1``: cross-partition
            upserts) or equals the partition keys, a key column
            has a nested type, ``bucket-key`` is not inside the trimmed primary
            key, or ``sequence.field`` / ``rowkind.field`` name no column.
        InvalidOptionError: an unknown ``merge-engine`` or aggregate function,
            or options Paimon rejects together.
        UnsupportedTableError: ``bucket`` is neither a positive count nor -1
            or -2 (for create, write, commit and maintenance), a level or the
            changelog files would be written in a format, codec or for column
            types snaplake cannot write (create, write, maintenance), a
            cross-partition table (``bucket = -1``, key lacking a partition key)
            uses partial-update, aggregation or ``sequence.field`` (not for
            read), or an option is set to
            a value the registry's ``primary-key`` declaration refuses for
            ``operation`` (``docs/primary-key-tables.md`` §1).
    """
    names = list(field_types)
    reserved = [n for n in names if n.startswith("_KEY_") or n in _SYSTEM_NAMES]
    if reserved:
        raise SchemaMismatchError(
            f"column(s) {reserved} use names Paimon reserves in primary-key data files "
            "(_KEY_<k>, _SEQUENCE_NUMBER, _VALUE_KIND); rename them"
        )
    if len(set(primary_keys)) != len(primary_keys):
        raise SchemaMismatchError(f"primary key {list(primary_keys)} repeats a column")
    for key in primary_keys:
        if key not in field_types:
            raise SchemaMismatchError(f"primary key {key!r} is not a column of {names}")
        if field_types[key].root in _KEY_REFUSED_ROOTS:
            raise SchemaMismatchError(
                f"primary key column {key!r} has type {field_types[key].sql()}; Paimon "
                "allows only atomic types in a primary key"
            )
    missing = [p for p in partition_keys if p not in primary_keys]
    core = CoreOptions(options)
    if missing and core.bucket != -1:
        raise SchemaMismatchError(
            f"primary key {list(primary_keys)} must contain every partition key "
            f"{list(partition_keys)} (missing {missing}): Paimon allows a key that spans "
            "partitions only with dynamic buckets; add the partition keys to the primary key"
        )
    if missing and operation is not Operation.READ:
        _check_cross_partition(core, operation)
    trimmed = [k for k in primary_keys if k not in partition_keys]
    if not trimmed:
        raise SchemaMismatchError(
            f"primary key {list(primary_keys)} equals the partition keys {list(partition_keys)}"
            ": every partition would hold one row; add a column that identifies rows"
        )
    bucket_key = core.bucket_key
    for key in bucket_key:
        if key not in trimmed:
            raise SchemaMismatchError(
                f"bucket key {key!r} must be a primary-key column outside the partition keys "
                f"{trimmed}"
            )
    # bucket = -2 (postpone buckets): written by filestore.postpone.PostponeBucketFileStore.
    if (
        operation is not Operation.READ
        and core.bucket == POSTPONE_BUCKET
        and core.changelog_producer != "none"
    ):
        _refuse(
            f"changelog-producer = {core.changelog_producer!r} on a postpone-bucket table "
            "(bucket = -2) is not supported: Paimon produces such a table's changelog when "
            "compaction assigns the pending rows, which snaplake does not; use "
            "changelog-producer = none or a fixed bucket count",
            feature="changelog of a postpone-bucket table",
            operation=operation,
            key="changelog-producer",
        )
    if (
        operation is not Operation.READ
        and core.bucket <= 0
        and core.bucket not in (-1, POSTPONE_BUCKET)
    ):
        _refuse(
            f"primary-key table with bucket = {core.bucket} is not supported; use -1 "
            "(dynamic buckets), -2 (postpone buckets) or a positive count",
            feature=f"bucket = {core.bucket}",
            operation=operation,
            key="bucket",
        )
    if operation in (Operation.CREATE, Operation.WRITE, Operation.MAINTENANCE):
        _check_file_formats(core, field_types, operation)
    for mode in (core.get(METADATA_STATS_MODE_PER_LEVEL) or {}).values():
        check_stats_mode(mode, key="metadata.stats-mode.per.level")
    if options.get("changelog-file.stats-mode") is not None:
        check_stats_mode(core.changelog_file_stats_mode, key="changelog-file.stats-mode")
    if core.deletion_vectors_enabled:
        # Paimon SchemaValidation.validateForDeletionVectors.
        if core.merge_engine == MergeEngine.FIRST_ROW:
            raise InvalidOptionError(
                "deletion vectors cannot be used with merge-engine = first-row (Paimon "
                "refuses the pair); set deletion-vectors.enabled = false",
                key="deletion-vectors.enabled",
            )
        if core.bucket == -2 and operation is not Operation.READ:
            _refuse(
                "deletion vectors with postpone buckets (bucket = -2): snaplake's "
                f"postpone compaction does not maintain them; it refuses to {operation.value} "
                "this table",
                feature="deletion vectors with bucket = -2",
                operation=operation,
                key="deletion-vectors.enabled",
            )
        if core.changelog_producer not in ("none", "input", "lookup"):
            raise InvalidOptionError(
                f"deletion vectors need changelog-producer none, input or lookup, not "
                f"{core.changelog_producer!r} (Paimon refuses the pair)",
                key="changelog-producer",
                value=core.changelog_producer,
            )
    for key, value in options.items():
        why = primary_key_option_refusal(key, value, operation)
        if why is not None:
            _refuse(
                f"option {key!r} = {value!r} ({why}) is not supported on primary-key "
                f"tables; remove it or use Paimon's Java engines for this table",
                feature=f"option {key!r} = {value!r}",
                operation=operation,
                key=key,
            )
    engine = core.merge_engine
    if engine not in {e.value for e in MergeEngine}:
        raise InvalidOptionError(
            f"unknown merge-engine {options.get('merge-engine')!r}; use one of "
            f"{[e.value for e in MergeEngine]}",
            key="merge-engine",
            value=options.get("merge-engine"),
        )
    for field in core.sequence_field:
        if field not in field_types:
            raise SchemaMismatchError(f"sequence.field {field!r} is not a column of {names}")
        if core.field_option(field, "aggregate-function") is not None:
            raise InvalidOptionError(
                f"sequence field {field!r} must not have an aggregate function",
                key=f"fields.{field}.aggregate-function",
            )
    if core.sequence_field and engine == MergeEngine.FIRST_ROW:
        raise InvalidOptionError(
            "sequence.field cannot be used with merge-engine = first-row", key="sequence.field"
        )
    rowkind = core.rowkind_field
    if rowkind is not None:
        if rowkind not in field_types:
            raise SchemaMismatchError(f"rowkind.field {rowkind!r} is not a column of {names}")
        if field_types[rowkind].root not in (TypeRoot.VARCHAR, TypeRoot.CHAR):
            raise SchemaMismatchError(f"rowkind.field {rowkind!r} must be a STRING column")
    if engine == MergeEngine.PARTIAL_UPDATE:
        if core.ignore_delete and core.partial_update_remove_record_on_delete:
            raise InvalidOptionError(
                "ignore-delete and partial-update.remove-record-on-delete conflict; set one",
                key="partial-update.remove-record-on-delete",
            )
        for name in names:
            func = core.field_aggregate_function(name)
            if func is not None and func != "last_non_null_value" and name not in primary_keys:
                key = core.field_aggregate_function_key(name)
                raise InvalidOptionError(
                    f"partial-update column {name!r} has aggregate function {func!r} "
                    f"(option {key!r}); Paimon needs a sequence group for aggregation in "
                    "partial-update, and sequence groups are not supported; use "
                    "merge-engine = aggregation",
                    key=key,
                    value=func,
                )
    if engine == MergeEngine.AGGREGATION:
        aggregate_functions(field_types=field_types, primary_keys=primary_keys, options=options)


def _check_file_formats(
    core: CoreOptions, field_types: Mapping[str, DataType], operation: Operation
) -> None:
    """Refuse a level's or the changelog files' format, codec or column types snaplake cannot write.

    Each level writes ``file.format.per.level`` (else ``file.format``) with
    ``file.compression.per.level`` (else ``file.compression``); changelog
    files ``changelog-file.format`` / ``changelog-file.compression`` (else
    level 0's). ``file.format`` with ``file.compression`` itself is checked by
    ``check_supported`` for every table.

    Source: Paimon ``KeyValueFileWriterFactory`` (``fileFormatPerLevel``,
    ``fileCompressionPerLevel``, ``changelogFileFormat``).
    """
    per_level_formats = core.get(FILE_FORMAT_PER_LEVEL) or {}
    per_level_codecs = core.get(FILE_COMPRESSION_PER_LEVEL) or {}
    levels = sorted({*per_level_formats, *per_level_codecs})
    targets = [
        (f"level {lvl}", core.format_for_level(lvl), core.compression_for_level(lvl),
         "file.format.per.level" if lvl in per_level_formats else "file.compression.per.level")
        for lvl in levels
    ]  # fmt: skip
    changelog_key = (
        "changelog-file.format" if core.get(CHANGELOG_FILE_FORMAT) else "changelog-file.compression"
    )
    targets.append(
        ("changelog files", core.changelog_file_format, core.changelog_file_compression,
         changelog_key)
    )  # fmt: skip
    types = list(field_types.values())
    for what, name, codec, key in targets:
        try:
            fmt = file_format(name)
        except ValueError:
            _refuse(
                f"{what} would be written as {name!r}; snaplake writes primary-key files "
                "as parquet, orc or avro; change file.format.per.level or "
                "changelog-file.format",
                feature=f"{name} data files",
                operation=operation,
                key=key,
            )
            continue
        why = fmt.compression_refusal(codec, core.file_compression_zstd_level) or (
            fmt.type_refusal(types)
        )
        if why is not None:
            _refuse(
                f"{what} as {fmt.name} with compression {codec!r} ({why}) is not supported; "
                "change file.format.per.level, file.compression.per.level, "
                "changelog-file.format or changelog-file.compression",
                feature=f"{fmt.name} files with compression {codec!r}",
                operation=operation,
                key=key,
            )


def aggregate_functions(
    *,
    field_types: Mapping[str, DataType],
    primary_keys: Sequence[str],
    options: Mapping[str, str],
) -> dict[str, str]:
    """Return the aggregate function of every column of an aggregation table.

    Primary-key columns get ``primary_key`` (last value), ``sequence.field``
    columns ``last_value``, others their ``fields.<f>.aggregate-function``,
    else ``fields.default-aggregate-function``, else ``last_non_null_value``.

    Raises:
        InvalidOptionError: an unknown function name (``count`` gets a hint:
            Paimon counts with ``sum`` over a column of 1s), or a function that
            does not fit the column type.
        UnsupportedTableError: a Paimon function snaplake does not implement.

    Source: Paimon ``AggregateMergeFunction.getAggFuncName``, the
    ``Field*AggFactory`` type checks.
    """
    core = CoreOptions(options)
    sequence = set(core.sequence_field)
    out: dict[str, str] = {}
    for name, dtype in field_types.items():
        if name in sequence:
            out[name] = "last_value"
            continue
        if name in primary_keys:
            out[name] = PRIMARY_KEY_FUNCTION
            continue
        func = core.field_aggregate_function(name) or "last_non_null_value"
        key = core.field_aggregate_function_key(name)  # the key the user wrote
        if func == "count":
            raise InvalidOptionError(
                f"{key} = 'count': Paimon has no 'count' aggregate function (its docs count "
                "rows with 'sum' over a column holding 1 per row); use 'sum' and write 1",
                key=key,
                value=func,
            )
        if func in _PAIMON_ONLY_FUNCTIONS:
            _refuse(
                f"{key} = {func!r} is a Paimon aggregate function snaplake does not merge; "
                f"supported: {sorted(AGGREGATE_FUNCTIONS)}",
                feature=f"aggregate function {func!r}",
                operation="create",
                key=key,
            )
        if func not in AGGREGATE_FUNCTIONS:
            raise InvalidOptionError(
                f"{key} = {func!r} is not an aggregate function; use one of "
                f"{sorted(AGGREGATE_FUNCTIONS)}",
                key=key,
                value=func,
            )
        root = dtype.root
        wrong = (
            (func in ("sum", "product") and root not in _NUMERIC)
            or (func in ("bool_and", "bool_or") and root is not TypeRoot.BOOLEAN)
            or (func == "listagg" and (root is not TypeRoot.VARCHAR or dtype.length != 2**31 - 1))
            or (func in ("min", "max") and dtype.is_nested)
        )
        if wrong:
            own = f"fields.{name}.aggregate-function"
            hint = "" if key == own else f"; set {own} to a function that fits it"
            raise InvalidOptionError(
                f"{key} = {func!r} does not fit column {name!r} of type {dtype.sql()}{hint}",
                key=key,
                value=func,
            )
        out[name] = func
    return out
