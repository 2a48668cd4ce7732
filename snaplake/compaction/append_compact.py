"""Small-file compaction for append tables: rewrite runs of small files per bucket.

Streaming writers leave many small Parquet files. For every (partition,
bucket) of the latest snapshot, files are taken in sequence-number order and
split into maximal runs of consecutive *small* files (below
``target-file-size * compaction.small-file-ratio``, same schema). A run of at
least ``compaction.min.file-num`` files is rewritten, in order, into files of
about ``target-file-size``; each output gets a sequence range inside the
run's range, so the row order of the bucket is kept. The rewrite is
committed as one COMPACT snapshot (inputs as ``compact_before`` → DELETE,
outputs as ``compact_after`` → ADD with ``_FILE_SOURCE = COMPACT``).

Runs of tiny inputs are decoded with polars' Parquet reader (per tiny file
several times cheaper than pyarrow's; pyarrow remains the fallback), converted
to the table's Arrow schema, and written with pyarrow with the writer's
settings. Every output is streamed in pieces of bounded size (the next piece
is decoded while the current one is encoded, the value stats accumulate piece
by piece), so a compaction's memory does not grow with its inputs.

Appends never conflict with it. If a concurrent commit deleted one of the
inputs (another compaction, an overwrite), the commit raises
``CommitConflictError``, the outputs are deleted, and the table keeps the
other commit's result: nothing is lost.

Source: Paimon ``BucketedAppendCompactManager`` (files ordered by min sequence
number, ``compaction.min.file-num``, small = below ``compactionFileSize``,
large files at the head left alone) and ``AppendCompactCoordinator``
(bucket-unaware tables, ``target-file-size * compaction.small-file-ratio``).
Difference: Paimon's window may include a large file between small ones; here
runs never cross a large file, so outputs never overlap a kept file's range.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from snaplake.commit.file_store_commit import FileStoreCommit
from snaplake.commit.message import CommitMessage, CompactIncrement
from snaplake.commit.table_write import new_data_file_meta, open_data_file, zstd_level
from snaplake.errors import CommitStateUnknownError, UnsupportedTableError
from snaplake.store.format.data_file import (
    DataFileMeta,
    FileSource,
)
from snaplake.store.format.schema import TableSchema
from snaplake.store.format.snapshot import CommitKind
from snaplake.store.format.stats import SimpleStatsParts, ValueStatsCollector
from snaplake.store.io.file_io import FileIO
from snaplake.store.read.scan import FileStoreScan, Split

__all__ = ["AppendCompactor", "CompactResult", "CompactTask"]

logger = logging.getLogger(__name__)

_READ_WORKERS = 4
"""Threads fetching input bytes from a FileIO without a local path (S3, memory)."""

_SLICE_BYTES = 2 << 20
"""Parquet bytes of consecutive small inputs decoded at a time."""

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
class CompactResult:
    """What a small-file compaction did.

    Attributes:
        snapshot_id: The COMPACT snapshot, or ``None`` when nothing was due.
        buckets_compacted: (partition, bucket) pairs rewritten.
        files_before: Input files rewritten.
        files_after: Output files written.
        bytes_before: Bytes of the inputs.
        bytes_after: Bytes of the outputs.
        rows_rewritten: Rows moved from inputs to outputs.
        input_files: Full paths of the inputs (deleted from the table's view,
            physically removed by snapshot expiry later).
        output_files: Full paths of the outputs.
        duration_s: Wall time, seconds.
    """

    snapshot_id: int | None
    buckets_compacted: int = 0
    files_before: int = 0
    files_after: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    rows_rewritten: int = 0
    input_files: tuple[str, ...] = ()
    output_files: tuple[str, ...] = ()
    duration_s: float = 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactTask:
    """One run of small files of one (partition, bucket) to rewrite.

    Attributes:
        split: The bucket's split (partition, bucket, total buckets).
        files: The run's files, in sequence order.
        paths: Their full paths, aligned with ``files``.
    """

    split: Split
    files: tuple[DataFileMeta, ...]
    paths: tuple[str, ...]


class AppendCompactor:
    """Plan and run small-file compaction of an append table's latest snapshot.

    Args:
        commit: The maintenance committer.
        partition_filter: ``{partition_key: value}`` to compact only matching
            partitions (``None`` = all).
        target_file_size_bytes: Override ``target-file-size``.
        min_file_num: Override ``compaction.min.file-num``.
        small_file_ratio: Override ``compaction.small-file-ratio``.
        workers: Buckets rewritten in parallel.
    """

    def __init__(
        self,
        *,
        commit: FileStoreCommit,
        partition_filter: Mapping[str, Any] | None = None,
        target_file_size_bytes: int | None = None,
        min_file_num: int | None = None,
        small_file_ratio: float | None = None,
        workers: int = 4,
    ) -> None:
        self.commit = commit
        self.file_io: FileIO = commit.file_io
        self.paths = commit.paths
        self.partition_filter = partition_filter
        self._target = target_file_size_bytes
        self._min_files = min_file_num
        self._ratio = small_file_ratio
        self._workers = workers

    def _opts(self, schema: TableSchema) -> tuple[int, int, float]:
        o = schema.core_options
        target = self._target if self._target is not None else o.target_file_size_bytes
        min_files = self._min_files if self._min_files is not None else o.compaction_min_file_num
        ratio = self._ratio if self._ratio is not None else o.compaction_small_file_ratio
        return max(target, 1), max(min_files, 2), ratio

    def plan(self) -> list[CompactTask]:
        """Return the runs of small files due for compaction in the latest snapshot.

        Raises:
            CorruptMetadataError: a manifest is undecodable.
            SchemaMismatchError: ``partition_filter`` names a non-partition column.
            UnsupportedTableError: the table has primary keys.

        Storage:
            Reads the latest snapshot's manifests; writes nothing.
        """
        cm = self.commit
        latest = cm.snapshot_manager.latest_snapshot()
        schema = cm.schema_manager.latest()
        if latest is None or schema is None:
            return []
        if schema.primary_keys:
            raise UnsupportedTableError(
                "small-file compaction would mix versions of primary keys; primary-key tables "
                "are compacted by the LSM compaction (table.compact())",
                feature="primary-key table",
                operation="maintenance",
            )
        target, min_files, ratio = self._opts(schema)
        small = target * ratio
        scan = FileStoreScan(
            file_io=self.file_io,
            paths=self.paths,
            schema_manager=cm.schema_manager,
            snapshot=latest,
            partition_filter=self.partition_filter,
        )
        tasks: list[CompactTask] = []
        for split in scan.plan():
            run: list[int] = []
            for i, f in enumerate([*split.files, None]):
                fits = (
                    f is not None
                    and f.file_size_bytes < small
                    and (not run or split.files[run[0]].schema_id == f.schema_id)
                )
                if fits:
                    run.append(i)
                    continue
                if len(run) >= min_files:
                    tasks.append(
                        CompactTask(
                            split=split,
                            files=tuple(split.files[j] for j in run),
                            paths=tuple(split.paths[j] for j in run),
                        )
                    )
                run = [i] if f is not None and f.file_size_bytes < small else []
        return tasks

    def execute(self) -> CompactResult:
        """Rewrite the planned runs and commit them as one COMPACT snapshot.

        Returns:
            What was rewritten; ``snapshot_id`` is ``None`` when nothing was due.

        Raises:
            CommitConflictError: a concurrent commit deleted one of the inputs;
                the outputs were deleted and the table is unchanged by this run.
                Running again plans on the new latest snapshot.
            CommitRetriesExhaustedError: lost the publish race too often; the
                outputs were deleted. Safe to run again.
            CommitStateUnknownError: the publish outcome is unknown; outputs
                are kept (the snapshot may reference them).
            FileNotFoundError: an input file vanished while being read.

        Storage:
            Writes new Parquet files under the buckets' directories, then one
            manifest, two manifest lists and one snapshot file. Inputs are not
            deleted here (snapshot expiry does it once no retained snapshot
            references them).
        """
        start = time.monotonic()
        tasks = self.plan()
        if not tasks:
            return CompactResult(snapshot_id=None, duration_s=time.monotonic() - start)
        schema = self.commit.schema_manager.latest()
        assert schema is not None
        target, _, _ = self._opts(schema)
        outputs: list[list[tuple[DataFileMeta, str]]] = []
        try:
            with ThreadPoolExecutor(max_workers=max(1, min(self._workers, len(tasks)))) as pool:
                futures = [pool.submit(self._rewrite, t, target) for t in tasks]
                errors: list[BaseException] = []
                for fut in futures:
                    try:
                        outputs.append(fut.result())
                    except BaseException as exc:  # noqa: BLE001 - re-raised below after cleanup
                        errors.append(exc)
                if errors:
                    raise errors[0]
            merged: dict[tuple[bytes, int], CommitMessage] = {}
            for task, outs in zip(tasks, outputs, strict=True):
                key = (task.split.partition, task.split.bucket)
                prev = merged.get(key)
                before = (prev.compact_increment.compact_before if prev else ()) + task.files
                after = (prev.compact_increment.compact_after if prev else ()) + tuple(
                    m for m, _ in outs
                )
                merged[key] = CommitMessage(
                    partition=task.split.partition,
                    bucket=task.split.bucket,
                    total_buckets=task.split.total_buckets,
                    compact_increment=CompactIncrement(compact_before=before, compact_after=after),
                )
            result = self.commit.commit(list(merged.values()), kind=CommitKind.COMPACT)
        except CommitStateUnknownError:
            raise
        except BaseException:
            self.file_io.delete_many([p for outs in outputs for _, p in outs])
            raise
        out_files = [m for outs in outputs for m, _ in outs]
        res = CompactResult(
            snapshot_id=result.snapshot_id,
            buckets_compacted=len(merged),
            files_before=sum(len(t.files) for t in tasks),
            files_after=len(out_files),
            bytes_before=sum(f.file_size_bytes for t in tasks for f in t.files),
            bytes_after=sum(f.file_size_bytes for f in out_files),
            rows_rewritten=sum(f.row_count for f in out_files),
            input_files=tuple(p for t in tasks for p in t.paths),
            output_files=tuple(p for outs in outputs for _, p in outs),
            duration_s=time.monotonic() - start,
        )
        logger.info(
            "compacted %d file(s) into %d in %d bucket(s) of %s (snapshot %s, %.1f ms)",
            res.files_before, res.files_after, res.buckets_compacted, self.paths.root,
            res.snapshot_id, res.duration_s * 1000,
        )  # fmt: skip
        return res

    # ----------------------------------------------------------------- rewrite
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
        pl = _polars() if _polars_round_trips(schema) else None
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
        """Read ``paths`` with pyarrow's Parquet reader, one ``ParquetFile`` per file.

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
            if arrow is not None:
                fs, prefix = arrow
                with fs.open_input_file(path.removeprefix(prefix)) as f:
                    part = pq.ParquetFile(f).read(columns=schema.names, use_threads=False)
            else:
                source = pa.BufferReader(self.file_io.read_bytes(path))
                part = pq.ParquetFile(source).read(columns=schema.names, use_threads=False)
            return part.cast(schema)

        if arrow is not None and isinstance(arrow[0], pafs.LocalFileSystem):
            return pa.concat_tables([read(p) for p in paths])
        with ThreadPoolExecutor(max_workers=_READ_WORKERS) as pool:
            return pa.concat_tables(list(pool.map(read, paths)))

    def _rewrite(self, task: CompactTask, target: int) -> list[tuple[DataFileMeta, str]]:
        """Rewrite one run into files of about ``target`` bytes; returns (meta, path) pairs."""
        schema = self.commit.schema_manager.schema(task.files[0].schema_id)
        groups: list[list[int]] = [[]]
        size = 0
        for i, f in enumerate(task.files):
            if groups[-1] and size + f.file_size_bytes > target:
                groups.append([])
                size = 0
            groups[-1].append(i)
            size += f.file_size_bytes
        run_min = min(f.min_sequence_number for f in task.files)
        run_max = max(f.max_sequence_number for f in task.files)
        bucket_dir = task.paths[0].rsplit("/", 1)[0]
        out: list[tuple[DataFileMeta, str]] = []
        next_seq = run_min
        try:
            for n, group in enumerate(groups):
                name = self.paths.new_data_file_name()
                path = f"{bucket_dir}/{name}"
                written = self._write(
                    [task.paths[i] for i in group],
                    [task.files[i] for i in group],
                    schema=schema,
                    path=path,
                )
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
    ) -> _Written:
        """Stream the rows of ``paths``, in order, into one Parquet file at ``path``.

        Memory stays bounded whatever the inputs hold: runs of small inputs
        are decoded :data:`_SLICE_BYTES` of Parquet at a time, a larger input
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
        opts = schema.core_options
        stats = ValueStatsCollector(schema.value_types)
        pieces = self._pieces(paths, files, arrow_schema)
        rows = 0
        try:
            with (
                ThreadPoolExecutor(max_workers=1) as pool,
                open_data_file(
                    self.file_io, path, size_hint=sum(f.file_size_bytes for f in files)
                ) as out,
                pq.ParquetWriter(
                    out.stream,
                    arrow_schema,
                    dictionary_pagesize_limit=_DICTIONARY_PAGE_BYTES,
                    compression=opts.file_compression,
                    compression_level=zstd_level(
                        opts.file_compression, opts.file_compression_zstd_level
                    ),
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
                        _write_row_group(writer, group)
                        group, group_bytes = [], 0
                if group:
                    _write_row_group(writer, group)
        except BaseException:
            self.file_io.delete_many([path])
            raise
        return _Written(size_bytes=out.size_bytes, row_count=rows, stats=stats.result())

    def _pieces(
        self, paths: Sequence[str], files: Sequence[DataFileMeta], schema: pa.Schema
    ) -> Iterator[pa.Table]:
        """Yield the rows of ``paths`` in order, in pieces of bounded size.

        Consecutive small inputs are read together (:meth:`_read_many`: per
        tiny file the reader's fixed cost dominates); a large one is read
        :data:`_BATCH_ROWS` rows at a time (see :func:`_slices`).
        """
        for chunk, large in _slices(paths, files):
            if not large:
                yield self._read_many(chunk, schema)
                continue
            with self._open_input(chunk[0]) as source:
                reader = pq.ParquetFile(source)
                for batch in reader.iter_batches(
                    batch_size=_BATCH_ROWS, columns=schema.names, use_threads=False
                ):
                    yield pa.Table.from_batches([batch]).cast(schema)

    def _open_input(self, path: str) -> Any:
        """Open a data file for random access reads (pyarrow filesystem, or the FileIO)."""
        arrow = self.file_io.arrow_filesystem()
        if arrow is None:
            return self.file_io.open_input(path)
        fs, prefix = arrow
        return fs.open_input_file(path.removeprefix(prefix))


@dataclass(frozen=True, slots=True, kw_only=True)
class _Written:
    size_bytes: int
    row_count: int
    stats: SimpleStatsParts


def _write_row_group(writer: pq.ParquetWriter, pieces: list[pa.Table]) -> None:
    data = pa.concat_tables(pieces)
    writer.write_table(data, row_group_size=max(1, data.num_rows))


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
