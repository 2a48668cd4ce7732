"""Spark routing of primary-key rows: each row's Paimon bucket, then one task per bucket.

Fixed buckets (``bucket = N``) hash each row's bucket key as every Paimon
writer does; dynamic buckets (``bucket = -1``) are assigned by the writer, so
the rows of a partition all go to one task (bucket column 0), whose writer
restores the partition's HASH index and assigns them. Cross-partition tables
(``by_key``) send every row of a key to one task whatever its partition
(bucket column = key hash modulo :data:`KEY_GROUPS`): each task's writer
bootstraps the key map and alone moves its keys between partitions.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pyarrow as pa

from snaplake.store.format.bucket import bucket_ids
from snaplake.store.format.schema import TableSchema

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["BUCKET_COLUMN", "by_bucket"]


BUCKET_COLUMN = "__snaplake_bucket"
"""Column a primary-key write adds to repartition rows by Paimon bucket (then drops)."""

KEY_GROUPS = 1024
"""Key-hash groups of a cross-partition write (each goes to one task)."""


class _BucketTask:
    """``mapInArrow``: append each row's Paimon bucket (:data:`BUCKET_COLUMN`)."""

    def __init__(self, schema: TableSchema, *, by_key: bool = False) -> None:
        self.schema = schema
        self.by_key = by_key

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        keys, buckets = self.schema.bucket_keys, self.schema.core_options.bucket
        if self.by_key:  # cross-partition: the bucket key is the whole primary key
            buckets = KEY_GROUPS
        types = [self.schema.field_type(k) for k in keys]
        arrow = self.schema.arrow_schema
        for batch in batches:
            if buckets <= 0:  # dynamic buckets: one task per partition assigns them
                zeros = pa.array([0] * batch.num_rows, pa.int32())
                yield batch.append_column(BUCKET_COLUMN, zeros)
                continue
            columns = [batch.column(k).cast(arrow.field(k).type) for k in keys]
            ids = bucket_ids(pa.table(columns, names=keys), keys, types, buckets)
            yield batch.append_column(BUCKET_COLUMN, pa.array(ids, pa.int32()))


def by_bucket(df: DataFrame, schema: TableSchema, *, by_key: bool = False) -> DataFrame:
    """Repartition ``df`` by (partition keys, Paimon bucket): one task writes each bucket.

    With ``by_key`` (cross-partition tables) by key-hash group only.
    """
    from pyspark.sql.types import IntegerType, StructField, StructType

    fields = [*df.schema.fields, StructField(BUCKET_COLUMN, IntegerType(), nullable=False)]
    with_bucket = df.mapInArrow(_BucketTask(schema, by_key=by_key), StructType(fields))
    if by_key:
        return with_bucket.repartition(BUCKET_COLUMN)
    return with_bucket.repartition(*schema.partition_keys, BUCKET_COLUMN)
