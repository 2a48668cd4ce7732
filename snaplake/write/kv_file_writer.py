"""KeyValueFileWriter: sorted key/value chunks -> rolling data files with their metadata.

Used by the primary-key writer (level-0 flushes) and by LSM compaction
(outputs at higher levels). Chunks arrive in key order; the writer streams
them into row groups of bounded size in the level's
format (``file.format.per.level``, else ``file.format``; changelog files:
``changelog-file.format``), starts a new file once the current one reaches
``target-file-size`` bytes, and describes every file as Paimon's
``KeyValueDataFileWriter`` does: min/max key (BinaryRow of the trimmed primary
key), key stats in ``truncate(128)`` mode, value stats of every column,
sequence range, delete row count (``-U``/``-D`` rows), level and file source.
Stats are computed from the Arrow rows whatever the format, as the append
writer computes them (:mod:`snaplake.store.format.stats`).

Source: Paimon ``KeyValueFileWriterFactory.createRollingMergeTreeFileWriter``,
``KeyValueDataFileWriter.write`` / ``result``, ``RollingFileWriterImpl``,
``StatsCollectorFactories`` (system fields in ``truncate(128)``),
``KeyValueFileWriterFactory`` (``fileFormatPerLevel``, ``changelogFileFormat``).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from snaplake.mergetree.kv import SEQUENCE_NUMBER, VALUE_KIND, is_retract, key_column, kv_schema
from snaplake.store.format.binary_row import encode_binary_row, encode_binary_rows
from snaplake.store.format.data_file import (
    DataFileMeta,
    FileSource,
    SimpleStats,
    creation_time_now_ms,
)
from snaplake.store.format.file_format import DataFileSpec, FormatWriter
from snaplake.store.format.grouped_stats import grouped_value_stats
from snaplake.store.format.paths import PathFactory
from snaplake.store.format.schema import TableSchema
from snaplake.store.format.stats import SimpleStatsParts, ValueStatsCollector
from snaplake.store.io.file_io import FileIO
from snaplake.write.table_write import open_data_file

__all__ = [
    "KEY_STATS_MODE",
    "SMALL_FILE_ROWS",
    "FileSummary",
    "KeyValueFileWriter",
    "WrittenFile",
]

KEY_STATS_MODE = "truncate(128)"
"""Stats mode of the ``_KEY_`` columns (Paimon: system fields get ``truncate(128)``)."""

ROW_GROUP_ROWS = 131_072
"""Most rows per Parquet row group (per write call for ORC and Avro, whose writers cut
stripes and blocks themselves): bounds what a reader decodes at once."""

ROW_GROUP_BYTES = 8 << 20
"""Most Arrow bytes per row group (and never more than ``target-file-size``): the file
size is checked after each row group, so this is also the rolling granularity."""

_DICTIONARY_PAGE_BYTES = 256 << 10

SMALL_FILE_ROWS = 16_384
"""Rows below which a writer flush skips dictionary encoding (see ``small``)."""


@dataclass(frozen=True, slots=True)
class WrittenFile:
    """A finished data file.

    Attributes:
        meta: Its DataFileMeta.
        path: Its full path.
    """

    meta: DataFileMeta
    path: str


@dataclass(frozen=True, slots=True)
class FileSummary:
    """What the DataFileMeta of a file of one row range says, computed before writing it.

    Attributes:
        key_stats: ``_KEY_STATS`` parts (mode ``truncate(128)``).
        value_stats: ``_VALUE_STATS`` parts (the writer's stats mode).
        min_key: BinaryRow bytes of the first row's trimmed primary key.
        max_key: BinaryRow bytes of the last row's trimmed primary key.
        min_sequence_number: Smallest ``_SEQUENCE_NUMBER`` of the range.
        max_sequence_number: Largest ``_SEQUENCE_NUMBER`` of the range.
        delete_row_count: Rows whose ``_VALUE_KIND`` is ``-U`` or ``-D``.
    """

    key_stats: SimpleStatsParts
    value_stats: SimpleStatsParts
    min_key: bytes
    max_key: bytes
    min_sequence_number: int
    max_sequence_number: int
    delete_row_count: int


@dataclass
class _Open:
    name: str
    path: str
    stack: contextlib.ExitStack
    out: Any
    writer: FormatWriter
    key_stats: ValueStatsCollector
    value_stats: ValueStatsCollector
    min_key: bytes | None = None
    max_key: bytes = b""
    rows: int = 0
    deletes: int = 0
    min_seq: int = 2**63 - 1
    max_seq: int = -(2**63)
    pending: list[pa.Table] = field(default_factory=list)
    pending_rows: int = 0
    pending_bytes: int = 0
    stats: tuple[SimpleStatsParts, SimpleStatsParts] | None = None


class KeyValueFileWriter:
    """Writes one bucket's key-sorted key/value rows into rolling data files of one level.

    Args:
        file_io: Storage of the table.
        paths: The table's PathFactory.
        schema: The table schema (its id goes into every file).
        partition_path: The bucket's partition directory (``""`` unpartitioned).
        bucket: Bucket number.
        level: LSM level of the files.
        file_source: APPEND for writer flushes, COMPACT for compaction outputs.
        target_file_size: Roll to a new file at this many bytes.
        small: The caller knows the rows are few (a writer flush of under
            :data:`SMALL_FILE_ROWS` rows): write without dictionary encoding,
            which costs more than it saves on a few hundred rows.
        changelog: Write changelog files (``changelog-producer = input``):
            named with ``changelog-file.prefix``, written in
            ``changelog-file.format``, compressed with
            ``changelog-file.compression`` and described with
            ``changelog-file.stats-mode`` (each defaulting to the level-0
            data file's setting), rows kept as given (one key may repeat).
            Data files use ``file.format.per.level``,
            ``file.compression.per.level`` and ``metadata.stats-mode.per.level``
            of their level, else ``file.format``, ``file.compression`` and
            ``metadata.stats-mode``.

    Storage: creates ``data-<uuid>-<n>.<format>`` (or ``changelog-...``) files
    under the bucket directory and starts syncing each once it is complete
    (``FileIO.sync_in_background``: the publish of the commit still makes it
    durable); :meth:`abort` deletes them.

    Source: Paimon ``KeyValueFileWriterFactory`` (``createRollingChangelogFileWriter``,
    the per-level and changelog format, compression and stats mode).
    """

    def __init__(
        self,
        *,
        file_io: FileIO,
        paths: PathFactory,
        schema: TableSchema,
        partition_path: str,
        bucket: int,
        level: int,
        file_source: FileSource,
        target_file_size: int,
        small: bool = False,
        changelog: bool = False,
    ) -> None:
        self.file_io = file_io
        self.paths = paths
        self.schema = schema
        self.partition_path = partition_path
        self.bucket = bucket
        self.level = level
        self.file_source = file_source
        self.target = max(1, target_file_size)
        self.key_names = schema.trimmed_primary_keys
        self.arrow_schema = kv_schema(schema.arrow_schema, self.key_names)
        opts = schema.core_options
        if changelog:
            spec = dataclasses.replace(
                DataFileSpec.from_options(opts, format_name=opts.changelog_file_format),
                prefix=opts.changelog_file_prefix,
                compression=opts.changelog_file_compression,
            )
            self._stats_mode = opts.changelog_file_stats_mode
        else:
            spec = dataclasses.replace(
                DataFileSpec.from_options(opts, format_name=opts.format_for_level(level)),
                compression=opts.compression_for_level(level),
            )
            self._stats_mode = opts.stats_mode_for_level(level)
        self._spec = spec
        self._open: _Open | None = None
        self._group_bytes = min(ROW_GROUP_BYTES, self.target)
        self._dictionary = not small
        self.written: list[WrittenFile] = []

    def write(self, chunk: pa.Table) -> None:
        """Append key-sorted rows (keys greater than every key written before).

        Args:
            chunk: Rows with the table's key/value layout (all value columns).

        Raises:
            StorageError: the storage failed.
        """
        if chunk.num_rows == 0:
            return
        chunk = self.conform(chunk)
        if chunk.nbytes > self._group_bytes and chunk.num_rows > 1:
            step = max(1, chunk.num_rows * self._group_bytes // chunk.nbytes)
            for offset in range(0, chunk.num_rows, step):
                self._write_piece(chunk.slice(offset, step))
        else:
            self._write_piece(chunk)

    def conform(self, chunk: pa.Table) -> pa.Table:
        """``chunk``'s columns in the file's order and types (no copy when they are)."""
        chunk = chunk.select(self.arrow_schema.names)
        return chunk if chunk.schema.equals(self.arrow_schema) else chunk.cast(self.arrow_schema)

    def fits_one_file(self, chunk: pa.Table) -> bool:
        """Whether :meth:`write_file` takes ``chunk`` (conformed): it is one row group."""
        return bool(chunk.num_rows > 0 and chunk.nbytes <= self._group_bytes)

    def file_summaries(self, chunk: pa.Table, sizes: Sequence[int]) -> list[FileSummary]:
        """The :class:`FileSummary` of consecutive row ranges of conformed ``chunk``, at once.

        Range ``g`` holds ``sizes[g]`` rows (each > 0); each summary is what a
        file of exactly those rows gets from this writer (stats in its modes,
        see :func:`~snaplake.store.format.stats.grouped_value_stats`; min/max
        key, sequence range and delete count), so a writer of the same table,
        level and kind may pass it to :meth:`write_file`. One pass over
        ``chunk`` for all ranges: no per-range kernel calls.

        Raises:
            ValueError: a size is not positive, or they do not add up to the rows.
        """
        if not sizes or min(sizes) <= 0 or sum(sizes) != chunk.num_rows:
            raise ValueError(f"range sizes {list(sizes)[:8]} do not split {chunk.num_rows} rows")
        keys = chunk.select([key_column(k) for k in self.key_names])
        key_stats = grouped_value_stats(
            keys, sizes, self.schema.key_types, stats_mode=KEY_STATS_MODE
        )
        value_stats = grouped_value_stats(
            chunk.select(self.schema.field_names),
            sizes,
            self.schema.value_types,
            stats_mode=self._stats_mode,
        )
        ends = np.cumsum(np.asarray(sizes, dtype=np.int64))
        starts = ends - np.asarray(sizes, dtype=np.int64)
        n = len(sizes)
        bounds = keys.take(pa.array(np.concatenate((starts, ends - 1))))
        rows = list(zip(*(c.to_pylist() for c in bounds.columns), strict=True))
        encoded = encode_binary_rows(rows, self.schema.key_types)
        seqs = np.asarray(chunk.column(SEQUENCE_NUMBER).to_numpy(), dtype=np.int64)
        kinds = np.asarray(chunk.column(VALUE_KIND).to_numpy(), dtype=np.int8)
        deletes = np.add.reduceat(is_retract(kinds).astype(np.int64), starts).tolist()
        low = np.minimum.reduceat(seqs, starts).tolist()
        high = np.maximum.reduceat(seqs, starts).tolist()
        return [
            FileSummary(
                key_stats=key_stats[g],
                value_stats=value_stats[g],
                min_key=encoded[g],
                max_key=encoded[n + g],
                min_sequence_number=low[g],
                max_sequence_number=high[g],
                delete_row_count=deletes[g],
            )
            for g in range(n)
        ]

    def write_file(self, chunk: pa.Table, summary: FileSummary) -> None:
        """Write conformed key-sorted ``chunk`` as one whole file described by ``summary``.

        Args:
            chunk: Rows :meth:`fits_one_file` accepts (the caller checks: the
                check costs as much as the rest), conformed (:meth:`conform`).
            summary: Its metadata (from :meth:`file_summaries`).

        Raises:
            ValueError: a file is open, or ``chunk`` is empty.
            StorageError: the storage failed (the file is deleted first).
        """
        if self._open is not None or chunk.num_rows == 0:
            raise ValueError("write_file needs a fresh writer and rows")
        try:
            f = self._start()
            f.min_key, f.max_key = summary.min_key, summary.max_key
            f.rows, f.deletes = chunk.num_rows, summary.delete_row_count
            f.min_seq, f.max_seq = summary.min_sequence_number, summary.max_sequence_number
            f.stats = (summary.key_stats, summary.value_stats)
            f.pending.append(chunk)  # one row group, written by close
        except BaseException:
            self.abort()
            raise
        self.close()

    def _write_piece(self, chunk: pa.Table) -> None:
        f = self._open or self._start()
        kinds = np.asarray(chunk.column(VALUE_KIND).to_numpy(), dtype=np.int8)
        seqs = chunk.column(SEQUENCE_NUMBER)
        keys = chunk.select([key_column(k) for k in self.key_names])
        if f.min_key is None:
            f.min_key = self._key_row(keys, 0)
        f.max_key = self._key_row(keys, chunk.num_rows - 1)
        f.rows += chunk.num_rows
        f.deletes += int(np.count_nonzero(is_retract(kinds)))
        bounds = pc.min_max(seqs)
        f.min_seq = min(f.min_seq, bounds["min"].as_py())
        f.max_seq = max(f.max_seq, bounds["max"].as_py())
        f.key_stats.update(keys)
        f.value_stats.update(chunk.select(self.schema.field_names))
        f.pending.append(chunk)
        f.pending_rows += chunk.num_rows
        f.pending_bytes += chunk.nbytes
        if f.pending_rows >= ROW_GROUP_ROWS or f.pending_bytes >= self._group_bytes:
            self._flush_row_group(f)
            if f.out.stream.tell() >= self.target:
                self._finish()

    def close(self) -> list[WrittenFile]:
        """Finish the current file; return every file written.

        Raises:
            StorageError: the storage failed (the files are deleted first).
        """
        try:
            if self._open is not None:
                self._finish()
        except BaseException:
            self.abort()
            raise
        return list(self.written)

    def abort(self) -> None:
        """Delete every file this writer created (finished or not)."""
        targets = [w.path for w in self.written]
        if self._open is not None:
            with contextlib.suppress(Exception):
                self._open.stack.close()
            targets.append(self._open.path)
            self._open = None
        self.written.clear()
        self.file_io.delete_many(targets)

    # ---------------------------------------------------------------- helpers
    def _key_row(self, keys: pa.Table, i: int) -> bytes:
        return encode_binary_row([c[i].as_py() for c in keys.columns], self.schema.key_types)

    def _start(self) -> _Open:
        spec = self._spec
        name = self.paths.new_data_file_name(extension=spec.extension, prefix=spec.prefix)
        path = self.paths.data_file_path(self.partition_path, self.bucket, name)
        stack = contextlib.ExitStack()
        try:
            out = stack.enter_context(open_data_file(self.file_io, path, size_hint=self.target))
            writer = stack.enter_context(
                spec.open_writer(
                    out.stream,
                    self.arrow_schema,
                    use_dictionary=self._dictionary,
                    dictionary_pagesize_limit=_DICTIONARY_PAGE_BYTES,
                )
            )
        except BaseException as exc:
            with contextlib.suppress(Exception):
                stack.close()
            self.file_io.delete_many([path])
            if isinstance(exc, OSError):  # pyarrow's own errors (a full disk): typed by the FileIO
                error = self.file_io.translate_error(exc, path=path, operation="write")
                if error is not exc:
                    raise error from exc
            raise
        self._open = _Open(
            name=name,
            path=path,
            stack=stack,
            out=out,
            writer=writer,
            key_stats=ValueStatsCollector(self.schema.key_types, stats_mode=KEY_STATS_MODE),
            value_stats=ValueStatsCollector(self.schema.value_types, stats_mode=self._stats_mode),
        )
        return self._open

    def _flush_row_group(self, f: _Open) -> None:
        if not f.pending:
            return
        data = pa.concat_tables(f.pending)
        f.pending, f.pending_rows, f.pending_bytes = [], 0, 0
        try:
            f.writer.write(data)
        except OSError as exc:  # pyarrow's own errors (a full disk): typed by the FileIO
            error = self.file_io.translate_error(exc, path=f.path, operation="write")
            if error is exc:
                raise
            raise error from exc

    def _finish(self) -> None:
        f = self._open
        assert f is not None
        self._open = None
        try:
            self._flush_row_group(f)
            f.stack.close()  # closes the format writer, then creates the file
        except BaseException:
            with contextlib.suppress(Exception):
                f.stack.close()  # the row group failed: the stream is still open
            self.file_io.delete_many([f.path])
            raise
        key_stats, value_stats = f.stats or (f.key_stats.result(), f.value_stats.result())
        assert f.min_key is not None
        meta = DataFileMeta(
            file_name=f.name,
            file_size_bytes=f.out.size_bytes,
            row_count=f.rows,
            min_key=f.min_key,
            max_key=f.max_key,
            key_stats=SimpleStats(
                min_values=key_stats.min_values,
                max_values=key_stats.max_values,
                null_counts=key_stats.null_counts,
            ),
            value_stats=SimpleStats(
                min_values=value_stats.min_values,
                max_values=value_stats.max_values,
                null_counts=value_stats.null_counts,
            ),
            min_sequence_number=f.min_seq,
            max_sequence_number=f.max_seq,
            schema_id=self.schema.id,
            level=self.level,
            extra_files=(),
            creation_time_ms=creation_time_now_ms(),
            delete_row_count=f.deletes,
            embedded_index=None,
            file_source=self.file_source,
            value_stats_cols=None,
            external_path=None,
        )
        self.written.append(WrittenFile(meta=meta, path=f.path))
        self.file_io.sync_in_background([f.path])  # the commit's publish finds it durable
