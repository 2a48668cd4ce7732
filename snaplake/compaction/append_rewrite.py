"""Rewrite one run of small append-table files into target-size files (the per-bucket work).

:class:`AppendRewriter` is what a compaction runs per (partition, bucket): it
reads a run of consecutive small files in sequence order and streams their
rows, in order, into files of about ``target-file-size``; each output gets a
sequence range inside the run's range. It returns the run's
:class:`~snaplake.commit.message.CommitMessage` (inputs as ``compact_before``,
outputs as ``compact_after``) and commits nothing, so a rewrite unit
(:class:`~snaplake.compaction.append_compact.AppendRewriteUnit`) runs it in
the planner's process or on a Spark executor (``snaplake.spark.compact``),
and the planner's process commits.

Inputs are read with the reader of their own format (the file extension:
Parquet, ORC or Avro, through :mod:`snaplake.store.format.file_format`); runs
of tiny Parquet inputs are decoded with polars' Parquet reader (per tiny file
several times cheaper than pyarrow's; pyarrow remains the fallback). Rows are
converted to the table's Arrow schema and written in the table's current
``file.format`` with the writer's settings. Every output is streamed in pieces
of bounded size (the next piece is decoded while the current one is encoded,
the value stats accumulate piece by piece), so a rewrite's memory does not
grow with its inputs.

Source: Paimon ``AppendCompactTask.doCompact`` / ``BucketedAppendCompactManager``
(one rewrite per task, outputs rolled at ``target-file-size``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs

from snaplake.commit.message import CommitMessage, CompactIncrement
from snaplake.store.format.data_file import (
    DataFileMeta,
    FileSource,
)
from snaplake.store.format.deletion_vector import DeletionVector
from snaplake.store.format.file_format import DataFileSpec, format_of_file
from snaplake.store.format.paths import PathFactory
from snaplake.store.format.schema import SchemaManager, TableSchema
from snaplake.store.format.stats import SimpleStatsParts, ValueStatsCollector
from snaplake.store.io.file_io import FileIO
from snaplake.store.read.scan import Split
from snaplake.store.read.schema_evolution import SchemaEvolution
from snaplake.write.table_write import new_data_file_meta, open_data_file

__all__ = ["AppendRewriter", "CompactTask", "output_groups"]

logger = logging.getLogger(__name__)

_READ_WORKERS = 4
"""Threads fetching input bytes from a FileIO without a local path (S3, memory)."""

_SLICE_BYTES = 2 << 20
"""File bytes of consecutive small inputs decoded at a time."""

_BATCH_ROWS = 65_536
"""Rows decoded at a time from a large input (see :func:`_slices`)."""

_ROW_GROUP_BYTES = 8 << 20
"""Decoded bytes buffered before they are written as one row group."""

_DICTIONARY_PAGE_BYTES = 256 << 10
"""Dictionary size at which a column chunk falls back to plain encoding.

Arrow's default (1 MiB) let a column of unique strings (ids, payloads) hold
about 30 MiB of writer buffers per row group before the fallback,
against 8 MiB with this bound; the files also came out smaller (zstd does
better on plain pages than on dictionary indices of unique values). Columns
of few distinct values keep their dictionary."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactTask:
    """One run of small files of one (partition, bucket) to rewrite.

    Attributes:
        split: The bucket's split (partition, bucket, total buckets).
        files: The run's files, in sequence order.
        paths: Their full paths, aligned with ``files``.
        file_partitions: Each file's own partition bytes, aligned with
            ``files``, when the run joins two writers' encodings of one
            partition value (pypaimon and Java differ for some NULL keys);
            empty when every file is under ``split.partition``. Outputs go
            under ``split.partition`` (Java's bytes); each input is deleted
            under its own bytes, which must match its ADD entry byte for byte.
        schema_id: The schema the outputs are written in: the table's latest
            when the run was planned (inputs of older schemas are mapped by
            field id), fixed at planning so that an executor never races a
            concurrent alter. ``None``: the newest schema among the inputs.
    """

    split: Split
    files: tuple[DataFileMeta, ...]
    paths: tuple[str, ...]
    file_partitions: tuple[bytes, ...] = ()
    schema_id: int | None = None


class AppendRewriter:
    """Rewrite runs of small files into target-size files; commits nothing.

    Holds configuration only (picklable: a Spark executor builds its own).

    Args:
        file_io: Storage of the table.
        paths: Names the outputs (``new_data_file_name``); a Spark job passes
            one whose names carry the job's token.
        schema_manager: Reads the schema each run was written with.
    """

    def __init__(
        self, *, file_io: FileIO, paths: PathFactory, schema_manager: SchemaManager
    ) -> None:
        self.file_io = file_io
        self.paths = paths
        self.schema_manager = schema_manager

    def rewrite(self, task: CompactTask, *, target_file_size_bytes: int) -> list[CommitMessage]:
        """Rewrite one run into files of about ``target_file_size_bytes``; return its messages.

        Args:
            task: The run (files of one schema, consecutive in sequence order).
            target_file_size_bytes: Size at which an output is rolled (inputs
                are grouped by their Parquet bytes, so outputs come out near it).

        Returns:
            The run's message (``compact_before`` = its files, ``compact_after``
            = the outputs, ``_FILE_SOURCE = COMPACT``, sequence ranges inside
            the run's), followed by one ``compact_before``-only message per
            other partition encoding of its inputs (see ``file_partitions``).

        Raises:
            FileNotFoundError: an input vanished; no output is left.
            StorageError: the storage failed; no output is left.

        Storage:
            Creates the outputs in the run's bucket directory (deleted again
            if the rewrite fails); reads the inputs; deletes nothing else.
        """
        outs = self._rewrite(task, max(target_file_size_bytes, 1))
        split = task.split
        before: dict[bytes, list[DataFileMeta]] = {split.partition: []}
        for i, f in enumerate(task.files):
            own = task.file_partitions[i] if task.file_partitions else split.partition
            before.setdefault(own, []).append(f)
        after = tuple(m for m, _ in outs)
        return [
            CommitMessage(
                partition=partition,
                bucket=split.bucket,
                total_buckets=split.total_buckets,
                compact_increment=CompactIncrement(
                    compact_before=tuple(files),
                    compact_after=after if partition == split.partition else (),
                ),
            )
            for partition, files in before.items()
        ]

    def _read_many(self, paths: Sequence[str], schema: pa.Schema) -> pa.Table:
        """Read ``paths`` (files of one schema) and concatenate them in the given order.

        The run's files are many and tiny, so the per-file cost of the reader
        dominates: polars' Rust reader (a core dependency, already used for
        Avro manifests) decodes them several times faster than pyarrow's and in
        parallel. Columns whose Arrow type it does not round-trip exactly, a
        missing polars, or a file it refuses fall back to pyarrow.

        Raises:
            FileNotFoundError: an input vanished.
        """
        parquet = all(format_of_file(p).name == "parquet" for p in paths)
        pl = _polars() if parquet and _polars_round_trips(schema) else None
        if pl is not None:
            local = self._local_paths(paths)
            sources: list[str] | list[bytes] = (
                local if local is not None else self._read_bytes(paths)
            )
            try:
                frame = pl.read_parquet(
                    sources, columns=schema.names, glob=False, hive_partitioning=False
                )
            except pl.exceptions.PolarsError:
                logger.debug("polars could not read a run of %d files; using pyarrow", len(paths))
            else:
                return frame.rechunk().to_arrow().cast(schema)
        return self._read_many_pyarrow(paths, schema)

    def _local_paths(self, paths: Sequence[str]) -> list[str] | None:
        """Return OS paths when the files are on the local filesystem, else ``None``."""
        arrow = self.file_io.arrow_filesystem()
        if arrow is None or not isinstance(arrow[0], pafs.LocalFileSystem):
            return None
        return [p.removeprefix(arrow[1]) for p in paths]

    def _read_bytes(self, paths: Sequence[str]) -> list[bytes]:
        with ThreadPoolExecutor(max_workers=_READ_WORKERS) as pool:
            return list(pool.map(self.file_io.read_bytes, paths))

    def _read_many_pyarrow(self, paths: Sequence[str], schema: pa.Schema) -> pa.Table:
        """Read ``paths`` one file at a time, each with the reader of its format.

        Not pyarrow's dataset scanner: on runs of hundreds of tiny files it is
        no faster and holds several times the memory (fragment metadata,
        readahead buffers, its thread pools); this matters in the daemon, which
        takes this path. Local files are read one after the other; remote ones
        by :data:`_READ_WORKERS` threads, since each costs a round trip.

        Raises:
            FileNotFoundError: an input vanished.
        """
        arrow = self.file_io.arrow_filesystem()

        def read(path: str) -> pa.Table:
            fmt = format_of_file(path)
            if arrow is not None:
                fs, prefix = arrow
                with fs.open_input_file(path.removeprefix(prefix)) as f:
                    return fmt.read(f, schema)
            return fmt.read(pa.BufferReader(self.file_io.read_bytes(path)), schema)

        if arrow is not None and isinstance(arrow[0], pafs.LocalFileSystem):
            return pa.concat_tables([read(p) for p in paths])
        with ThreadPoolExecutor(max_workers=_READ_WORKERS) as pool:
            return pa.concat_tables(list(pool.map(read, paths)))

    def _rewrite(self, task: CompactTask, target: int) -> list[tuple[DataFileMeta, str]]:
        """Rewrite one run into files of about ``target`` bytes; returns (meta, path) pairs."""
        schema_id = task.schema_id
        if schema_id is None:
            schema_id = max(f.schema_id for f in task.files)
        schema = self.schema_manager.schema(schema_id)
        groups = output_groups(task.files, target)
        run_min = min(f.min_sequence_number for f in task.files)
        run_max = max(f.max_sequence_number for f in task.files)
        bucket_dir = task.paths[0].rsplit("/", 1)[0]
        out: list[tuple[DataFileMeta, str]] = []
        next_seq = run_min
        spec = DataFileSpec.from_options(schema.core_options)
        vectors = (
            task.split.read_deletion_vectors(self.file_io) if task.split.deletion_files else {}
        )
        try:
            for n, group in enumerate(groups):
                name = self.paths.new_data_file_name(extension=spec.extension, prefix=spec.prefix)
                path = f"{bucket_dir}/{name}"
                written = self._write(
                    [task.paths[i] for i in group],
                    [task.files[i] for i in group],
                    schema=schema,
                    path=path,
                    vectors=vectors,
                )
                if not written.row_count:  # every row of the group was deleted
                    self.file_io.delete_many([path])
                    continue
                last = n == len(groups) - 1
                lo = next_seq
                hi = run_max if last else min(lo + max(written.row_count - 1, 0), run_max)
                next_seq = hi + 1
                out.append((_output_meta(written, name=name, schema=schema, lo=lo, hi=hi), path))
        except BaseException:
            self.file_io.delete_many([p for _, p in out])
            raise
        return out

    def _write(
        self,
        paths: Sequence[str],
        files: Sequence[DataFileMeta],
        *,
        schema: TableSchema,
        path: str,
        vectors: Mapping[str, DeletionVector],
    ) -> _Written:
        """Stream the rows of ``paths``, in order, into one data file at ``path``.

        Memory stays bounded whatever the inputs hold: runs of small inputs
        are decoded :data:`_SLICE_BYTES` of file bytes at a time, a larger input
        batch by batch, and rows are written as row groups of about
        :data:`_ROW_GROUP_BYTES` decoded; the next piece is decoded while the
        current one is encoded; the value stats are accumulated piece by
        piece. (A bucket's earlier compaction output stays "small" until it
        reaches ``target-file-size * compaction.small-file-ratio`` of
        *compressed* bytes, which for repetitive data can be hundreds of MiB
        decoded, so reading a run whole is not an option.)

        Raises:
            FileNotFoundError: an input vanished.
            StorageError: the storage failed.

        Storage:
            Reads ``paths``; creates ``path`` (deleted again if this fails).
        """
        arrow_schema = schema.arrow_schema
        spec = DataFileSpec.from_options(schema.core_options)
        stats = ValueStatsCollector(
            schema.value_types, stats_mode=schema.core_options.metadata_stats_mode
        )
        pieces = self._pieces(paths, files, schema, vectors)
        rows = 0
        try:
            with (
                ThreadPoolExecutor(max_workers=1) as pool,
                open_data_file(
                    self.file_io, path, size_hint=sum(f.file_size_bytes for f in files)
                ) as out,
                spec.open_writer(
                    out.stream, arrow_schema, dictionary_pagesize_limit=_DICTIONARY_PAGE_BYTES
                ) as writer,
            ):
                group: list[pa.Table] = []
                group_bytes = 0
                pending = pool.submit(next, pieces, None)
                while (piece := pending.result()) is not None:
                    pending = pool.submit(next, pieces, None)
                    stats.update(piece)
                    rows += piece.num_rows
                    group.append(piece)
                    group_bytes += piece.nbytes
                    if group_bytes >= _ROW_GROUP_BYTES:
                        writer.write(pa.concat_tables(group))
                        group, group_bytes = [], 0
                if group:
                    writer.write(pa.concat_tables(group))
        except BaseException:
            self.file_io.delete_many([path])
            raise
        return _Written(size_bytes=out.size_bytes, row_count=rows, stats=stats.result())

    def _pieces(
        self,
        paths: Sequence[str],
        files: Sequence[DataFileMeta],
        table_schema: TableSchema,
        vectors: Mapping[str, DeletionVector],
    ) -> Iterator[pa.Table]:
        """Yield the rows of ``paths`` in order, in pieces of bounded size, in ``table_schema``.

        Consecutive small inputs are read together (:meth:`_read_many`: per
        tiny file the reader's fixed cost dominates); a large one is read
        :data:`_BATCH_ROWS` rows at a time (see :func:`_slices`). Inputs of
        an older schema are read in their own columns and mapped by field id.
        Rows a file's deletion vector (``vectors``, by file name) marks are
        dropped (Paimon's ``AppendCompactTask`` reads with the vectors applied).
        """
        evolution = SchemaEvolution(table_schema, self.schema_manager.schema)
        meta_of = dict(zip(paths, files, strict=True))
        for group, group_files in _by_schema(paths, files):
            m = evolution.mapping(group_files[0].schema_id, table_schema.field_names)
            schema = table_schema.arrow_schema if m.identity else m.file_arrow_schema
            for chunk, large in _slices(group, group_files):
                if not large:
                    metas = [meta_of[p] for p in chunk]
                    yield _without_deleted(m.apply(self._read_many(chunk, schema)), metas, vectors)
                    continue
                vector = vectors.get(meta_of[chunk[0]].file_name)
                start = 0
                with self._open_input(chunk[0]) as source:
                    for piece in format_of_file(chunk[0]).iter_batches(
                        source, schema, batch_rows=_BATCH_ROWS
                    ):
                        rows = m.apply(piece)
                        if vector is not None:
                            mask = vector.keep_mask(rows.num_rows, start=start)
                            start += rows.num_rows
                            rows = rows.filter(pa.array(mask))
                        yield rows

    def _open_input(self, path: str) -> Any:
        """Open a data file for random access reads (pyarrow filesystem, or the FileIO)."""
        arrow = self.file_io.arrow_filesystem()
        if arrow is None:
            return self.file_io.open_input(path)
        fs, prefix = arrow
        return fs.open_input_file(path.removeprefix(prefix))


def _without_deleted(
    table: pa.Table, files: Sequence[DataFileMeta], vectors: Mapping[str, DeletionVector]
) -> pa.Table:
    """``table`` (the rows of ``files``, in order) without the rows their vectors mark."""
    found = [vectors.get(f.file_name) for f in files]
    if not any(found):
        return table
    mask = np.concatenate(
        [
            v.keep_mask(f.row_count) if v is not None else np.ones(f.row_count, dtype=np.bool_)
            for f, v in zip(files, found, strict=True)
        ]
    )
    return table.filter(pa.array(mask))


def output_groups(files: Sequence[DataFileMeta], target: int) -> list[list[int]]:
    """Split a run into consecutive groups of about ``target`` Parquet bytes (one output each).

    A group is closed when the next file would take it past ``target``; a
    group holds at least one file. Returns indexes into ``files``.
    """
    groups: list[list[int]] = [[]]
    size = 0
    for i, f in enumerate(files):
        if groups[-1] and size + f.file_size_bytes > target:
            groups.append([])
            size = 0
        groups[-1].append(i)
        size += f.file_size_bytes
    return groups


@dataclass(frozen=True, slots=True, kw_only=True)
class _Written:
    size_bytes: int
    row_count: int
    stats: SimpleStatsParts


def _by_schema(
    paths: Sequence[str], files: Sequence[DataFileMeta]
) -> list[tuple[list[str], list[DataFileMeta]]]:
    """Split ``paths`` (with their ``files``) into consecutive runs of one schema id."""
    out: list[tuple[list[str], list[DataFileMeta]]] = []
    for p, f in zip(paths, files, strict=True):
        if not out or out[-1][1][0].schema_id != f.schema_id:
            out.append(([], []))
        out[-1][0].append(p)
        out[-1][1].append(f)
    return out


def _slices(paths: Sequence[str], files: Sequence[DataFileMeta]) -> list[tuple[list[str], bool]]:
    """Split ``paths`` into consecutive slices that are cheap to decode at once.

    Returns (paths, large) pairs. An input with more than :data:`_BATCH_ROWS`
    rows or :data:`_SLICE_BYTES` bytes is a slice of its own (``large``: read
    in batches); the others are grouped while the group stays within
    :data:`_SLICE_BYTES` and ``2 * _BATCH_ROWS`` rows. Rows bound the decoded
    size better than bytes do: repetitive data compresses tenfold or more.
    """
    out: list[tuple[list[str], bool]] = []
    size = rows = 0
    for p, f in zip(paths, files, strict=True):
        if f.row_count > _BATCH_ROWS or f.file_size_bytes > _SLICE_BYTES:
            out.append(([p], True))
            size = rows = 0
            continue
        size += f.file_size_bytes
        rows += f.row_count
        if not out or out[-1][1] or size > _SLICE_BYTES or rows > 2 * _BATCH_ROWS:
            out.append(([], False))
            size, rows = f.file_size_bytes, f.row_count
        out[-1][0].append(p)
    return out


def _output_meta(
    written: _Written, *, name: str, schema: TableSchema, lo: int, hi: int
) -> DataFileMeta:
    return new_data_file_meta(
        file_name=name,
        size_bytes=written.size_bytes,
        row_count=written.row_count,
        stats=written.stats,
        schema_id=schema.id,
        min_sequence_number=lo,
        max_sequence_number=hi,
        file_source=FileSource.COMPACT,
    )


def _polars() -> Any:
    try:
        import polars  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        return None
    return polars


def _polars_round_trips(schema: pa.Schema) -> bool:
    """Whether every column survives polars' Parquet reader and ``to_arrow`` + ``cast`` exactly.

    Flat types only: polars keeps their values bit for bit and changes at
    most the Arrow spelling (``large_string``), which the cast undoes. Maps,
    ``time32`` and second-precision timestamps take the pyarrow path.
    """
    return all(_polars_type_ok(f.type) for f in schema)


def _polars_type_ok(t: pa.DataType) -> bool:
    if isinstance(t, pa.TimestampType):
        return bool(t.unit != "s")
    if isinstance(t, pa.Decimal128Type):
        return True
    return any(t.equals(ok) for ok in _POLARS_FLAT_TYPES)


_POLARS_FLAT_TYPES: tuple[pa.DataType, ...] = (
    pa.bool_(),
    pa.int8(),
    pa.int16(),
    pa.int32(),
    pa.int64(),
    pa.float32(),
    pa.float64(),
    pa.string(),
    pa.binary(),
    pa.date32(),
)
