"""Spark routing of primary-key rows: each row's Paimon bucket, then one task per bucket.

Fixed buckets (``bucket = N``) hash each row's bucket key as every Paimon
writer does; dynamic buckets (``bucket = -1``) are assigned by the writer, so
the rows of a partition all go to one task (bucket column 0), whose writer
restores the partition's HASH index and assigns them.
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


class _BucketTask:
    """``mapInArrow``: append each row's Paimon bucket (:data:`BUCKET_COLUMN`)."""

    def __init__(self, schema: TableSchema) -> None:
        self.schema = schema

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        keys, buckets = self.schema.bucket_keys, self.schema.core_options.bucket
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


def by_bucket(df: DataFrame, schema: TableSchema) -> DataFrame:
    """Repartition ``df`` by (partition keys, Paimon bucket): one task writes each bucket."""
    from pyspark.sql.types import IntegerType, StructField, StructType

    fields = [*df.schema.fields, StructField(BUCKET_COLUMN, IntegerType(), nullable=False)]
    with_bucket = df.mapInArrow(_BucketTask(schema), StructType(fields))
    return with_bucket.repartition(*schema.partition_keys, BUCKET_COLUMN)
