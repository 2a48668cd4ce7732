"""``spark.read.format("snaplake")``: a Python Data Source reading one snapshot of a table.

::

    from snaplake.spark import register_data_source

    register_data_source(spark)  # once per session, classic or Spark Connect
    df = (
        spark.read.format("snaplake")
        .option("warehouse", "./warehouse")
        .option("snapshotId", 4)          # or asOf / tag (time travel)
        .load("db.orders")
        .where("month = 7")               # pushed into snaplake's scan
    )

The driver's Python worker plans the snapshot (manifests and files pruned by
the pushed filters); each Spark input partition is one split (a bucket of
one partition), read on an executor through the table's picklable FileIO
(local disk and S3 alike, no Hadoop connector) by the table kind's own read
path: append files with their deletion vectors, primary-key buckets merged.
Pushed filters are applied exactly by that read; filters snaplake cannot
take stay with Spark.

Rows carry two metadata columns after the table's: ``_row_kind`` (string)
and ``_snapshot_id`` (bigint), on batch reads (``'+I'`` and the snapshot
read) as on streams (the change's kind and snapshot). Spark's Python Data
Source API tells ``schema()`` neither whether a batch or a stream will
read nor which columns are needed, so one schema serves both; drop the two
columns (``df.drop("_row_kind", "_snapshot_id")``) to write the rows
elsewhere. Spark 4.3's Python Data Source API passes no required columns
to the reader, so by default every column is read and Spark drops the
unused ones after the read. A query that names its columns with Spark's
user-specified schema, ``spark.read.format("snaplake").schema("id BIGINT,
amount DOUBLE")``, reads only those (the two metadata columns too only when
named); a column the table lacks is a ``SchemaMismatchError``.

Source: Paimon's Spark ``PaimonScan`` / ``SparkSource`` (format ``paimon``,
time travel options ``scan.snapshot-id`` / ``scan.timestamp-millis`` /
``scan.tag-name``, here named as Spark users spell them).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    InputPartition,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
)

from snaplake.errors import InvalidOptionError, SchemaMismatchError
from snaplake.spark._common import arrow_schema_of, resolve_table, spark_schema_of
from snaplake.store.format.schema import TableSchema
from snaplake.store.io.file_io import FileIO
from snaplake.store.read.predicate import Predicate, check_filter_types
from snaplake.store.read.scan import Split
from snaplake.table import Table
from snaplake.table_scan import TableScan

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType

__all__ = [
    "FILTER_PUSHDOWN_CONF",
    "SnaplakeDataSource",
    "SnaplakeSourceOptions",
    "conform_batch",
    "register_data_source",
    "with_change_columns",
]

FILTER_PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"
"""Spark's switch for ``pushFilters`` of Python data sources (Spark refuses the read without it)."""

_BATCH_KEYS = frozenset({"path", "table", "warehouse", "snapshotid", "asof", "tag"})
_STREAM_KEYS = frozenset({"path", "table", "warehouse", "startingsnapshot", "mode"})
_CHANGE_COLUMNS = ("_row_kind", "_snapshot_id")
_MODES = ("auto", "delta", "changelog", "diff")
"""The modes of ``Table.changes`` (Paimon's incremental scan modes)."""
_PUSHABLE_VALUES = (bool, int, float, str, bytes, Decimal, dt.date)
"""Literal types pushed into snaplake's predicates (datetimes stay with Spark: zone rules)."""


@dataclass(frozen=True, slots=True)
class SnaplakeSourceOptions:
    """The options of ``format("snaplake")``, parsed and checked on the driver.

    Attributes:
        identifier: ``"database.table"`` (``load(...)``'s path, or option ``table``).
        warehouse: Local path, ``file://`` or ``s3://bucket/prefix``.
        catalog_options: The ``s3.*`` options, for the catalog (as
            :class:`~snaplake.catalog.FileSystemCatalog` takes them).
        snapshot_id: Option ``snapshotId`` (batch).
        as_of: Option ``asOf`` (batch): ISO-8601 with a zone offset, or epoch
            milliseconds.
        tag: Option ``tag`` (batch).
        starting_snapshot: Option ``startingSnapshot`` (stream): ``"earliest"``
            (default), ``"latest"`` or a snapshot id.
        mode: Option ``mode`` (stream): the ``changes`` mode, default ``"auto"``.
    """

    identifier: str
    warehouse: str
    catalog_options: Mapping[str, str]
    snapshot_id: int | None = None
    as_of: dt.datetime | None = None
    tag: str | None = None
    starting_snapshot: str = "earliest"
    mode: str = "auto"

    @classmethod
    def parse(cls, options: Mapping[str, str], *, streaming: bool) -> SnaplakeSourceOptions:
        """Parse Spark's (case-insensitive) option map.

        Raises:
            InvalidOptionError: a missing table or warehouse, an option this
                source does not know (time travel options on a stream, stream
                options on a batch read included), an unparsable value, or
                more than one of ``snapshotId``/``asOf``/``tag``.
        """
        lower = {str(k).lower(): str(v) for k, v in options.items()}
        known = _STREAM_KEYS if streaming else _BATCH_KEYS
        unknown = sorted(k for k in lower if k not in known and not k.startswith("s3."))
        if unknown:
            raise InvalidOptionError(
                f"format('snaplake') {'stream' if streaming else 'batch'} read: unknown option(s) "
                f"{unknown}; known: {sorted(known)} and s3.* catalog options",
                key=unknown[0], value=lower[unknown[0]],
            )  # fmt: skip
        identifier = lower.get("path") or lower.get("table")
        if not identifier:
            raise InvalidOptionError(
                "format('snaplake') needs the table: load('database.table')", key="path"
            )
        warehouse = lower.get("warehouse")
        if not warehouse:
            raise InvalidOptionError(
                "format('snaplake') needs option('warehouse', <path or s3://bucket/prefix>)",
                key="warehouse",
            )
        catalog = {k: v for k, v in lower.items() if k.startswith("s3.")}
        if streaming:
            start = lower.get("startingsnapshot", "earliest")
            if start not in ("earliest", "latest"):
                _parse_int("startingSnapshot", start)
            mode = lower.get("mode", "auto")
            if mode not in _MODES:
                raise InvalidOptionError(
                    f"option mode must be one of {', '.join(_MODES)}, got {mode!r}",
                    key="mode", value=mode,
                )  # fmt: skip
            return cls(
                identifier, warehouse, catalog, starting_snapshot=start, mode=mode,
            )  # fmt: skip
        travel = [k for k in ("snapshotid", "asof", "tag") if k in lower]
        if len(travel) > 1:
            raise InvalidOptionError(
                f"pass one of snapshotId, asOf, tag (got {travel})", key=travel[1]
            )
        snapshot_id = (
            _parse_int("snapshotId", lower["snapshotid"]) if "snapshotid" in lower else None
        )
        as_of = _parse_time(lower["asof"]) if "asof" in lower else None
        return cls(
            identifier, warehouse, catalog, snapshot_id=snapshot_id, as_of=as_of,
            tag=lower.get("tag"),
        )  # fmt: skip

    def table(self) -> Table:
        """Open the table.

        Raises:
            TableNotFoundError: no such table in the warehouse.
        """
        return resolve_table(
            self.identifier, warehouse=self.warehouse, options=self.catalog_options
        )


def _parse_int(key: str, value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        number = -1
    if number < 0:
        raise InvalidOptionError(
            f"option {key} must be a non-negative integer, got {value!r}", key=key, value=value
        )
    return number


def _parse_time(value: str) -> dt.datetime:
    """``asOf``: epoch milliseconds, or ISO-8601 with a zone offset (``Z`` allowed)."""
    if value.strip().isdigit():
        return dt.datetime.fromtimestamp(int(value) / 1000, tz=dt.UTC)
    try:
        parsed = dt.datetime.fromisoformat(value.strip())
    except ValueError:
        parsed = None
    if parsed is None or parsed.tzinfo is None:
        raise InvalidOptionError(
            f"option asOf must be epoch milliseconds or an ISO-8601 time with a zone offset "
            f"(e.g. 2026-11-26T12:00:00+00:00), got {value!r}",
            key="asOf", value=value,
        )  # fmt: skip
    return parsed


def _to_predicate(f: Filter, schema: pa.Schema) -> Predicate | None:
    """The snaplake predicate equal to Spark's filter ``f``, or ``None`` (Spark keeps it).

    Only top-level columns and literal types whose comparison is the same in
    both (no timestamps: their zone handling differs) are translated.
    """
    negate = isinstance(f, Not)
    inner = f.child if isinstance(f, Not) else f
    attribute: tuple[str, ...] = tuple(getattr(inner, "attribute", ()))
    if len(attribute) != 1 or attribute[0] not in schema.names:
        return None
    column = attribute[0]
    if isinstance(inner, IsNull | IsNotNull):
        if negate:
            return None
        op = "is null" if isinstance(inner, IsNull) else "is not null"
        return Predicate(column=column, op=op)
    if isinstance(inner, In):
        values = tuple(inner.value)
        if not values or not all(isinstance(v, _PUSHABLE_VALUES) for v in values):
            return None
        predicate = Predicate(column=column, op="not in" if negate else "in", value=values)
    else:
        ops = {
            EqualTo: ("=", "!="), GreaterThan: (">", "<="), GreaterThanOrEqual: (">=", "<"),
            LessThan: ("<", ">="), LessThanOrEqual: ("<=", ">"),
        }  # fmt: skip
        pair = ops.get(type(inner))
        value = getattr(inner, "value", None)
        if pair is None or not isinstance(value, _PUSHABLE_VALUES) or value is None:
            return None
        predicate = Predicate(column=column, op=pair[1] if negate else pair[0], value=value)
    try:
        check_filter_types(schema, [predicate])
    except SchemaMismatchError:
        return None
    return predicate


class SplitPartition(InputPartition):
    """One split of a planned snapshot, read on an executor (picklable).

    Attributes:
        file_io: The table's FileIO.
        root: The table directory.
        identifier: ``"database.table"``.
        schema: The schema the rows are read in.
        split: The split (a bucket of one partition) to read.
        predicates: The pushed filter, applied exactly.
        snapshot_id: The snapshot read (the ``_snapshot_id`` of every row).
        columns: The table columns to read (``None``: all), from the schema
            the reader was given.
    """

    def __init__(
        self,
        *,
        file_io: FileIO,
        root: str,
        identifier: str,
        schema: TableSchema,
        split: Split,
        predicates: Sequence[Predicate],
        snapshot_id: int,
        columns: Sequence[str] | None = None,
    ) -> None:
        super().__init__(None)
        self.snapshot_id = snapshot_id
        self.columns = None if columns is None else tuple(columns)
        self.file_io = file_io
        self.root = root
        self.identifier = identifier
        self.schema = schema
        self.split = split
        self.predicates = tuple(predicates)

    def read(self) -> Iterator[pa.RecordBatch]:
        """Yield the split's rows exactly filtered, with ``_row_kind`` '+I', ``_snapshot_id``.

        Re-opens the table (reads its latest schema file) and reads through
        the table kind's read path (``FileStore.read_batches``).
        """
        table = Table(file_io=self.file_io, root=self.root, identifier=self.identifier)
        arrow = self.schema.arrow_schema
        names = [*(self.columns or arrow.names), *with_change_columns(pa.schema([])).names]
        batches = table.file_store(self.schema).read_batches(
            [self.split], read_schema=self.schema, columns=self.columns,
            predicates=self.predicates,
            evolution=table.schema_evolution(self.schema), schema_of=table.schema_manager.schema,
        )  # fmt: skip
        for batch in batches:
            n = batch.num_rows
            kinds = pa.array(["+I"] * n, pa.string())
            ids = pa.array([self.snapshot_id] * n, pa.int64())
            yield pa.RecordBatch.from_arrays([*batch.columns, kinds, ids], names=names)


class SnaplakeBatchReader(DataSourceReader):
    """Plans one snapshot on the driver; each split becomes one input partition.

    Spark pickles the reader before it calls :meth:`partitions`, so every
    partition carries what its executor needs. Only the table columns of
    ``schema`` are read: a query that gives ``.schema(...)`` (Spark's
    user-specified schema) reads those columns only, Spark's Python sources
    being told no projection otherwise.
    """

    def __init__(self, options: SnaplakeSourceOptions, schema: StructType) -> None:
        self.options = options
        self.out = arrow_schema_of(schema)
        self.predicates: list[Predicate] = []

    def _scan(self, table: Table) -> TableScan:
        o = self.options
        return table.new_scan(
            snapshot_id=o.snapshot_id, as_of=o.as_of, tag=o.tag, filter=self.predicates or None
        )

    def pushFilters(self, filters: list[Filter]) -> Iterator[Filter]:  # noqa: N802 - Spark's name
        """Take the filters snaplake evaluates identically; yield the others back to Spark."""
        schema = self._scan(self.options.table()).schema.arrow_schema
        for f in filters:
            predicate = _to_predicate(f, schema)
            if predicate is None:
                yield f
            else:
                self.predicates.append(predicate)

    def partitions(self) -> list[InputPartition]:
        """One :class:`SplitPartition` per split that survives pruning.

        Raises:
            SnapshotNotFoundError, TagNotFoundError: the time travel target does not exist.
        """
        table = self.options.table()
        scan = self._scan(table)
        if scan.snapshot is None:  # an empty table
            return []
        snapshot_id = scan.snapshot.id
        arrow = scan.schema.arrow_schema
        unknown = [n for n in self.out.names if n not in arrow.names and n not in _CHANGE_COLUMNS]
        if unknown:
            raise SchemaMismatchError(
                f"format('snaplake') schema names {unknown}, which {table.identifier} does not "
                f"have at snapshot {snapshot_id}; its columns: {arrow.names} (and "
                f"{list(_CHANGE_COLUMNS)})"
            )
        wanted = [n for n in arrow.names if n in self.out.names]
        columns = None if len(wanted) == len(arrow.names) else wanted
        out: list[InputPartition] = []
        for split in scan.plan():
            out.append(
                SplitPartition(
                    file_io=table.file_io,
                    root=table.root,
                    identifier=table.identifier,
                    schema=scan.schema,
                    split=split,
                    predicates=scan.predicates,
                    snapshot_id=snapshot_id,
                    columns=columns,
                )
            )
        return out

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Read one partition on an executor (nothing for the empty placeholder)."""
        if isinstance(partition, SplitPartition):
            for batch in partition.read():
                yield conform_batch(batch, self.out)


class SnaplakeDataSource(DataSource):
    """``format("snaplake")``: batch reads of a snapshot and a streaming changelog source.

    Options (case-insensitive): ``warehouse`` (required), ``s3.*`` catalog
    options; batch: ``snapshotId``, ``asOf`` (epoch ms or ISO-8601 with
    offset), ``tag``; stream: ``startingSnapshot`` (``earliest`` | ``latest``
    | id), ``mode`` (``auto`` | ``delta`` | ``changelog`` | ``diff``). The
    table is ``load("database.table")``.

    Errors raised on the driver (``InvalidOptionError``,
    ``TableNotFoundError``, ``SnapshotNotFoundError``, ``TagNotFoundError``)
    reach the caller inside Spark's analysis exception, named in its message.
    """

    @classmethod
    def name(cls) -> str:
        """``"snaplake"``."""
        return "snaplake"

    def schema(self) -> StructType:
        """The table's columns, then ``_row_kind`` (string) and ``_snapshot_id`` (bigint).

        The columns of the time-travel snapshot's schema, else the latest
        (a stream reads in the latest schema of its start).

        Raises:
            InvalidOptionError: a bad option (see :class:`SnaplakeSourceOptions`).
            TableNotFoundError: no such table.
            SnapshotNotFoundError, TagNotFoundError: no such time travel target.
        """
        streaming = _is_stream_options(self.options)
        opts = SnaplakeSourceOptions.parse(self.options, streaming=streaming)
        table = opts.table()
        if streaming:
            schema = table.schema()
        else:
            o = opts
            schema = table.new_scan(snapshot_id=o.snapshot_id, as_of=o.as_of, tag=o.tag).schema
        return spark_schema_of(with_change_columns(schema.arrow_schema), keep_nullability=True)

    def reader(self, schema: StructType) -> DataSourceReader:
        """The batch reader (options checked here)."""
        return SnaplakeBatchReader(
            SnaplakeSourceOptions.parse(self.options, streaming=False), schema
        )

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:  # noqa: N802
        """The stream reader: offsets are snapshot ids (:mod:`snaplake.spark.stream_source`)."""
        from snaplake.spark.stream_source import SnaplakeStreamReader

        return SnaplakeStreamReader(
            SnaplakeSourceOptions.parse(self.options, streaming=True), schema
        )


def _is_stream_options(options: Mapping[str, Any]) -> bool:
    """Whether the options are a stream's only (``schema()`` is not told which read it serves)."""
    return any(str(k).lower() in _STREAM_KEYS - _BATCH_KEYS for k in options)


def conform_batch(batch: pa.RecordBatch, out: pa.Schema) -> pa.RecordBatch:
    """``batch`` in the schema Spark expects: columns by name, cast; missing ones NULL.

    A table altered after the query resolved its schema (a stream) keeps the
    query's columns: added columns are left out, dropped ones read as NULL.
    """
    if batch.schema == out:
        return batch
    arrays = []
    for field in out:
        idx = batch.schema.get_field_index(field.name)
        column = batch.column(idx) if idx >= 0 else pa.nulls(batch.num_rows, field.type)
        arrays.append(column.cast(field.type))
    return pa.RecordBatch.from_arrays(arrays, schema=out)


def with_change_columns(schema: pa.Schema) -> pa.Schema:
    """``schema`` then ``_row_kind`` (string) and ``_snapshot_id`` (int64), as ``changes`` rows."""
    kind, snapshot = _CHANGE_COLUMNS
    return schema.append(pa.field(kind, pa.string())).append(pa.field(snapshot, pa.int64()))


def register_data_source(spark: SparkSession, *, filter_pushdown: bool = True) -> None:
    """Register ``format("snaplake")`` in ``spark`` (classic or Spark Connect).

    Spark looks Python data sources up per session: call this once after
    creating the session, before ``spark.read.format("snaplake")`` or
    ``spark.readStream.format("snaplake")``. Under Spark Connect the class is
    sent to the server, whose Python workers must import ``snaplake``.

    Args:
        spark: The session.
        filter_pushdown: Also set ``spark.sql.python.filterPushdown.enabled``
            to ``true`` in the session (Spark refuses a read from a Python
            source that implements ``pushFilters`` while it is off). Pass
            ``False`` to leave the session's conf alone (then set it yourself).

    Source: ``spark.dataSource.register`` (PySpark 4.0+, Connect included).
    """
    spark.dataSource.register(SnaplakeDataSource)
    if filter_pushdown:
        spark.conf.set(FILTER_PUSHDOWN_CONF, "true")
