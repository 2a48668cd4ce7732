"""BucketBuffer: rows split by (partition, bucket), buffered, written, tracked until prepared.

The part every writer shares, whatever the table kind: :meth:`BucketBuffer.route`
splits conformed rows by partition and bucket with vectorised Arrow/numpy
code (a stable sort on one combined group id; no per-row Python),
:meth:`BucketBuffer.add` buffers them per bucket, :meth:`BucketBuffer.flush`
hands a bucket's rows to the writer's :data:`BucketFlush` (which writes the
files of its kind and records them in the bucket), and
:meth:`BucketBuffer.prepare_commit` turns the written files into one
CommitMessage per bucket. A failed flush deletes every file written since the
last ``prepare_commit`` and leaves the buffer refusing further use. When to
flush is the writer's choice (a bucket reaching ``target-file-size``, or all
buckets reaching ``write-buffer-size``).

Source: Paimon ``AbstractFileStoreWrite`` (writers per partition and bucket,
``prepareCommit``), ``TableWriteImpl`` (``writeAndReturn``: partition and
bucket of each row).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from snaplake.commit.message import CommitMessage, DataIncrement
from snaplake.store.format.binary_row import encode_binary_row
from snaplake.store.format.bucket import bucket_ids
from snaplake.store.format.data_file import EMPTY_BINARY_ROW, DataFileMeta
from snaplake.store.format.paths import PathFactory
from snaplake.store.format.schema import TableSchema
from snaplake.store.io.file_io import FileIO
from snaplake.write.table_write import abort_messages

__all__ = [
    "BucketAssign",
    "BucketBuffer",
    "BucketFlush",
    "BucketFlushMany",
    "BucketRange",
    "PendingBucket",
]

logger = logging.getLogger(__name__)


@dataclass(slots=True)
class PendingBucket:
    """One (partition, bucket) of a writer: rows not yet written, files not yet prepared.

    Attributes:
        partition: The partition as BinaryRow bytes (empty row when unpartitioned).
        partition_path: The partition's directory (``k=v/...``; ``""`` when unpartitioned).
        bucket: The bucket number (0 for a bucket-unaware append table).
        chunks: Buffered rows, in arrival order.
        nbytes: Arrow bytes of ``chunks``.
        files: Data files written since the last ``prepare_commit``.
        changelog_files: Changelog files written since the last ``prepare_commit``.
    """

    partition: bytes
    partition_path: str
    bucket: int
    chunks: list[pa.Table] = field(default_factory=list)
    nbytes: int = 0
    files: list[DataFileMeta] = field(default_factory=list)
    changelog_files: list[DataFileMeta] = field(default_factory=list)

    def message(self, total_buckets: int) -> CommitMessage:
        """The files written so far as a CommitMessage (``total_buckets``: option ``bucket``)."""
        return CommitMessage(
            partition=self.partition,
            bucket=self.bucket,
            total_buckets=total_buckets,
            data_increment=DataIncrement(
                new_files=tuple(self.files), changelog_files=tuple(self.changelog_files)
            ),
        )


BucketFlush = Callable[[PendingBucket, pa.Table], None]
"""A writer's file writer: writes ``rows`` (a bucket's buffered chunks, concatenated) as
files of its kind and appends their metadata to the bucket's ``files`` / ``changelog_files``.
On a failure it deletes what it wrote of ``rows`` and raises."""


BucketFlushMany = Callable[[Sequence[tuple[PendingBucket, pa.Table]]], None]
"""A writer's file writer for several buckets at once (``prepare_commit``): as
:data:`BucketFlush` for each (bucket, rows) pair, sharing the work it can; each bucket's
files are recorded in it as soon as they are complete, so a failure leaves only files
the bucket names (or none)."""


BucketRange = tuple[bytes, str, int, int, int]
"""``(partition, partition path, bucket, start, end)``: rows ``[start, end)`` of a routed
table belong to that (partition, bucket) (see :meth:`BucketBuffer.route_ranges`)."""


BucketAssign = Callable[[pa.Table, Sequence[tuple[bytes, int, int]]], npt.NDArray[np.int32]]
"""Dynamic buckets: the bucket of each row of a table whose rows ``[start, end)`` belong to
``partition`` (BinaryRow bytes), one ``(partition, start, end)`` per partition, assigning new
keys as it goes."""


class BucketBuffer:
    """The buckets of one writer: routing, buffering, flushing, preparing, aborting.

    Not thread-safe (a flush of several buckets runs them in threads; the
    ``flush`` function must allow that).

    Args:
        file_io: Storage of the table.
        paths: The table's PathFactory (file names, bucket directories).
        schema: The schema the writer writes with.
        flush: The writer's file writer (see :data:`BucketFlush`).
        assign: The buckets of a partition's rows for dynamic buckets (see
            :data:`BucketAssign`); ``None`` = the schema's fixed buckets
            (``bucket > 0``), else bucket 0.
        flush_many: Writes several buckets at once (see
            :data:`BucketFlushMany`); ``None`` = ``flush`` per bucket, in threads.

    Source: Paimon ``AbstractFileStoreWrite``.
    """

    def __init__(
        self,
        *,
        file_io: FileIO,
        paths: PathFactory,
        schema: TableSchema,
        flush: BucketFlush,
        assign: BucketAssign | None = None,
        flush_many: BucketFlushMany | None = None,
    ) -> None:
        self.file_io = file_io
        self.paths = paths
        self.schema = schema
        self._flush_rows = flush
        self._flush_many = flush_many
        self._assign = assign
        self._num_buckets = schema.core_options.bucket
        self._bucket_key = list(schema.bucket_keys)
        self._buckets: dict[tuple[bytes, int], PendingBucket] = {}
        self._closed = False
        self._failed: BaseException | None = None

    @property
    def nbytes(self) -> int:
        """Arrow bytes buffered over all buckets."""
        return sum(b.nbytes for b in self._buckets.values())

    def largest(self) -> PendingBucket:
        """The bucket holding the most buffered bytes (there must be one)."""
        return max(self._buckets.values(), key=lambda b: b.nbytes)

    def route(self, table: pa.Table) -> Iterator[tuple[bytes, str, int, pa.Table]]:
        """Split conformed rows into (partition bytes, partition path, bucket, rows) slices.

        The slices of :meth:`route_ranges`, in its order.

        Raises:
            UnsupportedTypeError: a partition value cannot be encoded.
            InvalidOptionError: a dynamic-bucket partition ran out of bucket ids.
        """
        grouped, ranges = self.route_ranges(table)
        for partition, path, bucket, s, e in ranges:
            yield partition, path, bucket, grouped.slice(s, e - s)

    def route_ranges(self, table: pa.Table) -> tuple[pa.Table, list[BucketRange]]:
        """``table``'s rows grouped by (partition, bucket), and the group of each row range.

        Fixed buckets hash the bucket key of every row at once; with an
        ``assign`` (dynamic buckets) the rows are split by partition first and
        each partition's rows get their buckets from it. The rows of a group
        keep their order; groups come partition by partition (in the order of
        first appearance, or as the table holds them when already grouped),
        buckets ascending within a dynamic partition. One stable sort and one
        ``take`` at most per step (none when the rows are grouped already).

        Args:
            table: Rows holding the schema's partition and bucket-key columns
                (conformed to their types); extra columns travel along untouched.

        Returns:
            The grouped rows and one :data:`BucketRange` per group, in row order.

        Raises:
            UnsupportedTypeError: a partition value cannot be encoded.
            InvalidOptionError: a dynamic-bucket partition ran out of bucket ids.
        """
        if table.num_rows == 0:
            return table, []
        keys = list(self.schema.partition_keys)
        buckets = None
        if self._num_buckets > 0:
            buckets = bucket_ids(
                table,
                self._bucket_key,
                [self.schema.field_type(k) for k in self._bucket_key],
                self._num_buckets,
            ).astype(np.int64)
        types = self.schema.partition_types
        grouped, buckets, starts, ends = _grouped(table, keys, buckets)
        parts = []
        for s in starts:
            values = tuple(grouped.column(k)[s].as_py() for k in keys)
            partition = encode_binary_row(values, types) if keys else EMPTY_BINARY_ROW
            parts.append((partition, self.schema.partition_path(values)))
        if self._assign is None:
            return grouped, [
                (partition, path, int(buckets[s]) if buckets is not None else 0, s, e)
                for (partition, path), s, e in zip(parts, starts, ends, strict=True)
            ]
        ranges = [(p, s, e) for (p, _), s, e in zip(parts, starts, ends, strict=True)]
        assigned = self._assign(grouped, ranges).astype(np.int64)  # one key hash per batch
        width = int(assigned.max(initial=0)) + 1
        owner = np.repeat(np.arange(len(parts), dtype=np.int64), np.subtract(ends, starts))
        grouped, combined, starts, ends = _grouped(grouped, (), owner * width + assigned)
        assert combined is not None
        return grouped, [
            (*parts[int(combined[s]) // width], int(combined[s]) % width, s, e)
            for s, e in zip(starts, ends, strict=True)
        ]

    def add(
        self, partition: bytes, partition_path: str, bucket: int, rows: pa.Table
    ) -> PendingBucket:
        """Buffer ``rows`` (one bucket's, from :meth:`route`) and return their bucket."""
        found = self._buckets.get((partition, bucket))
        if found is None:
            found = PendingBucket(partition=partition, partition_path=partition_path, bucket=bucket)
            self._buckets[(partition, bucket)] = found
        found.chunks.append(rows)
        found.nbytes += rows.nbytes
        return found

    def check_usable(self) -> None:
        """Refuse a closed or failed writer.

        Raises:
            ValueError: the writer was closed, or a flush failed before.
        """
        if self._closed:
            raise ValueError("this TableWrite is closed; create a new one with table.new_write()")
        if self._failed is not None:
            raise ValueError(
                "this TableWrite failed writing its data files "
                f"({type(self._failed).__name__}: {self._failed}); it deleted the files it had "
                "written since the last prepare_commit and dropped its buffered rows: write "
                "those rows again with a new writer from table.new_write()"
            ) from self._failed

    def flush(self, buckets: Sequence[PendingBucket]) -> None:
        """Write the buffered rows of ``buckets`` (in parallel when several).

        Raises:
            BaseException: whatever a flush raised, after :meth:`discard`.

        Storage: writes the buckets' files (``flush``); on a failure deletes
        every file written since the last ``prepare_commit``.
        """
        try:
            if len(buckets) > 1 and self._flush_many is not None:
                self._flush_many([(b, self._take_rows(b)) for b in buckets if b.chunks])
            elif len(buckets) > 1:  # encoding (pyarrow) releases the GIL: write buckets in parallel
                with ThreadPoolExecutor(max_workers=min(4, os.cpu_count() or 1)) as pool:
                    list(pool.map(self._flush_one, buckets))  # the pool waits for every flush
            else:
                for bucket in buckets:
                    self._flush_one(bucket)
        except BaseException as exc:
            self.discard(exc)
            raise

    def _flush_one(self, bucket: PendingBucket) -> None:
        if bucket.chunks:
            self._flush_rows(bucket, self._take_rows(bucket))

    @staticmethod
    def _take_rows(bucket: PendingBucket) -> pa.Table:
        """The bucket's buffered rows, concatenated; the buffer is left empty."""
        rows = pa.concat_tables(bucket.chunks)
        bucket.chunks, bucket.nbytes = [], 0
        return rows

    def discard(self, exc: BaseException, messages: Sequence[CommitMessage] = ()) -> None:
        """After ``exc``: delete the unprepared files (and ``messages``'), refuse further use.

        Adds a note to ``exc`` saying what was deleted; a failed delete is
        logged (orphan clean removes the files), never raised.

        Storage: deletes the data and changelog files written since the last
        ``prepare_commit`` and those ``messages`` add.
        """
        self._failed = exc
        files = sum(len(b.files) + len(b.changelog_files) for b in self._buckets.values())
        files += sum(len(m.added_files()) for m in messages)
        try:
            self.abort(messages)
        except Exception:  # the write's own error is the one to report
            logger.warning(
                "could not delete the data files of a failed write; orphan clean removes them",
                exc_info=True,
            )
            return
        deleted = (
            f"deleted the {files} data file(s) it had written since the last prepare_commit and "
            if files
            else ""
        )
        exc.add_note(
            f"snaplake: the writer {deleted}dropped its buffered rows; write them again with a "
            "new writer"
        )

    def prepare_commit(self) -> list[CommitMessage]:
        """Flush every bucket; return one CommitMessage per bucket that has files.

        Raises:
            ValueError: the writer failed before.
            BaseException: whatever a flush raised (see :meth:`flush`).
        """
        if self._failed is not None:
            self.check_usable()
        buckets = list(self._buckets.values())
        self.flush(buckets)
        messages = [b.message(self._num_buckets) for b in buckets if b.files or b.changelog_files]
        self._buckets.clear()
        return messages

    def abort(self, messages: Sequence[CommitMessage] = ()) -> None:
        """Delete the files of ``messages`` and the unprepared ones; drop the buffered rows.

        Storage: deletes data and changelog files only (see :func:`abort_messages`).
        """
        pending = [
            b.message(self._num_buckets)
            for b in self._buckets.values()
            if b.files or b.changelog_files
        ]
        self._buckets.clear()
        abort_messages(self.file_io, self.paths, self.schema, [*messages, *pending])

    def close(self) -> None:
        """Drop buffered rows and refuse further use (written files stay until aborted)."""
        self._buckets.clear()
        self._closed = True


def _grouped(
    table: pa.Table, keys: Sequence[str], buckets: np.ndarray | None
) -> tuple[pa.Table, np.ndarray | None, list[int], list[int]]:
    """``table`` and ``buckets`` with each group contiguous; the groups' start and end rows.

    Groups are values of ``keys`` (in the order of first appearance) and, within
    them, ``buckets`` ascending; ``buckets`` ``None`` = one bucket. Vectorised:
    one stable sort of a combined group id, skipped (no copy) when the rows
    are grouped already.
    """
    if not keys and buckets is None:
        return table, None, [0], [table.num_rows]
    group = _group_ids(table, keys, buckets)
    steps = np.diff(group)
    if not (steps >= 0).all():  # already grouped (e.g. sorted by partition): no copy
        order = np.argsort(group, kind="stable")
        group = group[order]
        table = table.take(pa.array(order))
        if buckets is not None:
            buckets = buckets[order]
        steps = np.diff(group)
    starts = np.concatenate(([0], np.flatnonzero(steps) + 1))
    ends = np.concatenate((starts[1:], [len(group)]))
    return table, buckets, starts.tolist(), ends.tolist()


def _group_ids(table: pa.Table, keys: Sequence[str], buckets: np.ndarray | None) -> np.ndarray:
    """One int64 per row, equal for rows of the same (partition, bucket)."""
    group = np.zeros(table.num_rows, dtype=np.int64)
    for key in keys:
        encoded = pc.dictionary_encode(table.column(key).combine_chunks())
        codes = encoded.indices.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64) + 1
        group = group * (len(encoded.dictionary) + 1) + codes
    if buckets is not None:
        group = group * (int(buckets.max(initial=0)) + 1) + buckets
    return group
