"""TableWrite, the writer contract, and what every writer and compaction shares about data files.

:class:`TableWrite` is what ``table.new_write`` returns; the FileStore of the
table's kind builds it (the append writer in :mod:`snaplake.write.append_write`,
the primary-key writer in :mod:`snaplake.write.kv_write`, both composed
around :class:`snaplake.write.bucket_buffer.BucketBuffer`). Here too:
:func:`conform_to_schema` (data checked against the table schema before any
file is written), :func:`open_data_file` / :func:`write_data_file` (data
files in ``file.format``: Parquet, ORC or Avro, via
:mod:`snaplake.store.format.file_format`), :func:`new_data_file_meta` and
:func:`abort_messages` (delete the files of uncommitted messages).

Source: Paimon ``TableWrite`` / ``RollingFileWriter`` and pypaimon
``DataWriter`` (file naming, sequence ranges, stats).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol, TypeAlias

import pyarrow as pa
import pyarrow.fs as pafs

from snaplake.commit.message import CommitMessage
from snaplake.errors import SchemaMismatchError
from snaplake.store.format.data_file import (
    EMPTY_BINARY_ROW,
    EMPTY_STATS,
    DataFileMeta,
    FileSource,
    SimpleStats,
    creation_time_now_ms,
)
from snaplake.store.format.file_format import DataFileSpec
from snaplake.store.format.index_file import index_path
from snaplake.store.format.paths import PathFactory
from snaplake.store.format.schema import TableSchema
from snaplake.store.format.stats import SimpleStatsParts
from snaplake.store.io.file_io import FileIO

__all__ = [
    "RowKinds",
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

RowKinds: TypeAlias = pa.Array | pa.ChunkedArray | Sequence[object]
"""One row kind per row: ``'+I' '-U' '+U' '-D'`` strings or integers 0..3 (numpy int8 too)."""


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


class TableWrite(Protocol):
    """What ``table.new_write`` returns: Arrow rows in, data files out, CommitMessages to commit.

    The FileStore of the table's kind builds it
    (:class:`~snaplake.write.append_write.AppendOnlyTableWrite` for append
    tables, :class:`~snaplake.write.kv_write.KeyValueTableWrite` for
    primary-key tables). Not thread-safe; use one per task. Reusable: after
    ``prepare_commit`` it starts collecting the next batch.

    A failure while writing data files (a full disk, refused credentials, a
    merge error of a primary-key flush) leaves no files behind: the writer
    deletes every data file it wrote since the last ``prepare_commit``, drops
    its buffered rows, re-raises, and from then on refuses ``write_arrow`` and
    ``prepare_commit`` (``ValueError``); write those rows again with a new
    writer. Messages already returned by ``prepare_commit`` are not touched.

    Attributes:
        schema: The table schema the writer writes with (its id goes into every file).
        commit_user: The user that will commit the messages (logs only).

    Source: Paimon ``TableWrite``.
    """

    schema: TableSchema
    commit_user: str

    def write_arrow(
        self,
        data: pa.Table | pa.RecordBatch,
        *,
        row_kinds: RowKinds | None = None,
    ) -> None:
        """Buffer ``data`` (columns matched by name, :func:`conform_to_schema`) for the next commit.

        ``row_kinds``: one of ``'+I' '-U' '+U' '-D'`` (or int8 0..3) per row;
        append tables take only ``+I``. May write data files (invisible until
        committed). Errors: see the writer of the table's kind.
        """

    def delete_arrow(self, keys: pa.Table | pa.RecordBatch) -> None:
        """Buffer ``-D`` rows for the primary keys in ``keys`` (append tables refuse it)."""

    def prepare_commit(self) -> list[CommitMessage]:
        """Write every buffered row; return one CommitMessage per (partition, bucket) written.

        The messages go to ``FileStoreCommit.commit`` or, if they will never
        be committed, to :meth:`abort`. Never commits.
        """

    def abort(self, messages: Sequence[CommitMessage] | None = None) -> None:
        """Delete the files of ``messages`` and the files written since ``prepare_commit``.

        Buffered rows are dropped. Storage: deletes data and changelog files
        only (see :func:`abort_messages`).
        """

    def close(self) -> None:
        """Drop buffered rows (files already written stay until committed or aborted)."""

    def ignore_previous_files(self) -> None:
        """Say that the messages will overwrite the partitions they write (before any write).

        The writer then keeps no state of those partitions from earlier
        snapshots (a dynamic-bucket writer restores no HASH index: the
        overwrite drops it). Source: Paimon ``TableWriteImpl.withIgnorePreviousFiles``.
        """


def abort_messages(
    file_io: FileIO, paths: PathFactory, schema: TableSchema, messages: Sequence[CommitMessage]
) -> None:
    """Delete the data, changelog and compaction index files uncommitted ``messages`` add.

    Files a message also deletes (a compaction's upgraded inputs, re-added at a
    new level) are left alone. Missing files are fine.

    Storage: deletes data and changelog files and the index files a
    compaction wrote (``CompactIncrement.new_index_files``: a bucket's new
    deletion vectors file); never other metadata.
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
        targets += [index_path(paths, f) for f in m.compact_increment.new_index_files]
    file_io.delete_many(targets)
