"""PostponeBucketTableWrite: a postpone-bucket table's writer (pending level-0 files, bucket -2).

A table with ``bucket = -2`` defers bucket assignment to compaction: its
writers put every row, unsorted and unmerged in arrival order, into level-0
files of the partition's ``bucket-postpone`` directory (manifest bucket -2,
``_TOTAL_BUCKETS = -2``), with no changelog and no index. The files are Avro
with ``metadata.stats-mode = none`` whenever Avro can hold the columns (else
the table's ``file.format``), named with the prefix
``<data-file.prefix>-u-<commitUser>-s-<writeId>-w-`` so that compaction reads
each writer's files in the order it wrote them. Sequence numbers stay -1
(compaction numbers the rows when it assigns them to real buckets). Batch
readers skip these files; the rows become visible once a compaction
(:mod:`snaplake.compaction.postpone_compact`) has assigned them.

Validation (columns, row kinds, ``ignore-delete``, retractions the merge
engine refuses) is the key-value writer's: this writer is a
:class:`~snaplake.write.kv_write.KeyValueTableWrite` whose buckets are the
postpone bucket and whose flush writes the rows as they came.

Source: Paimon ``PostponeBucketFileStoreWrite`` (Avro, stats mode, prefix,
no restore), ``PostponeBucketWriter`` (level-0 files, no merge, new files only).
"""

from __future__ import annotations

import dataclasses
import random

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from snaplake.store.format.data_file import FileSource
from snaplake.store.format.file_format import file_format
from snaplake.store.format.paths import POSTPONE_BUCKET, PathFactory
from snaplake.store.format.schema import TableSchema
from snaplake.store.io.file_io import FileIO
from snaplake.write.bucket_buffer import PendingBucket
from snaplake.write.kv_file_writer import KeyValueFileWriter
from snaplake.write.kv_write import KeyValueTableWrite

__all__ = ["PostponeBucketTableWrite", "postpone_file_schema", "writer_prefix"]

_UNKNOWN_SEQUENCE = -1
"""Sequence number of a pending row (Paimon ``KeyValue.UNKNOWN_SEQUENCE``)."""

_WRITER_MARK = "-w-"


def postpone_file_schema(schema: TableSchema, *, commit_user: str, write_id: int) -> TableSchema:
    """``schema`` with the options of one writer's pending files (its id and columns kept).

    Avro (``file.format = avro``, ``metadata.stats-mode = none``) when Avro
    can hold the columns, and ``data-file.prefix`` =
    ``<data-file.prefix>-u-<commit_user>-s-<write_id>-w-``.

    Source: Paimon ``PostponeBucketFileStoreWrite`` (constructor).
    """
    opts = schema.core_options
    options = dict(schema.options)
    if file_format("avro").type_refusal(schema.value_types) is None:
        options["file.format"] = "avro"
        options["metadata.stats-mode"] = "none"
    options["data-file.prefix"] = f"{opts.data_file_prefix}-u-{commit_user}-s-{write_id}-w-"
    return dataclasses.replace(schema, options=options)


def writer_prefix(file_name: str) -> str:
    """The prefix a postpone writer's files share (up to and including the last ``-w-``).

    Files of other writers (no ``-w-`` in the name) are their own group.

    Source: Paimon ``PostponeBucketFileStoreWrite.getWriterPrefix``.
    """
    cut = file_name.rfind(_WRITER_MARK)
    return file_name if cut < 0 else file_name[: cut + len(_WRITER_MARK)]


class PostponeBucketTableWrite(KeyValueTableWrite):
    """The :class:`~snaplake.write.table_write.TableWrite` of a postpone-bucket table.

    Built by ``PostponeBucketFileStore.new_write``. Same API, validation and
    failure rules as :class:`~snaplake.write.kv_write.KeyValueTableWrite`;
    rows are buffered per partition in arrival order and written, when
    ``write-buffer-size`` is reached or at ``prepare_commit``, as level-0
    files of bucket -2 rolled at ``target-file-size``. Each message holds
    new files only (no changelog, no compaction).

    Args:
        file_io: Storage of the table.
        paths: The table's PathFactory.
        schema: The table schema (``bucket = -2``).
        commit_user: Goes into the file names (``-u-<commit_user>-``).
        write_id: Goes into the file names (``-s-<write_id>-``); ``None`` =
            a random non-negative 31-bit number, as a Java writer without a
            write id picks.

    Raises:
        UnsupportedTableError: the table uses something snaplake cannot write.
        InvalidOptionError: an unknown merge engine or aggregate function.

    Source: Paimon ``PostponeBucketFileStoreWrite`` / ``PostponeBucketWriter``.
    """

    def __init__(
        self,
        *,
        file_io: FileIO,
        paths: PathFactory,
        schema: TableSchema,
        commit_user: str,
        write_id: int | None = None,
    ) -> None:
        super().__init__(
            file_io=file_io, paths=paths, schema=schema, commit_user=commit_user,
            restore_sequences=dict,
        )  # fmt: skip
        wid = random.randrange(2**31 - 1) if write_id is None else write_id
        self.file_schema = postpone_file_schema(schema, commit_user=commit_user, write_id=wid)

    _FLUSH_SORTS = False  # rows are written as they came

    def _buffer_bucket(self, bucket: int) -> int:
        """Every row is buffered for bucket -2 (``bucket`` from routing is ignored)."""
        return POSTPONE_BUCKET

    def _sequence_numbers(self, partition: bytes, bucket: int, rows: int) -> npt.NDArray[np.int64]:
        """Postpone files carry no sequence numbers: -1 for every row (assigned at compaction)."""
        return np.full(rows, _UNKNOWN_SEQUENCE, dtype=np.int64)

    def _write_level0_runs(self, pending: PendingBucket, data: pa.Table) -> None:
        """Write ``data`` as it came (no sort, no merge) as level-0 files of bucket -2."""
        writer = KeyValueFileWriter(
            file_io=self.file_io,
            paths=self.paths,
            schema=self.file_schema,
            partition_path=pending.partition_path,
            bucket=POSTPONE_BUCKET,
            level=0,
            file_source=FileSource.APPEND,
            target_file_size=self._target,
            small=True,
        )
        try:
            for batch in data.to_batches(max_chunksize=65_536):
                writer.write(pa.Table.from_batches([batch], schema=data.schema))
            written = writer.close()
        except BaseException:
            writer.abort()
            raise
        pending.files.extend(w.meta for w in written)
