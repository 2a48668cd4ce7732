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

Inputs are decoded with polars' Parquet reader (per tiny file several times
cheaper than pyarrow's; pyarrow remains the fallback), converted once to the
table's Arrow schema, and written with pyarrow exactly as the writer writes data
files. An output larger than 8 MB of input is streamed: the next slice is
decoded while the current one is encoded. The value stats are computed while
the file is written.

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
import os
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from snaplake.commit.file_store_commit import FileStoreCommit
from snaplake.commit.message import CommitMessage, CompactIncrement
from snaplake.commit.table_write import new_data_file_meta, write_data_file, zstd_level
from snaplake.errors import CommitStateUnknownError
from snaplake.store.data_file import (
    DataFileMeta,
    FileSource,
)
from snaplake.store.file_io import FileIO
from snaplake.store.scan import FileStoreScan, Split
from snaplake.store.schema import TableSchema
from snaplake.store.snapshot import CommitKind
from snaplake.store.stats import SimpleStatsParts, compute_value_stats

__all__ = ["AppendCompactor", "CompactResult", "CompactTask"]

logger = logging.getLogger(__name__)

_READ_WORKERS = 4
"""Threads fetching input bytes from a FileIO without a local path (S3, memory)."""

_SLICE_BYTES = 8 << 20
"""Input bytes decoded at a time when an output is streamed (one row group each)."""


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

        Storage:
            Reads the latest snapshot's manifests; writes nothing.
        """
        cm = self.commit
        latest = cm.snapshot_manager.latest_snapshot()
        schema = cm.schema_manager.latest()
        if latest is None or schema is None:
            return []
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
        arrow = self.file_io.arrow_filesystem()
        if arrow is not None:
            fs, prefix = arrow
            # Arrow's multi-threaded scan; to_table() keeps the fragments' order.
            dataset = ds.dataset(
                [p.removeprefix(prefix) for p in paths],
                schema=schema,
                format="parquet",
                filesystem=fs,
            )
            return dataset.to_table(columns=schema.names)
        with ThreadPoolExecutor(max_workers=_READ_WORKERS) as pool:
            tables = list(
                pool.map(
                    lambda data: pq.read_table(pa.BufferReader(data), columns=schema.names),
                    pool.map(self.file_io.read_bytes, paths),
                )
            )
        return pa.concat_tables(tables).cast(schema)

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
        """Read ``paths`` and write their rows, in order, as one Parquet file at ``path``.

        A group larger than :data:`_SLICE_BYTES` is read in slices and streamed:
        the next slice is decoded while the current one is encoded, one row
        group per slice. The value stats are computed while the (last part of
        the) file is written.

        Storage:
            Reads ``paths``; creates ``path`` (deleted again if this fails).
        """
        arrow_schema = schema.arrow_schema
        opts = schema.core_options
        slices = _slices(paths, files)
        arrow = self.file_io.arrow_filesystem()
        buffered = self.file_io.buffered_write_max_bytes
        if len(slices) == 1 or arrow is None or sum(f.file_size_bytes for f in files) <= buffered:
            data = self._read_many(paths, arrow_schema)
            try:
                with ThreadPoolExecutor(max_workers=1) as pool:
                    stats = pool.submit(compute_value_stats, data, schema.value_types)
                    size = write_data_file(
                        file_io=self.file_io,
                        path=path,
                        data=data,
                        compression=opts.file_compression,
                        compression_level=opts.file_compression_zstd_level,
                    )
                    written = _Written(
                        size_bytes=size, row_count=data.num_rows, stats=stats.result()
                    )
            except BaseException:
                self.file_io.delete_many([path])
                raise
            return written
        fs, prefix = arrow
        target = path.removeprefix(prefix)
        if isinstance(fs, pafs.LocalFileSystem):
            os.makedirs(os.path.dirname(target), exist_ok=True)
        try:
            with (
                ThreadPoolExecutor(max_workers=2) as pool,
                fs.open_output_stream(target) as sink,
            ):
                with pq.ParquetWriter(
                    sink,
                    arrow_schema,
                    compression=opts.file_compression,
                    compression_level=zstd_level(
                        opts.file_compression, opts.file_compression_zstd_level
                    ),
                ) as writer:
                    parts: list[pa.Table] = []
                    pending = pool.submit(self._read_many, slices[0], arrow_schema)
                    for i in range(len(slices)):
                        part = pending.result()
                        parts.append(part)
                        if i + 1 < len(slices):
                            pending = pool.submit(self._read_many, slices[i + 1], arrow_schema)
                        else:
                            data = pa.concat_tables(parts)
                            stats = pool.submit(compute_value_stats, data, schema.value_types)
                        writer.write_table(part)
                size = int(sink.tell())
            return _Written(size_bytes=size, row_count=data.num_rows, stats=stats.result())
        except BaseException as exc:
            self.file_io.delete_many([path])
            if isinstance(exc, OSError):
                error = self.file_io.translate_error(exc, path=path, operation="write")
                if error is not exc:
                    raise error from exc
            raise


@dataclass(frozen=True, slots=True, kw_only=True)
class _Written:
    size_bytes: int
    row_count: int
    stats: SimpleStatsParts


def _slices(paths: Sequence[str], files: Sequence[DataFileMeta]) -> list[list[str]]:
    """Split ``paths`` into consecutive slices of about :data:`_SLICE_BYTES` of input."""
    out: list[list[str]] = [[]]
    size = 0
    for p, f in zip(paths, files, strict=True):
        if out[-1] and size + f.file_size_bytes > _SLICE_BYTES:
            out.append([])
            size = 0
        out[-1].append(p)
        size += f.file_size_bytes
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
