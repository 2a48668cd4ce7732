"""Deletion-vector tables built by hand, for read tests (snaplake writes no vectors yet).

A table is written without deletion vectors, then :func:`commit_vectors` publishes a
DELETION_VECTORS index file per (partition, bucket) through a CommitMessage's
``DataIncrement.new_index_files`` and :func:`enable_deletion_vectors` adds a schema with
``deletion-vectors.enabled = true`` (what a Java or Spark engine would have done).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from tests.helpers import create_table, rows, write_and_commit

import snaplake
from snaplake.commit.message import CommitMessage, DataIncrement
from snaplake.store.format.deletion_vector import DeletionVector, write_deletion_vectors_index
from snaplake.store.format.index_file import IndexFileMeta
from snaplake.store.read.scan import Split

__all__ = [
    "append_dv_table",
    "append_positions",
    "commit_vectors",
    "enable_deletion_vectors",
    "pk_dv_table",
    "pk_positions",
    "rows_without",
    "vectors_by_split",
]


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


def rows_without(
    table: snaplake.Table, positions: Mapping[str, Sequence[int]], *, min_level: int = 0
) -> pa.Table:
    """The latest snapshot's rows read file by file with pyarrow, minus ``positions``.

    Every file's rows (of ``min_level`` and above) in file order, value columns only, the
    named positions dropped:
    the expected read of a table whose live files hold one version per key.
    """
    names = table.arrow_schema.names
    parts = []
    for split in table.new_scan().plan():
        for f, path in zip(split.files, split.paths, strict=True):
            if f.level < min_level:
                continue
            rows = pq.read_table(path, columns=names)
            keep = np.ones(rows.num_rows, dtype=bool)
            keep[list(positions.get(f.file_name, ()))] = False
            parts.append(rows.filter(pa.array(keep)).cast(table.arrow_schema))
    return pa.concat_tables(parts)


def append_positions(table: snaplake.Table) -> dict[str, list[int]]:
    """Rows to delete: three of the first file, one of the second, every third of the third."""
    files = [f for s in table.new_scan().plan() for f in s.files]
    every_third = list(range(0, files[2].row_count, 3))
    return {files[0].file_name: [0, 3, 4], files[1].file_name: [1],
            files[2].file_name: every_third}  # fmt: skip


def append_dv_table(root: Path, *, bucket: int, bitmap64: bool = False) -> snaplake.Table:
    """``db.t`` under ``root``: 180 rows in 3 commits, vectors on :func:`append_positions`."""
    options = {"bucket-key": "id"} if bucket > 0 else {}
    table = create_table(root, partition_keys=["month"], bucket=bucket, options=options)
    for start in (0, 60, 120):
        write_and_commit(table, rows(start, 60, months=2))
    commit_vectors(table, append_positions(table), bitmap64=bitmap64)
    enable_deletion_vectors(table)
    return snaplake.FileSystemCatalog(str(root)).get_table("db.t")


def pk_dv_table(
    root: Path, *, bitmap64: bool = False, options: dict[str, str] | None = None
) -> snaplake.Table:
    """``db.t`` under ``root``: a primary-key table with deletion vectors on.

    100 rows compacted to the top level, a level-0 upsert of ids 0..19 (distance -1),
    vectors on two top-level files (:func:`pk_positions`).
    """
    table = create_table(root, primary_keys=["id"], bucket=2)
    write_and_commit(table, rows(0, 100))
    table.compact(full=True)
    upsert = rows(0, 20).set_column(3, "distance", pa.array([-1.0] * 20))
    write_and_commit(table, upsert)
    commit_vectors(table, pk_positions(table), bitmap64=bitmap64)
    enable_deletion_vectors(table, **(options or {}))
    return snaplake.FileSystemCatalog(str(root)).get_table("db.t")


def pk_positions(table: snaplake.Table) -> dict[str, list[int]]:
    """Rows to delete: three of the first top-level file, one of the second."""
    top = [f for s in table.new_scan().plan() for f in s.files if f.level > 0]
    return {top[0].file_name: [0, 1, 5], top[1].file_name: [2]}
