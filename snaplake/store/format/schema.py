"""TableSchema (Paimon ``schema-N`` JSON, version 3) and SchemaManager.

Source: Paimon ``TableSchema`` / ``SchemaSerializer`` (keys ``version, id,
fields, highestFieldId, partitionKeys, primaryKeys, options, comment,
timeMillis``) and ``SchemaManager`` (``schema/schema-<N>``, created
create-if-absent so two creators cannot both win).
"""

from __future__ import annotations

import difflib
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from functools import cached_property
from typing import Any

import pyarrow as pa

from snaplake.errors import (
    CorruptMetadataError,
    FileAlreadyExistsError,
    InvalidOptionError,
    SchemaMismatchError,
    TableAlreadyExistsError,
    UnsupportedFormatVersionError,
    UnsupportedTypeError,
)
from snaplake.options import CoreOptions, Operation, registry
from snaplake.options.partition_time import check_expiration_interval, check_timestamp_pattern
from snaplake.options.tag_options import TagOptions
from snaplake.store.format.binary_row import decode_binary_row
from snaplake.store.format.json_codec import decode_json, encode_json
from snaplake.store.format.partition import partition_path
from snaplake.store.format.paths import PathFactory, TableFileManager, list_ids
from snaplake.store.format.primary_key import (
    check_primary_key_table,
    normalize_primary_key_fields,
)
from snaplake.store.format.types import (
    DataField,
    DataType,
    arrow_schema_from_fields,
    fields_from_arrow,
    parse_fields,
    parse_type,
)
from snaplake.store.io.file_io import FileIO

__all__ = ["SCHEMA_VERSION", "SchemaManager", "TableSchema", "check_field_options"]

SCHEMA_VERSION = 3

_FIELDS_PREFIX = "fields."
_DEFAULT_AGG_FUNCTION = "default-aggregate-function"


def check_field_options(field_names: Sequence[str], options: Mapping[str, str]) -> None:
    """Refuse ``fields.<columns>.<suffix>`` options that name a column the table lacks.

    The one check table creation and ``alter_table`` share: a key such as
    ``fields.distnace.aggregate-function`` (a typo) or
    ``fields.X.ignore-retract`` (column ``x``: names are case-sensitive)
    would otherwise be stored and silently ignored. ``<columns>`` is the
    text between the first and the second dot, comma-separated (sequence
    groups name several); ``fields.default-aggregate-function`` names none.

    Args:
        field_names: The table's top-level column names.
        options: The table options.

    Raises:
        InvalidOptionError: a key names a missing column; ``key`` is the
            option key, the message suggests the column meant (a different
            case or a close spelling) and says to fix or remove the option.

    Source: Paimon ``SchemaValidation.validateFieldsPrefix``.
    """
    names = set(field_names)
    for key in sorted(options):
        if not key.startswith(_FIELDS_PREFIX):
            continue
        head = key.split(".")[1]
        for column in head.split(","):
            if column == _DEFAULT_AGG_FUNCTION or column in names:
                continue
            raise InvalidOptionError(
                f"option {key!r} names column {column!r}, which the table does not have"
                f"{_did_you_mean(column, field_names)}; fix the column name in the key or "
                f"remove the option (the columns are {list(field_names)})",
                key=key,
                value=options[key],
            )


def _did_you_mean(column: str, field_names: Sequence[str]) -> str:
    same_case = [n for n in field_names if n.lower() == column.lower()]
    if same_case:
        return f" (did you mean {same_case[0]!r}? column names are case-sensitive)"
    close = difflib.get_close_matches(column, list(field_names), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


@dataclass(frozen=True, kw_only=True)
class TableSchema:
    """The schema file of a table version.

    Attributes:
        id: Schema id (``schema-<id>``).
        fields: Paimon field JSON objects (``{"id", "name", "type"}``).
        highest_field_id: Largest field id handed out (nested fields included).
        partition_keys: Partition columns, in path order.
        primary_keys: Primary key columns (a primary-key table when non-empty).
        options: Table options (string map), always including ``bucket`` and
            ``file.format``.
        comment: Optional table comment.
        time_millis: Creation time, epoch milliseconds.
        source_path: The ``schema-<N>`` file it was read from (``None`` when
            built in memory); errors about its column types name it. Not
            part of equality and not copied by ``dataclasses.replace``.

    Types are parsed on first use, so a table whose schema holds a type
    snaplake does not know still opens (snapshots, tags, expiry); reading or
    writing it raises ``UnsupportedTypeError`` naming the column and the file.
    """

    version: int = SCHEMA_VERSION
    id: int
    fields: tuple[Mapping[str, Any], ...]
    highest_field_id: int
    partition_keys: tuple[str, ...] = ()
    primary_keys: tuple[str, ...] = ()
    options: Mapping[str, str] = field(default_factory=dict)
    comment: str | None = None
    time_millis: int = 0
    source_path: str | None = field(default=None, init=False, compare=False, repr=False)

    @contextmanager
    def _types_of_file(self, column: str | None = None) -> Iterator[None]:
        """Re-raise an ``UnsupportedTypeError`` naming the column and the schema file."""
        try:
            yield
        except UnsupportedTypeError as exc:
            if self.source_path is None and column is None:
                raise
            where = f"column {column!r} of " if column is not None else ""
            file = self.source_path or f"schema-{self.id}"
            raise UnsupportedTypeError(
                f"{where}schema file {file}: {exc}; snaplake cannot read or write a column of "
                "this type (a type of a newer Paimon, or a hand-edited file): upgrade snaplake "
                "or correct the file"
            ) from exc

    @classmethod
    def from_arrow(
        cls,
        schema: pa.Schema,
        *,
        schema_id: int = 0,
        partition_keys: Sequence[str] = (),
        primary_keys: Sequence[str] = (),
        options: Mapping[str, str] | None = None,
        comment: str | None = None,
    ) -> TableSchema:
        """Build schema 0 of a new table from an Arrow schema.

        Args:
            schema: Column names, Arrow types and nullability.
            schema_id: Id of the new schema.
            partition_keys: Columns that partition the table (must exist).
            primary_keys: Primary-key columns (empty = append table). The
                option ``primary-key`` (comma-separated) is moved here, as
                Paimon does; the key columns become NOT NULL unless
                ``primary-key.nullable = true``.
            options: Table options; ``bucket`` defaults to ``-1`` and
                ``file.format`` to ``parquet`` and both are always written.
            comment: Optional table comment.

        The options ``partition`` and ``primary-key`` (comma-separated
        columns) move into the partition and primary keys and out of the
        options, as Paimon does; giving ``partition`` together with
        ``partition_keys`` is an error.

        The rules of primary-key tables and what snaplake supports are not
        checked here: ``check_supported(schema, Operation.CREATE)``
        (:mod:`snaplake.store.support`) checks the result before the catalog
        writes it.

        Raises:
            SchemaMismatchError: a partition, primary or bucket key is not a
                column, a name repeats, or ``partition`` is given twice.
            UnsupportedTypeError: a column type has no Paimon equivalent.
            InvalidOptionError: an option value does not parse, or a
                ``fields.<column>.*`` key names no column (:func:`check_field_options`).
        """
        names = schema.names
        if len(set(names)) != len(names):
            raise SchemaMismatchError(f"column names repeat in {names}; rename the duplicates")
        options, partition_keys, option_primary_keys = _keys_from_options(options, partition_keys)
        if option_primary_keys:
            if primary_keys:
                raise SchemaMismatchError(
                    "primary key given both as primary_keys and as the 'primary-key' option; "
                    "use one of them"
                )
            primary_keys = option_primary_keys
        for key in (*partition_keys, *primary_keys):
            if key not in names:
                raise SchemaMismatchError(
                    f"partition or primary key {key!r} is not a column of the schema {names}"
                )
        opts = {"bucket": "-1", **dict(options or {})}
        opts.setdefault("file.format", "parquet")
        check_field_options(names, opts)  # before the key checks, as alter_table does
        core = CoreOptions(opts)
        fields_json, highest = fields_from_arrow(schema)
        fields = tuple(fields_json)
        if primary_keys:
            fields = normalize_primary_key_fields(
                fields, primary_keys, nullable=core.primary_key_nullable
            )
        table_schema = cls(
            id=schema_id,
            fields=fields,
            highest_field_id=highest,
            partition_keys=tuple(partition_keys),
            primary_keys=tuple(primary_keys),
            options=opts,
            comment=comment,
            time_millis=int(time.time() * 1000),
        )
        table_schema.validate()
        return table_schema

    def validate(self) -> None:
        """Check what every schema of a table must satisfy (at creation and after an alter).

        Raises:
            SchemaMismatchError: no column, a repeated name, a partition or
                bucket key that is not a column, a nested bucket key, an
                invalid ``bucket`` (0, below -2, or -2 on an append table), or
                ``bucket-key`` with ``bucket = -1``.
            InvalidOptionError: an option value does not parse, a
                ``fields.<column>.*`` key names a missing column
                (:func:`check_field_options`), or ``partition.timestamp-pattern``
                names a column that is not a partition key,
                ``partition.expiration-time`` is shorter than
                ``partition.expiration-check-interval``, or the ``tag.*``
                options contradict each other (:meth:`TagOptions.of`).

        Source: Paimon ``SchemaValidation.validateTableSchema`` (``validateBucket``,
        ``validateFieldsPrefix``) and ``TableSchema`` (bucket keys must be columns).
        """
        names = self.field_names
        if not names:
            raise SchemaMismatchError("a table needs at least one column")
        if len(set(names)) != len(names):
            raise SchemaMismatchError(f"column names repeat in {names}; rename the duplicates")
        for key in self.partition_keys:
            if key not in names:
                raise SchemaMismatchError(
                    f"partition key {key!r} is not a column of the schema {names}"
                )
        core = CoreOptions(self.options)
        if core.bucket == 0 or core.bucket < -2 or (core.bucket == -2 and not self.primary_keys):
            modes = "-1 (dynamic), -2 (postpone)" if self.primary_keys else "-1 (bucket-unaware)"
            raise SchemaMismatchError(
                f"bucket = {core.bucket} is invalid; use {modes} or a positive count"
            )
        if core.bucket == -1 and "bucket-key" in self.options:
            raise SchemaMismatchError(
                "'bucket-key' cannot be set with bucket = -1 (Paimon refuses it); remove "
                "bucket-key or set bucket = N (a fixed number of buckets)"
            )
        if core.bucket > 0:
            keys = core.bucket_key
            if not keys and not self.primary_keys:
                raise SchemaMismatchError(
                    "a fixed-bucket append table needs 'bucket-key' (comma-separated columns)"
                )
            for key in keys:
                if key not in names:
                    raise SchemaMismatchError(f"bucket key {key!r} is not a column of {names}")
                if self.field_type(key).is_nested:
                    raise SchemaMismatchError(f"bucket key {key!r} has a nested type")
        check_field_options(names, self.options)
        pattern = self.options.get("partition.timestamp-pattern")
        if pattern is not None:
            check_timestamp_pattern(pattern, self.partition_keys)
        check_expiration_interval(
            core.get(registry.PARTITION_EXPIRATION_TIME),
            core.get(registry.PARTITION_EXPIRATION_CHECK_INTERVAL) or timedelta(0),
        )
        TagOptions.of(core)  # tag.creation-delay against the period

    @cached_property
    def arrow_schema(self) -> pa.Schema:
        """The Arrow schema data files are written and read with.

        Raises:
            UnsupportedTypeError: a column type cannot be parsed (names the file).
        """
        self.field_types  # noqa: B018 - names the column of an unknown type
        with self._types_of_file():
            return arrow_schema_from_fields(list(self.fields))

    @cached_property
    def data_fields(self) -> tuple[DataField, ...]:
        """The fields parsed (ids, names, Paimon types), in schema order.

        Raises:
            UnsupportedTypeError: a field cannot be parsed (names the file).
        """
        self.field_types  # noqa: B018 - names the column of an unknown type
        with self._types_of_file():
            return parse_fields(list(self.fields))

    @cached_property
    def core_options(self) -> CoreOptions:
        """Typed view of :attr:`options`."""
        return CoreOptions(self.options)

    @property
    def field_names(self) -> list[str]:
        """Column names in schema order."""
        return [str(f["name"]) for f in self.fields]

    def field_type(self, name: str) -> DataType:
        """Return the Paimon type of column ``name`` (parsed once per schema).

        Raises:
            SchemaMismatchError: ``name`` is not a column.
        """
        try:
            return self.field_types[name]
        except KeyError:
            raise SchemaMismatchError(f"{name!r} is not a column of {self.field_names}") from None

    @cached_property
    def bucket_keys(self) -> tuple[str, ...]:
        """Columns a fixed-bucket table hashes: ``bucket-key``, else the trimmed primary key.

        Empty for an append table without ``bucket-key`` (Paimon 0.9+ refuses
        to create or even open one with ``bucket > 0``; pypaimon 2.1.0 and
        Paimon 0.8 and older create them): every row then hashes the empty
        row, so all rows of a partition go to one bucket. That is what Java's
        ``FixedBucketRowKeyExtractor`` computes for an empty bucket key (the
        rule since Paimon 0.9, commit c8f9b18) and where pypaimon 2.1.0
        writes them. Paimon 0.8 and older hashed every column instead; rows
        they placed are read wherever they are.

        Raises:
            SchemaMismatchError: a ``bucket-key`` column is not a column.

        Source: Paimon ``TableSchema`` constructor (``originalBucketKeys``,
        then ``trimmedPrimaryKeys``).
        """
        keys = tuple(self.core_options.bucket_key)
        for key in keys:
            if key not in self.field_names:
                raise SchemaMismatchError(
                    f"bucket key {key!r} is not a column of {self.field_names}"
                )
        if not keys:
            keys = tuple(k for k in self.primary_keys if k not in self.partition_keys)
        return keys

    @cached_property
    def field_types(self) -> dict[str, DataType]:
        """Column name -> Paimon type, in schema order.

        Raises:
            UnsupportedTypeError: a column's type cannot be parsed (names the
                column and the schema file).
        """
        out: dict[str, DataType] = {}
        for f in self.fields:
            name = str(f["name"])
            with self._types_of_file(name):
                out[name] = parse_type(f["type"])
        return out

    @property
    def trimmed_primary_keys(self) -> tuple[str, ...]:
        """Primary-key columns that are not partition keys (the key of data files).

        Source: Paimon ``TableSchema.trimmedPrimaryKeys``.
        """
        return tuple(k for k in self.primary_keys if k not in self.partition_keys)

    @cached_property
    def key_types(self) -> tuple[DataType, ...]:
        """Paimon types of the trimmed primary key (the BinaryRow of min/max keys)."""
        types = self.field_types
        return tuple(types[k] for k in self.trimmed_primary_keys)

    def check_primary_key_table(self, operation: Operation) -> None:
        """Refuse ``operation`` on a primary-key table snaplake cannot handle.

        Append tables pass (nothing is refused here). Run only by
        :func:`snaplake.store.support.check_supported`; see
        :func:`snaplake.store.format.primary_key.check_primary_key_table`.
        """
        if self.primary_keys:
            check_primary_key_table(
                field_types=self.field_types,
                partition_keys=self.partition_keys,
                primary_keys=self.primary_keys,
                options=self.options,
                operation=operation,
            )

    @cached_property
    def partition_types(self) -> tuple[DataType, ...]:
        """Paimon types of the partition keys, in order."""
        return tuple(self.field_type(k) for k in self.partition_keys)

    @cached_property
    def value_types(self) -> tuple[DataType, ...]:
        """Paimon types of every column, in order."""
        return tuple(self.field_types.values())

    def partition_path(self, values: Sequence[Any]) -> str:
        """Directory of a partition (``k1=v1/k2=v2``; ``""`` when unpartitioned).

        Uses the table's ``partition.default-name`` and
        ``partition.legacy-name`` options, so every writer and reader spells
        a partition the same way Paimon's Java writers do.
        """
        if not self.partition_keys:
            return ""
        opts = self.core_options
        return partition_path(
            self.partition_keys,
            values,
            self.partition_types,
            default_partition_name=opts.partition_default_name,
            legacy_partition_name=opts.partition_legacy_name,
        )

    def partition_path_of(self, partition: bytes) -> str:
        """Directory of a partition given as BinaryRow bytes."""
        if not self.partition_keys:
            return ""
        return self.partition_path(decode_binary_row(partition, self.partition_types))

    def to_json_dict(self) -> dict[str, Any]:
        """Return the Paimon schema JSON object."""
        out: dict[str, Any] = {
            "version": self.version,
            "id": self.id,
            "fields": [dict(f) for f in self.fields],
            "highestFieldId": self.highest_field_id,
            "partitionKeys": list(self.partition_keys),
            "primaryKeys": list(self.primary_keys),
            "options": dict(self.options),
        }
        if self.comment is not None:
            out["comment"] = self.comment
        out["timeMillis"] = self.time_millis
        return out

    @classmethod
    def from_json_dict(cls, data: Mapping[str, Any], *, path: str = "<memory>") -> TableSchema:
        """Decode a schema JSON object.

        Older versions get Paimon's implied options (``bucket = 1`` for v1,
        ``file.format = orc`` for v1-2) when absent.

        Raises:
            UnsupportedFormatVersionError: ``version`` is newer than 3.
            CorruptMetadataError: a required key is missing or mistyped.
        """
        try:
            version = int(data.get("version", 1))
            if version > SCHEMA_VERSION:
                raise UnsupportedFormatVersionError(
                    f"{path} has schema version {version}; upgrade snaplake",
                    path=path,
                    version=version,
                )
            options = {str(k): str(v) for k, v in (data.get("options") or {}).items()}
            if version <= 1:
                options.setdefault("bucket", "1")
            if version <= 2:
                options.setdefault("file.format", "orc")
            schema = cls(
                version=version,
                id=int(data["id"]),
                fields=tuple(data["fields"]),
                highest_field_id=int(data["highestFieldId"]),
                partition_keys=tuple(data.get("partitionKeys") or ()),
                primary_keys=tuple(data.get("primaryKeys") or ()),
                options=options,
                comment=data.get("comment"),
                time_millis=int(data.get("timeMillis") or 0),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise CorruptMetadataError(
                f"{path} is not a valid Paimon schema ({type(exc).__name__}: {exc})", path=path
            ) from exc
        if path != "<memory>":
            object.__setattr__(schema, "source_path", path)
        return schema


def _split_keys(text: str) -> tuple[str, ...]:
    return tuple(k.strip() for k in text.split(",") if k.strip())


def _keys_from_options(
    options: Mapping[str, str] | None, partition_keys: Sequence[str]
) -> tuple[dict[str, str], tuple[str, ...], tuple[str, ...]]:
    """Move the ``partition`` and ``primary-key`` options into the keys (Paimon's ``Schema``).

    Source: Paimon ``Schema.normalizePartitionKeys`` / ``normalizePrimaryKeys``.
    """
    opts = dict(options or {})
    partitions = tuple(partition_keys)
    if "partition" in opts:
        if partitions:
            raise SchemaMismatchError(
                "partition keys given both as partition_keys and as the 'partition' option; "
                "use one of them"
            )
        partitions = _split_keys(opts.pop("partition"))
    primary = _split_keys(opts.pop("primary-key", ""))
    return opts, partitions, primary


class SchemaManager(TableFileManager):
    """Reads and creates ``<table>/schema/schema-<N>`` files."""

    def __init__(self, file_io: FileIO, paths: PathFactory) -> None:
        super().__init__(file_io, paths)
        self._cache: dict[int, TableSchema] = {}

    def list_schema_ids(self) -> list[int]:
        """Return the ids of every schema file, ascending."""
        return list_ids(self.file_io, self.paths.schema_dir, PathFactory.parse_schema_id)

    def cached_ids(self) -> list[int]:
        """Return the ids of the schemas this manager has read or written (no request)."""
        return list(self._cache)

    def latest(self) -> TableSchema | None:
        """Return the newest schema, or ``None`` when the table has none (no table)."""
        ids = self.list_schema_ids()
        return self.schema(ids[-1]) if ids else None

    def schema(self, schema_id: int) -> TableSchema:
        """Read ``schema-<id>`` (cached: schema files are immutable).

        Raises:
            FileNotFoundError: no such schema file.
            CorruptMetadataError: it cannot be decoded.
        """
        cached = self._cache.get(schema_id)
        if cached is None:
            path = self.paths.schema_path(schema_id)
            cached = TableSchema.from_json_dict(
                decode_json(self.file_io.read_bytes(path), path=path), path=path
            )
            self._cache[schema_id] = cached
        return cached

    def create(self, schema: TableSchema) -> TableSchema:
        """Write ``schema-<schema.id>`` create-if-absent.

        Raises:
            TableAlreadyExistsError: that schema file already exists.

        Storage: writes one small JSON file.
        """
        path = self.paths.schema_path(schema.id)
        try:
            self.file_io.write_if_absent(path, encode_json(schema.to_json_dict()))
        except FileAlreadyExistsError as exc:
            raise TableAlreadyExistsError(f"{path} already exists") from exc
        self._cache[schema.id] = schema
        return schema
