"""Deletion-vector tables built by hand, for read tests (snaplake writes no vectors yet).

A table is written without deletion vectors, then :func:`commit_vectors` publishes a
DELETION_VECTORS index file per (partition, bucket) through a CommitMessage's
``DataIncrement.new_index_files`` and :func:`enable_deletion_vectors` adds a schema with
``deletion-vectors.enabled = true`` (what a Java or Spark engine would have done).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import snaplake
from snaplake.commit.message import CommitMessage, DataIncrement
from snaplake.store.format.deletion_vector import DeletionVector, write_deletion_vectors_index
from snaplake.store.format.index_file import IndexFileMeta
from snaplake.store.read.scan import Split

__all__ = ["commit_vectors", "enable_deletion_vectors", "rows_without", "vectors_by_split"]


def vectors_by_split(
    splits: Sequence[Split], positions: Mapping[str, Sequence[int]], *, bitmap64: bool = False
) -> dict[tuple[bytes, int, int], dict[str, DeletionVector]]:
    """``{(partition, bucket, total_buckets): {file name: vector}}`` for the named files."""
    out: dict[tuple[bytes, int, int], dict[str, DeletionVector]] = {}
    for split in splits:
        for f in split.files:
            if f.file_name in positions:
                key = (split.partition, split.bucket, split.total_buckets)
                out.setdefault(key, {})[f.file_name] = DeletionVector.from_positions(
                    list(positions[f.file_name]), bitmap64=bitmap64
                )
    return out


def commit_vectors(
    table: snaplake.Table,
    positions: Mapping[str, Sequence[int]],
    *,
    bitmap64: bool = False,
) -> list[IndexFileMeta]:
    """Publish vectors deleting ``positions`` (data file name → row positions) in one commit.

    One DELETION_VECTORS file per (partition, bucket) of the latest snapshot that holds a
    named file; returns the index files written.
    """
    splits = table.new_scan().plan()
    messages, metas = [], []
    for (partition, bucket, total), vectors in vectors_by_split(
        splits, positions, bitmap64=bitmap64
    ).items():
        meta = write_deletion_vectors_index(table.file_io, table.paths, vectors)
        metas.append(meta)
        messages.append(
            CommitMessage(
                partition=partition,
                bucket=bucket,
                total_buckets=total,
                data_increment=DataIncrement(new_index_files=(meta,)),
            )
        )
    table.new_commit(commit_user="dv").commit(messages)
    return metas


def enable_deletion_vectors(table: snaplake.Table, **options: str) -> None:
    """Add a schema that turns ``deletion-vectors.enabled`` on (plus ``options``)."""
    schema = table.schema()
    table.schema_manager.create(
        dataclasses.replace(
            schema,
            id=schema.id + 1,
            options={**schema.options, "deletion-vectors.enabled": "true", **options},
        )
    )


def rows_without(table: snaplake.Table, positions: Mapping[str, Sequence[int]]) -> pa.Table:
    """The latest snapshot's rows read file by file with pyarrow, minus ``positions``.

    Every file's rows in file order (value columns only), the named positions dropped:
    the expected read of a table whose live files hold one version per key.
    """
    names = table.arrow_schema.names
    parts = []
    for split in table.new_scan().plan():
        for f, path in zip(split.files, split.paths, strict=True):
            rows = pq.read_table(path, columns=names)
            keep = np.ones(rows.num_rows, dtype=bool)
            keep[list(positions.get(f.file_name, ()))] = False
            parts.append(rows.filter(pa.array(keep)).cast(table.arrow_schema))
    return pa.concat_tables(parts)
