"""TableWrite: Arrow data -> data files per (partition, bucket) -> CommitMessages.

``write_arrow`` validates the data against the table schema before any file
is written, splits rows by partition and bucket with vectorised Arrow/numpy
code (a stable sort on one combined group id; no per-row Python), buffers
per bucket and writes data files (``file.format``: Parquet, ORC or Avro, via
:mod:`snaplake.store.format.file_format`) that roll at ``target-file-size``.
``prepare_commit`` flushes and returns one CommitMessage per (partition,
bucket); the files stay invisible until a commit publishes them. It never
commits.

Source: Paimon ``TableWriteImpl`` / ``AppendOnlyWriter`` / ``RollingFileWriter``
and pypaimon ``DataWriter`` (file naming, sequence ranges, stats).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs

from snaplake.commit.message import CommitMessage, DataIncrement
from snaplake.errors import SchemaMismatchError, UnsupportedTableError
from snaplake.mergetree.kv import parse_row_kinds
from snaplake.options import Operation
from snaplake.store.format.binary_row import encode_binary_row
from snaplake.store.format.bucket import bucket_ids
from snaplake.store.format.data_file import (
    EMPTY_BINARY_ROW,
    EMPTY_STATS,
    DataFileMeta,
    FileSource,
    SimpleStats,
    creation_time_now_ms,
)
from snaplake.store.format.file_format import DataFileSpec
from snaplake.store.format.paths import PathFactory
from snaplake.store.format.schema import TableSchema
from snaplake.store.format.stats import SimpleStatsParts, compute_value_stats
from snaplake.store.io.file_io import FileIO
from snaplake.store.support import check_supported

__all__ = [
    "TableWrite",
    "abort_messages",
    "arrow_type_fits",
    "DataFileOutput",
    "conform_to_schema",
    "new_data_file_meta",
    "open_data_file",
    "write_data_file",
]

logger = logging.getLogger(__name__)

_ROWS_PER_SLICE = 131_072


def _family(t: pa.DataType) -> str:
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return "string"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        return "binary"
    if pa.types.is_fixed_size_binary(t):
        return "binary"
    if pa.types.is_signed_integer(t):
        return "int"
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_list_view(t):
        return "list"
    return str(t)


def arrow_type_fits(actual: pa.DataType, expected: pa.DataType) -> bool:
    """Tell whether Arrow data of type ``actual`` is written into a column of type ``expected``.

    True for the same type, narrower signed integers, any string or binary
    flavour (``large_``/``_view``), lists of fitting elements, and timestamps
    of the same unit and time-zone-ness. Binary data fits a BINARY(n)
    column (``fixed_size_binary(n)``) when every value has n bytes, which the
    cast in :func:`conform_to_schema` checks; ``fixed_size_binary`` data
    fits any VARBINARY/BYTES column.
    """
    if actual == expected:
        return True
    if pa.types.is_fixed_size_binary(expected):
        return _family(actual) == "binary"
    fa, fe = _family(actual), _family(expected)
    if fa != fe:
        # timestamps: same unit and same tz-ness; zone names may differ
        if pa.types.is_timestamp(actual) and pa.types.is_timestamp(expected):
            return actual.unit == expected.unit and (actual.tz is None) == (expected.tz is None)
        return False
    if fa == "int":
        return bool(actual.bit_width <= expected.bit_width)
    if fa == "list":
        return arrow_type_fits(actual.value_type, expected.value_type)
    return fa in ("string", "binary")


def conform_to_schema(data: pa.Table | pa.RecordBatch, schema: TableSchema) -> pa.Table:
    """Return ``data`` with the table's column order and exact Arrow types.

    Args:
        data: Rows to write; columns matched by name (any order). Strings may
            be ``string``/``large_string``/``string_view``; integers may be
            narrower than the column; everything else must match exactly.
        schema: The table schema to conform to.

    Raises:
        TypeError: ``data`` is not a ``pa.Table`` or ``pa.RecordBatch``.
        SchemaMismatchError: a column is missing or extra, a type cannot be
            stored in the column without loss, or a NOT NULL column has nulls.
            Raised before any file is written.
    """
    if not isinstance(data, pa.Table | pa.RecordBatch):
        raise TypeError(
            f"expected a pyarrow.Table or pyarrow.RecordBatch, got {type(data).__name__}; "
            "build one with pa.table({...}), pa.Table.from_pylist(rows) or "
            "pa.Table.from_pandas(df)"
        )
    table = pa.Table.from_batches([data]) if isinstance(data, pa.RecordBatch) else data
    expected = schema.arrow_schema
    names = set(table.column_names)
    missing = [n for n in expected.names if n not in names]
    extra = [n for n in table.column_names if n not in set(expected.names)]
    if missing or extra:
        raise SchemaMismatchError(
            f"data columns do not match table columns: missing {missing}, unexpected {extra}; "
            f"the table has {expected.names}"
        )
    if len(names) != len(table.column_names):
        raise SchemaMismatchError(f"data has repeated column names: {table.column_names}")
    columns = []
    for f in expected:
        col = table.column(f.name)
        if not arrow_type_fits(col.type, f.type):
            raise SchemaMismatchError(
                f"column {f.name!r} has type {col.type} but the table stores {f.type}; "
                f"cast it (e.g. pc.cast(col, {f.type!r})) before writing"
            )
        if not f.nullable and col.null_count:
            raise SchemaMismatchError(
                f"column {f.name!r} is NOT NULL in the table but the data has "
                f"{col.null_count} null(s); fill or drop them before writing"
            )
        columns.append(col if col.type == f.type else _cast_column(col, f))
    return pa.Table.from_arrays(columns, schema=expected)


def _cast_column(col: pa.ChunkedArray, field: pa.Field) -> pa.ChunkedArray:
    """Cast a fitting column; BINARY(n) refuses values of another length.

    Raises:
        SchemaMismatchError: a value does not have the n bytes of a BINARY(n)
            column (``fixed_size_binary(n)``).
    """
    try:
        return col.cast(field.type)
    except pa.ArrowInvalid as exc:
        raise SchemaMismatchError(
            f"column {field.name!r} is {field.type} (Paimon BINARY(n): exactly n bytes per "
            f"value) but the data has values of another length ({exc}); pad or trim them, or "
            "store them in a BYTES column"
        ) from exc


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


@dataclass(slots=True)
class DataFileOutput:
    """Where :func:`open_data_file` lets a data file's bytes be written.

    Attributes:
        stream: A writable binary stream (a pyarrow ``NativeFile`` or a
            file-like object) for a format writer (``DataFileSpec.write`` / ``open_writer``).
        size_bytes: The file's size, set when the ``with`` block has ended.
    """

    stream: Any
    size_bytes: int = 0


@contextmanager
def open_data_file(file_io: FileIO, path: str, *, size_hint: int) -> Iterator[DataFileOutput]:
    """Open a new data file at ``path``; the file exists once the ``with`` block ends.

    With ``0 < size_hint <= file_io.buffered_write_max_bytes`` (bytes; an
    upper estimate of the file) the bytes are kept in memory and created with
    one ``FileIO.write_output`` (on S3 one ``PutObject`` instead of a
    three-request multipart upload); otherwise they are streamed, through the
    FileIO's pyarrow filesystem when it has one. If the block raises, nothing
    is created by the buffered path; a streamed file may be left partly
    written (callers delete ``path``).

    Raises:
        StorageError: the storage failed (``StorageAccessError`` for refused
            credentials); pyarrow's ``OSError`` s are translated by
            ``FileIO.translate_error``, ``write_output`` raises typed errors.

    Storage: creates ``path`` (a unique name; never overwritten).
    """
    limit_bytes = file_io.buffered_write_max_bytes
    if limit_bytes > 0 and size_hint <= limit_bytes:
        buffer = pa.BufferOutputStream()
        out = DataFileOutput(stream=buffer)
        yield out
        body = buffer.getvalue()
        file_io.write_output(path, body.to_pybytes())
        out.size_bytes = int(body.size)
        return
    arrow = file_io.arrow_filesystem()
    if arrow is None:
        with file_io.open_output(path) as f:
            out = DataFileOutput(stream=f)
            yield out
            out.size_bytes = int(f.tell())
        return
    fs, prefix = arrow
    target = path.removeprefix(prefix)
    try:
        if isinstance(fs, pafs.LocalFileSystem):
            os.makedirs(os.path.dirname(target), exist_ok=True)
        with fs.open_output_stream(target) as sink:
            out = DataFileOutput(stream=sink)
            yield out
            out.size_bytes = int(sink.tell())
    except OSError as exc:  # pyarrow's own errors: typed by the FileIO
        error = file_io.translate_error(exc, path=path, operation="write")
        if error is exc:
            raise
        raise error from exc


def write_data_file(*, file_io: FileIO, path: str, data: pa.Table, spec: DataFileSpec) -> int:
    """Write ``data`` as one data file at ``path`` as ``spec`` says; return its size in bytes.

    ``spec`` gives the format (Parquet, ORC, Avro; ``path`` must carry its
    extension), compression and zstd level. The file is built in memory and
    created in one request when ``data.nbytes`` (an upper estimate: the file
    is smaller than the Arrow data) allows it, else streamed
    (:func:`open_data_file`).

    Raises:
        StorageError: the storage failed (see :func:`open_data_file`).

    Storage: creates ``path`` (a unique name; never overwritten).
    """
    with open_data_file(file_io, path, size_hint=data.nbytes) as out:
        spec.write(data, out.stream)
    return out.size_bytes


def new_data_file_meta(
    *,
    file_name: str,
    size_bytes: int,
    row_count: int,
    stats: SimpleStatsParts,
    schema_id: int,
    min_sequence_number: int,
    max_sequence_number: int,
    file_source: FileSource,
) -> DataFileMeta:
    """Describe a freshly written append-table data file (level 0, no keys).

    Args:
        file_name: Bare file name (``data-<uuid>-<n>.parquet``).
        size_bytes: File size in bytes.
        row_count: Rows in the file.
        stats: Value stats of every column (from ``compute_value_stats``).
        schema_id: Schema the file was written with.
        min_sequence_number: First sequence number of the file's rows.
        max_sequence_number: Last sequence number (>= the first).
        file_source: APPEND for writers, COMPACT for compaction outputs.

    Source: Paimon ``DataFileMeta.forAppend`` (empty key stats, level 0).
    """
    return DataFileMeta(
        file_name=file_name,
        file_size_bytes=size_bytes,
        row_count=row_count,
        min_key=EMPTY_BINARY_ROW,
        max_key=EMPTY_BINARY_ROW,
        key_stats=EMPTY_STATS,
        value_stats=SimpleStats(
            min_values=stats.min_values,
            max_values=stats.max_values,
            null_counts=stats.null_counts,
        ),
        min_sequence_number=min_sequence_number,
        max_sequence_number=max(min_sequence_number, max_sequence_number),
        schema_id=schema_id,
        level=0,
        extra_files=(),
        creation_time_ms=creation_time_now_ms(),
        delete_row_count=0,
        embedded_index=None,
        file_source=file_source,
        value_stats_cols=None,
        external_path=None,
    )


@dataclass(slots=True)
class _BucketBuffer:
    partition: bytes
    partition_path: str
    bucket: int
    chunks: list[pa.Table] = field(default_factory=list)
    nbytes: int = 0
    files: list[DataFileMeta] = field(default_factory=list)
    changelog_files: list[DataFileMeta] = field(default_factory=list)

    def increment(self) -> DataIncrement:
        """The files written so far, as a DataIncrement."""
        return DataIncrement(
            new_files=tuple(self.files), changelog_files=tuple(self.changelog_files)
        )


class TableWrite:
    """Writes Arrow data into a table's data files and prepares CommitMessages.

    Not thread-safe; use one per task. Reusable: after ``prepare_commit`` it
    starts collecting the next batch.

    A failure while writing data files (a full disk, refused credentials, a
    merge error of a primary-key flush) leaves no files behind: the writer
    deletes every data file it wrote since the last ``prepare_commit``, drops
    its buffered rows, re-raises, and from then on refuses ``write_arrow`` and
    ``prepare_commit`` (``ValueError``); write those rows again with a new
    writer. Messages already returned by ``prepare_commit`` are not touched.

    Args:
        file_io: Storage of the table.
        paths: The table's PathFactory.
        schema: The table schema to write with (its id goes into every file).
        commit_user: Recorded for logs only (the commit carries the user).

    Raises:
        UnsupportedTableError: the table uses something snaplake cannot write
            (:func:`snaplake.store.support.check_supported`).
        UnsupportedTableError: ``schema`` has primary keys (their writer is
            :class:`snaplake.write.kv_write.KeyValueTableWrite`).
    """

    _writes_key_value: ClassVar[bool] = False

    def __init__(
        self, *, file_io: FileIO, paths: PathFactory, schema: TableSchema, commit_user: str
    ) -> None:
        if schema.primary_keys and not self._writes_key_value:
            raise UnsupportedTableError(
                f"TableWrite writes append tables; this table has primary keys "
                f"{list(schema.primary_keys)}: get its writer from table.new_write()",
                feature="primary-key table",
                operation="write",
            )
        self.file_io = file_io
        self.paths = paths
        self.schema = schema
        self.commit_user = commit_user
        check_supported(schema, Operation.WRITE)
        opts = schema.core_options
        self._num_buckets = opts.bucket
        self._bucket_key = list(schema.bucket_keys)
        self._target = opts.target_file_size_bytes
        self._spec = DataFileSpec.from_options(opts)
        self._buffers: dict[tuple[bytes, int], _BucketBuffer] = {}
        self._next_sequence = 0
        self._sequence_lock = threading.Lock()
        self._closed = False
        self._failed: BaseException | None = None

    def write_arrow(
        self,
        data: pa.Table | pa.RecordBatch,
        *,
        row_kinds: pa.Array | pa.ChunkedArray | Sequence[object] | None = None,
    ) -> None:
        """Buffer ``data`` for the next ``prepare_commit``.

        Args:
            data: A ``pa.Table`` or ``pa.RecordBatch`` whose columns match the
                table schema by name (see :func:`conform_to_schema`); any
                number of rows. Buffered per (partition, bucket) until about
                ``target-file-size`` bytes of Arrow data, then written.
            row_kinds: Append tables take only ``+I`` rows (Paimon's append
                writer refuses others); see the primary-key writer for more.

        Raises:
            TypeError: ``data`` is not a ``pa.Table`` or ``pa.RecordBatch``.
            SchemaMismatchError: before any file is written, when the data does
                not fit the schema or a row kind is not ``+I``.
            UnsupportedTypeError: a partition value cannot be encoded.
            StorageError: writing a rolled data file failed (``.path`` names
                it); the writer discarded its unprepared files and rows (see
                the class docstring).
            ValueError: the writer is closed or failed before.

        Storage: may write data files under
        ``<partition>/bucket-<b>/`` (invisible until committed).
        """
        self._check_usable()
        if row_kinds is not None and parse_row_kinds(row_kinds, data.num_rows).any():
            raise SchemaMismatchError(
                "an append table takes only +I rows; -U/+U/-D need a primary-key table"
            )
        table = conform_to_schema(data, self.schema)
        for partition, part_path, bucket, part in self._route(table):
            self._add(partition, part_path, bucket, part)

    def delete_arrow(self, keys: pa.Table | pa.RecordBatch) -> None:
        """Delete rows by primary key (primary-key tables only).

        Raises:
            UnsupportedTableError: always: an append table has no keys to delete by.
        """
        raise UnsupportedTableError(
            "an append table has no primary key to delete by; deletes need a primary-key table",
            feature="delete on an append table",
            operation="write",
        )

    def _route(self, table: pa.Table) -> Iterator[tuple[bytes, str, int, pa.Table]]:
        """Split conformed rows into (partition bytes, partition path, bucket, rows) slices.

        Extra columns (beyond the schema's) travel along untouched.
        """
        if table.num_rows == 0:
            return
        keys = list(self.schema.partition_keys)
        buckets = None
        if self._num_buckets > 0:
            buckets = bucket_ids(
                table,
                self._bucket_key,
                [self.schema.field_type(k) for k in self._bucket_key],
                self._num_buckets,
            ).astype(np.int64)
        if not keys and buckets is None:
            yield EMPTY_BINARY_ROW, "", 0, table
            return
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
        types = self.schema.partition_types
        for s, e in zip(starts.tolist(), ends.tolist(), strict=True):
            part = table.slice(s, e - s)
            values = tuple(part.column(k)[0].as_py() for k in keys)
            bucket = int(buckets[s]) if buckets is not None else 0
            partition = encode_binary_row(values, types) if keys else EMPTY_BINARY_ROW
            yield partition, self.schema.partition_path(values), bucket, part

    def _add(self, partition: bytes, part_path: str, bucket: int, data: pa.Table) -> None:
        buf = self._buffers.get((partition, bucket))
        if buf is None:
            buf = _BucketBuffer(partition=partition, partition_path=part_path, bucket=bucket)
            self._buffers[(partition, bucket)] = buf
        buf.chunks.append(data)
        buf.nbytes += data.nbytes
        if buf.nbytes >= self._target:
            self._flush_or_discard([buf])

    def _check_usable(self) -> None:
        """Refuse a closed or failed writer (``ValueError``)."""
        if self._closed:
            raise ValueError("this TableWrite is closed; create a new one with table.new_write()")
        if self._failed is not None:
            raise ValueError(
                "this TableWrite failed writing its data files "
                f"({type(self._failed).__name__}: {self._failed}); it deleted the files it had "
                "written since the last prepare_commit and dropped its buffered rows: write "
                "those rows again with a new writer from table.new_write()"
            ) from self._failed

    def _flush_or_discard(self, buffers: Sequence[_BucketBuffer]) -> None:
        """Flush ``buffers`` (in parallel when several); on a failure discard and re-raise.

        Raises:
            BaseException: whatever a flush raised, after :meth:`_discard`.
        """
        try:
            if len(buffers) > 1:  # encoding (pyarrow) releases the GIL: write buckets in parallel
                with ThreadPoolExecutor(max_workers=min(4, os.cpu_count() or 1)) as pool:
                    list(pool.map(self._flush, buffers))  # the pool waits for every flush
            else:
                for buf in buffers:
                    self._flush(buf)
        except BaseException as exc:
            self._discard(exc)
            raise

    def _discard(self, exc: BaseException) -> None:
        """Delete the unprepared files, drop the buffers and refuse further writes.

        Storage: deletes the data and changelog files written since the last
        ``prepare_commit`` (a failed delete is logged; orphan clean removes it).
        """
        self._failed = exc
        files = sum(len(b.files) + len(b.changelog_files) for b in self._buffers.values())
        try:
            self.abort()
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

    def _flush(self, buf: _BucketBuffer) -> None:
        if not buf.chunks:
            return
        data = pa.concat_tables(buf.chunks)
        buf.chunks, buf.nbytes = [], 0
        # Roll: estimate rows per file from the in-memory size (files are smaller).
        bytes_per_row = max(1, data.nbytes // max(1, data.num_rows))
        rows_per_file = max(1, self._target // bytes_per_row)
        for offset in range(0, data.num_rows, rows_per_file):
            buf.files.append(self._write_file(buf, data.slice(offset, rows_per_file)))

    def _write_file(self, buf: _BucketBuffer, data: pa.Table) -> DataFileMeta:
        name = self.paths.new_data_file_name(
            extension=self._spec.extension, prefix=self._spec.prefix
        )
        path = self.paths.data_file_path(buf.partition_path, buf.bucket, name)
        try:
            size = write_data_file(file_io=self.file_io, path=path, data=data, spec=self._spec)
        except BaseException:
            try:
                self.file_io.delete_many([path])  # a streamed file may be left partly written
            except Exception:  # the write's own error is the one to report
                logger.warning("could not delete the partly written %s", path, exc_info=True)
            raise
        stats = compute_value_stats(
            data, self.schema.value_types, stats_mode=self.schema.core_options.metadata_stats_mode
        )
        with self._sequence_lock:
            start = max(self._next_sequence, time.time_ns() // 1000)
            end = start + data.num_rows - 1
            self._next_sequence = end + 1
        logger.debug("wrote %s (%d rows, %d bytes)", path, data.num_rows, size)
        return new_data_file_meta(
            file_name=name,
            size_bytes=size,
            row_count=data.num_rows,
            stats=stats,
            schema_id=self.schema.id,
            min_sequence_number=start,
            max_sequence_number=end,
            file_source=FileSource.APPEND,
        )

    def prepare_commit(self) -> list[CommitMessage]:
        """Flush every buffer and return one CommitMessage per (partition, bucket).

        Returns:
            Messages for the files written since the last call (empty when no
            rows were written). Pass them to ``FileStoreCommit.commit`` or, if
            they will never be committed, to :meth:`abort`.

        Raises:
            StorageError: writing a data file failed (``.path`` names it); every
                data file written since the last ``prepare_commit`` was deleted
                and the buffered rows dropped (see the class docstring).
            ValueError: the writer failed before.

        Storage: writes the remaining buffered rows as data files; on a
        failure deletes them and the files rolled since the last call.
        """
        if self._failed is not None:
            self._check_usable()
        buffers = list(self._buffers.values())
        self._flush_or_discard(buffers)
        messages = []
        for buf in buffers:
            if buf.files or buf.changelog_files:
                messages.append(
                    CommitMessage(
                        partition=buf.partition,
                        bucket=buf.bucket,
                        total_buckets=self._num_buckets,
                        data_increment=buf.increment(),
                    )
                )
        self._buffers.clear()
        return messages

    def abort(self, messages: Sequence[CommitMessage] | None = None) -> None:
        """Abandon this write: delete data files that will never be committed.

        Args:
            messages: Messages returned by :meth:`prepare_commit` that will not
                be committed; their ADDed files are deleted. Files this writer
                rolled since the last ``prepare_commit`` (not yet in any
                message) are always deleted, and buffered rows are dropped.
                ``None`` = only that.

        Storage: deletes ``new_files``/``compact_after`` and changelog files of
        ``messages`` and the writer's unprepared files; never metadata.
        """
        pending = [
            CommitMessage(
                partition=buf.partition,
                bucket=buf.bucket,
                total_buckets=self._num_buckets,
                data_increment=buf.increment(),
            )
            for buf in self._buffers.values()
            if buf.files or buf.changelog_files
        ]
        self._buffers.clear()
        abort_messages(self.file_io, self.paths, self.schema, [*(messages or ()), *pending])

    def close(self) -> None:
        """Drop buffered rows (files already written stay until committed or aborted)."""
        self._buffers.clear()
        self._closed = True


def abort_messages(
    file_io: FileIO, paths: PathFactory, schema: TableSchema, messages: Sequence[CommitMessage]
) -> None:
    """Delete the data and changelog files that uncommitted ``messages`` add (missing: fine).

    Files a message also deletes (a compaction's upgraded inputs, re-added at a
    new level) are left alone.

    Storage: deletes data files only; never metadata.
    """
    targets = []
    for m in messages:
        part_path = schema.partition_path_of(m.partition)
        # An upgraded file (same name, new level) is an input: never delete it.
        kept = {f.file_name for f in m.deleted_files()} - {
            f.file_name for f in m.data_increment.new_files
        }
        changelog = m.data_increment.changelog_files + m.compact_increment.changelog_files
        for f in (*m.added_files(), *changelog):
            if f.file_name in kept:
                continue
            targets.append(
                paths.data_file_path(
                    part_path, m.bucket, f.file_name, external_path=f.external_path
                )
            )
    file_io.delete_many(targets)
