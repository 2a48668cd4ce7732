"""Read one snapshot of a snaplake table as a Spark DataFrame.

snaplake plans the read (manifests pruned by partition stats, files by
partition values and column statistics); Spark reads only the surviving
Parquet files. On a local warehouse that is Spark's own Parquet reader over
the file list; on other stores (S3 without a Hadoop connector) executors read
the files through the table's picklable FileIO with pyarrow (``mapInArrow``).
When some files were written under an older schema (after ``alter_table``),
the executors read every file with pyarrow and map those files to the read
schema by field id (renamed, widened, added, dropped columns), on a local
warehouse too. A table whose FileStore reads whole splits (a primary-key
table, merged on read) is read by the FileStore's split task on the
executors, whole buckets per task. The filter is then applied exactly by Spark.

Works on classic and Spark Connect sessions alike (under Connect, "Spark"
is the Connect server: its executors must reach the warehouse, local paths
included).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime
from functools import reduce
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from snaplake.errors import SchemaMismatchError
from snaplake.spark._common import is_connect, resolve_table, spark_schema_of
from snaplake.store.format.file_format import format_of_file
from snaplake.store.format.types import variable_binary_schema
from snaplake.store.io.file_io import FileIO
from snaplake.store.io.local_file_io import LocalFileIO
from snaplake.store.read.predicate import Predicate
from snaplake.store.read.schema_evolution import FileSchemaMapping
from snaplake.table import Table

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

__all__ = ["read"]

logger = logging.getLogger(__name__)


class _ReadTask:
    """``mapInArrow`` function: read the data files named in the ``path`` column.

    Used where Spark cannot reach the store itself (S3 without ``s3a``),
    cannot read the files (ORC and Avro data files: each is read with the
    reader of its format), or files need mapping from their schema: a
    ``schema_id`` column selects the file's :class:`FileSchemaMapping` from
    ``mappings``. Holds only picklable configuration.
    """

    def __init__(
        self,
        *,
        file_io: FileIO,
        schema: pa.Schema,
        mappings: Mapping[int, FileSchemaMapping] | None = None,
    ) -> None:
        self.file_io = file_io
        self.schema = schema
        self.mappings = dict(mappings or {})

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        out = variable_binary_schema(self.schema)  # Spark has no fixed-size binary
        for batch in self._read(batches):
            yield batch if batch.schema == out else batch.cast(out)

    def _read(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            ids = (
                batch.column("schema_id").to_pylist() if "schema_id" in batch.schema.names else None
            )
            for i, path in enumerate(batch.column("path").to_pylist()):
                mapping = self.mappings.get(ids[i]) if ids is not None else None
                fmt = format_of_file(path)
                if fmt.name != "parquet":  # ORC, Avro: the reader of the file's format
                    file_schema = mapping.file_arrow_schema if mapping else self.schema
                    with self.file_io.open_input(path) as f:
                        for part in fmt.iter_batches(f, file_schema):
                            yield from (mapping.apply(part) if mapping else part).to_batches()
                    continue
                with self.file_io.open_input(path) as f:
                    parquet = pq.ParquetFile(f)
                    if mapping is not None:  # written under another schema: map by field id
                        for part in parquet.iter_batches(columns=list(mapping.file_columns)):
                            part = part.cast(mapping.file_arrow_schema)
                            yield from mapping.apply(part).to_batches()
                        continue
                    present = [n for n in self.schema.names if n in parquet.schema_arrow.names]
                    for part in parquet.iter_batches(columns=present):
                        yield _conform(part, self.schema)


class _SplitsTask:
    """``mapInArrow`` function: run the FileStore's split read task on the ``split`` column.

    Each input row names a split by index; the task (picklable, from
    ``FileStore.split_read_task``) reads whole splits, e.g. merges whole
    buckets of a primary-key table, so the union of the tasks' rows is the
    table's view.
    """

    def __init__(
        self, *, task: Callable[[Sequence[int]], Iterator[pa.Table]], schema: pa.Schema
    ) -> None:
        self.task = task
        self.schema = schema

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        out = variable_binary_schema(self.schema)  # Spark has no fixed-size binary
        for batch in batches:
            for table in self.task(batch.column("split").to_pylist()):
                yield from table.cast(out).to_batches()


def _conform(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """Cast ``batch`` to ``schema``; columns missing from an older file become nulls."""
    arrays = []
    for f in schema:
        idx = batch.schema.get_field_index(f.name)
        if idx < 0:
            arrays.append(pa.nulls(batch.num_rows, f.type))
        else:
            arrays.append(batch.column(idx).cast(f.type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _to_column(p: Predicate) -> Column:
    """Translate one snaplake predicate into a Spark Column (SQL NULL semantics)."""
    from pyspark.sql import functions as F  # noqa: N812 - Spark's idiom

    col = F.col(p.column)
    op = p.op
    if op == "is null":
        return col.isNull()
    if op == "is not null":
        return col.isNotNull()
    if op == "in":
        return col.isin(list(p.value))
    if op == "not in":
        return ~col.isin(list(p.value)) & col.isNotNull()
    value = F.lit(p.value)
    comparisons: dict[str, Column] = {
        "=": col == value,
        "!=": col != value,
        "<": col < value,
        "<=": col <= value,
        ">": col > value,
        ">=": col >= value,
    }
    return comparisons[op]


def _parallelism(spark: SparkSession, files: int) -> int:
    """Tasks for reading ``files`` files through the FileIO: at most one per file.

    A classic session caps it at ``sparkContext.defaultParallelism``. A Spark
    Connect session has no ``sparkContext``: it uses the session conf
    ``spark.default.parallelism`` when the server sets it, else
    ``spark.sql.shuffle.partitions`` (the read repartitions, a shuffle),
    else one task per file.
    """
    if not is_connect(spark):
        return max(1, min(files, spark.sparkContext.defaultParallelism))
    for key in ("spark.default.parallelism", "spark.sql.shuffle.partitions"):
        value = spark.conf.get(key, None)
        if value is not None and value.strip().isdigit() and int(value) > 0:
            return max(1, min(files, int(value)))
    return max(1, files)


def read(
    spark: SparkSession,
    table: Table | str,
    *,
    snapshot_id: int | None = None,
    as_of: datetime | None = None,
    columns: Sequence[str] | None = None,
    filter: Any = None,  # the user-facing name, as in Table.to_arrow
    partition_filter: Mapping[str, Any] | None = None,
    warehouse: str | None = None,
    options: Mapping[str, str] | None = None,
) -> DataFrame:
    """Return one snapshot of a table as a DataFrame, planned and pruned by snaplake.

    The plan is fixed when this returns: later commits do not change the
    DataFrame, but the snapshot's files must stay until it has been read
    (an expiry that removes the snapshot meanwhile makes the read fail).

    Args:
        spark: The active session, classic or Spark Connect.
        table: A :class:`Table`, or ``"database.table"`` in ``warehouse``.
        snapshot_id: The snapshot to read (``None`` = latest).
        as_of: Read the newest snapshot committed at or before this
            timezone-aware time.
        columns: Columns to return, in this order (``None`` = all).
        filter: Row predicates as for ``Table.to_arrow``: ``("col", op,
            value)``, a list of them (AND) or ``{col: value}``. Used to prune
            files, then applied exactly.
        partition_filter: ``{partition_key: value}`` equalities.
        warehouse: Warehouse of an identifier.
        options: Catalog options (``s3.*``) for ``warehouse``.

    Returns:
        A DataFrame with the table's columns (or ``columns``) in the latest
        schema, or for ``snapshot_id``/``as_of`` in the schema that snapshot
        was committed with; Arrow types map as Spark's Arrow conversion does
        (``timestamp`` with a zone = ``TimestampType``, without =
        ``TimestampNTZType``); every column is nullable. ``df.inputFiles()``
        lists the files read on a local warehouse when all are in the read
        schema.

    Raises:
        SnapshotNotFoundError: the snapshot was never written or expired.
        SchemaMismatchError: an unknown column in ``columns`` or ``filter``.
        ValueError: both ``snapshot_id`` and ``as_of``, a naive ``as_of``, or a
            filter of the wrong shape.
        TableNotFoundError: no such table.

    Storage:
        Reads the snapshot, its manifest lists and the manifests that survive
        partition pruning; Spark reads the planned data files. Writes nothing.

    Source:
        Paimon's Spark ``PaimonScan`` (planning in the table format, reading
        with the engine's Parquet reader).
    """
    target = resolve_table(table, warehouse=warehouse, options=options)
    scan = target.new_scan(
        snapshot_id=snapshot_id,
        as_of=as_of,
        partition_filter=partition_filter,
        filter=filter,
        columns=columns,
    )
    snapshot = scan.snapshot
    arrow_schema = scan.schema.arrow_schema
    wanted = [p.column for p in scan.predicates] + list(columns or ())
    unknown = sorted({c for c in wanted if c not in arrow_schema.names})
    if unknown:
        raise SchemaMismatchError(
            f"unknown column(s) {unknown}; table {target.identifier} has {arrow_schema.names}"
        )
    spark_schema = spark_schema_of(arrow_schema)
    splits = scan.plan()
    paths = [p for s in splits for p in s.paths]
    logger.info(
        "spark read of %s snapshot %s: %d file(s) in %d split(s)",
        target.identifier,
        snapshot.id if snapshot is not None else None,
        len(paths),
        len(splits),
    )
    table_schema = scan.schema  # the latest, or with time travel the snapshot's
    # Files written under other schemas are mapped by field id on the executors.
    names = arrow_schema.names
    mappings = {
        f.schema_id: scan.evolution.mapping(f.schema_id, names)
        for s in splits
        for f in s.files
        if f.schema_id != scan.schema.id
    }
    mappings = {k: m for k, m in mappings.items() if not m.identity}
    # A kind that reads whole splits (merge on read) gets one task per group of splits.
    split_task = target.file_store(table_schema).split_read_task(
        splits, read_schema=table_schema, columns=names, schema_of=target.schema_manager.schema
    )
    if not paths:
        df = spark.createDataFrame([], spark_schema)
    elif split_task is not None:
        df = (
            spark.createDataFrame([(i,) for i in range(len(splits))], "split int")
            .repartition(_parallelism(spark, len(splits)))
            .mapInArrow(_SplitsTask(task=split_task, schema=arrow_schema), spark_schema)
        )
    elif (
        isinstance(target.file_io, LocalFileIO)
        and not mappings
        and all(p.endswith(".parquet") for p in paths)
    ):
        df = spark.read.schema(spark_schema).parquet(*(f"file://{p}" for p in paths))
    else:
        parallelism = _parallelism(spark, len(paths))
        files = [(p, f.schema_id) for s in splits for p, f in zip(s.paths, s.files, strict=True)]
        task = _ReadTask(file_io=target.file_io, schema=arrow_schema, mappings=mappings)
        df = (
            spark.createDataFrame(files, "path string, schema_id long")
            .repartition(parallelism)
            .mapInArrow(task, spark_schema)
        )
    if scan.predicates:
        df = df.where(reduce(lambda a, b: a & b, (_to_column(p) for p in scan.predicates)))
    if columns is not None:
        df = df.select(*columns)
    return df
