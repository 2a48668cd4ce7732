"""AppendOnlyTableWrite: rows of an append table -> data files per (partition, bucket).

``write_arrow`` validates the data against the table schema before any file
is written, routes the rows by partition and bucket into a
:class:`~snaplake.write.bucket_buffer.BucketBuffer`, and writes a bucket's
rows once they reach ``target-file-size`` bytes of Arrow data, as data files
rolled at that size. ``prepare_commit`` writes the rest and returns one
CommitMessage per (partition, bucket). Sequence numbers come from the clock
(microseconds), increasing within the writer.

Source: Paimon ``AppendOnlyFileStoreWrite`` / ``AppendOnlyWriter`` /
``RollingFileWriter`` and pypaimon ``DataWriter`` (file naming, sequence
ranges, stats).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence

import pyarrow as pa

from snaplake.commit.message import CommitMessage
from snaplake.errors import SchemaMismatchError, UnsupportedTableError
from snaplake.mergetree.kv import parse_row_kinds
from snaplake.store.format.data_file import DataFileMeta, FileSource
from snaplake.store.format.file_format import DataFileSpec
from snaplake.store.format.paths import PathFactory
from snaplake.store.format.schema import TableSchema
from snaplake.store.format.stats import compute_value_stats
from snaplake.store.io.file_io import FileIO
from snaplake.write.bucket_buffer import BucketBuffer, PendingBucket
from snaplake.write.table_write import (
    RowKinds,
    conform_to_schema,
    new_data_file_meta,
    write_data_file,
)

__all__ = ["AppendOnlyTableWrite"]

logger = logging.getLogger(__name__)


class AppendOnlyTableWrite:
    """The :class:`~snaplake.write.table_write.TableWrite` of an append table.

    Built by ``AppendOnlyFileStore.new_write`` (``table.new_write``); see
    ``TableWrite`` for the failure and reuse rules.

    Args:
        file_io: Storage of the table.
        paths: The table's PathFactory.
        schema: The table schema to write with (its id goes into every file).
        commit_user: Recorded for logs only (the commit carries the user).

    The caller has checked the schema (``FileStore.new_write`` runs
    ``check_supported(WRITE)``).

    Source: Paimon ``AppendOnlyFileStoreWrite`` / ``AppendOnlyWriter``.
    """

    def __init__(
        self, *, file_io: FileIO, paths: PathFactory, schema: TableSchema, commit_user: str
    ) -> None:
        self.file_io = file_io
        self.paths = paths
        self.schema = schema
        self.commit_user = commit_user
        self._target = schema.core_options.target_file_size_bytes
        self._spec = DataFileSpec.from_options(schema.core_options)
        self._buffer = BucketBuffer(
            file_io=file_io, paths=paths, schema=schema, flush=self._write_files
        )
        self._next_sequence = 0
        self._sequence_lock = threading.Lock()

    def write_arrow(
        self,
        data: pa.Table | pa.RecordBatch,
        *,
        row_kinds: RowKinds | None = None,
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
                ``TableWrite``).
            ValueError: the writer is closed or failed before.

        Storage: may write data files under
        ``<partition>/bucket-<b>/`` (invisible until committed).
        """
        self._buffer.check_usable()
        if row_kinds is not None and parse_row_kinds(row_kinds, data.num_rows).any():
            raise SchemaMismatchError(
                "an append table takes only +I rows; -U/+U/-D need a primary-key table"
            )
        table = conform_to_schema(data, self.schema)
        for partition, part_path, bucket, part in self._buffer.route(table):
            pending = self._buffer.add(partition, part_path, bucket, part)
            if pending.nbytes >= self._target:
                self._buffer.flush([pending])

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

    def prepare_commit(self) -> list[CommitMessage]:
        """Write every buffered row; return one CommitMessage per (partition, bucket).

        Returns:
            Messages for the files written since the last call (empty when no
            rows were written). Pass them to ``FileStoreCommit.commit`` or, if
            they will never be committed, to :meth:`abort`.

        Raises:
            StorageError: writing a data file failed (``.path`` names it); every
                data file written since the last ``prepare_commit`` was deleted
                and the buffered rows dropped (see ``TableWrite``).
            ValueError: the writer failed before.

        Storage: writes the remaining buffered rows as data files; on a
        failure deletes them and the files rolled since the last call.
        """
        return self._buffer.prepare_commit()

    def abort(self, messages: Sequence[CommitMessage] | None = None) -> None:
        """Abandon this write: delete data files that will never be committed.

        Args:
            messages: Messages returned by :meth:`prepare_commit` that will not
                be committed; their files are deleted. Files this writer
                rolled since the last ``prepare_commit`` (not yet in any
                message) are always deleted, and buffered rows are dropped.
                ``None`` = only that.

        Storage: deletes data files only; never metadata.
        """
        self._buffer.abort(messages or ())

    def close(self) -> None:
        """Drop buffered rows (files already written stay until committed or aborted)."""
        self._buffer.close()

    def ignore_previous_files(self) -> None:
        """Nothing to ignore: an append writer restores no state from earlier snapshots."""

    def _write_files(self, pending: PendingBucket, rows: pa.Table) -> None:
        """Write ``rows`` of one bucket as data files rolled at ``target-file-size``."""
        # Roll: estimate rows per file from the in-memory size (files are smaller).
        bytes_per_row = max(1, rows.nbytes // max(1, rows.num_rows))
        rows_per_file = max(1, self._target // bytes_per_row)
        for offset in range(0, rows.num_rows, rows_per_file):
            pending.files.append(self._write_file(pending, rows.slice(offset, rows_per_file)))

    def _write_file(self, pending: PendingBucket, data: pa.Table) -> DataFileMeta:
        name = self.paths.new_data_file_name(
            extension=self._spec.extension, prefix=self._spec.prefix
        )
        path = self.paths.data_file_path(pending.partition_path, pending.bucket, name)
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
