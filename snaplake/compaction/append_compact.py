"""Small-file compaction for append tables: plan runs of small files, rewrite, commit once.

Streaming writers leave many small Parquet files. For every (partition,
bucket) of the latest snapshot, files are taken in sequence-number order and
split into maximal runs of consecutive *small* files (below
``target-file-size * compaction.small-file-ratio``; inputs of older schemas
are mapped by field id into the current one). A run of at
least ``compaction.min.file-num`` files is rewritten, in order, into files of
about ``target-file-size``; each output gets a sequence range inside the
run's range, so the row order of the bucket is kept. The rewrite is
committed as one COMPACT snapshot (inputs as ``compact_before`` → DELETE,
outputs as ``compact_after`` → ADD with ``_FILE_SOURCE = COMPACT``).

A *full* compaction (``full=True``) leaves the leading files of at least that
small-file size alone and rewrites every later file of the bucket, large ones
included, when at least three remain and small ones outnumber large ones.

Three steps, usable apart: :meth:`AppendCompactor.plan` (driver: which runs),
:class:`~snaplake.compaction.append_rewrite.AppendRewriter` (per run, here in
a thread pool or on a Spark executor: the new files and their
CommitMessage), :meth:`AppendCompactor.commit_rewritten` (driver: one commit).

Appends never conflict with it. If a concurrent commit deleted one of the
inputs (another compaction, an overwrite), the commit raises
``CommitConflictError``, the outputs are deleted, and the table keeps the
other commit's result: nothing is lost.

Source: Paimon ``BucketedAppendCompactManager`` (files ordered by min sequence
number, ``compaction.min.file-num``, small = below ``compactionFileSize``,
large files at the head left alone; ``FullCompactTask``: leading large files
skipped, the rest rewritten when at least 3 remain and small ones outnumber
large ones) and ``AppendCompactCoordinator`` (bucket-unaware tables,
``target-file-size * compaction.small-file-ratio``).
Difference: Paimon's window may include a large file between small ones; here
runs never cross a large file, so outputs never overlap a kept file's range.
Outputs are written in the table's schema at planning time, whatever schemas
the inputs were written with.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from snaplake.commit.file_store_commit import FileStoreCommit
from snaplake.commit.message import CommitMessage, CompactIncrement
from snaplake.compaction.append_rewrite import AppendRewriter, CompactTask
from snaplake.errors import CommitStateUnknownError, UnsupportedTableError
from snaplake.options import Operation
from snaplake.store.format.data_file import DataFileMeta
from snaplake.store.format.partition import canonical_partition
from snaplake.store.format.schema import TableSchema
from snaplake.store.format.snapshot import CommitKind
from snaplake.store.io.file_io import FileIO
from snaplake.store.read.scan import FileStoreScan, Split
from snaplake.store.support import check_supported
from snaplake.write.table_write import abort_messages

__all__ = ["AppendCompactor", "CompactResult", "CompactTask"]

logger = logging.getLogger(__name__)

_FULL_COMPACT_MIN_FILES = 3
"""Paimon's ``FULL_COMPACT_MIN_FILE``: a full compaction rewrites at least this many files."""


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

    @classmethod
    def of_messages(
        cls,
        snapshot_id: int | None,
        messages: Sequence[CommitMessage],
        *,
        rows_rewritten: int,
        input_files: Sequence[str],
        output_files: Sequence[str],
        start: float,
    ) -> CompactResult:
        """The result of committing ``messages`` (one per bucket) as snapshot ``snapshot_id``.

        Files and bytes are counted from the messages' compact increments (an
        upgraded file counts on both sides, as in Paimon's metrics);
        ``start`` is the ``time.monotonic()`` at which the compaction began.
        """
        before = [f for m in messages for f in m.compact_increment.compact_before]
        after = [f for m in messages for f in m.compact_increment.compact_after]
        return cls(
            snapshot_id=snapshot_id,
            buckets_compacted=len(messages),
            files_before=len(before),
            files_after=len(after),
            bytes_before=sum(f.file_size_bytes for f in before),
            bytes_after=sum(f.file_size_bytes for f in after),
            rows_rewritten=rows_rewritten,
            input_files=tuple(input_files),
            output_files=tuple(output_files),
            duration_s=time.monotonic() - start,
        )


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
        full: Plan a full compaction (see the module docstring) instead of
            runs of small files.
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
        full: bool = False,
    ) -> None:
        self.commit = commit
        self.file_io: FileIO = commit.file_io
        self.paths = commit.paths
        self.partition_filter = partition_filter
        self.full = full
        self._target = target_file_size_bytes
        self._min_files = min_file_num
        self._ratio = small_file_ratio
        self._workers = workers
        self.rewriter = AppendRewriter(
            file_io=commit.file_io, paths=commit.paths, schema_manager=commit.schema_manager
        )

    def _opts(self, schema: TableSchema) -> tuple[int, int, float]:
        o = schema.core_options
        target = self._target if self._target is not None else o.target_file_size_bytes
        min_files = self._min_files if self._min_files is not None else o.compaction_min_file_num
        ratio = self._ratio if self._ratio is not None else o.compaction_small_file_ratio
        return max(target, 1), max(min_files, 2), ratio

    def target_file_size_bytes(self) -> int:
        """The ``target-file-size`` outputs are rolled at (the override, else the table's).

        Storage: lists the schema directory (the latest schema).
        """
        schema = self.commit.schema_manager.latest()
        if schema is None:
            return max(self._target or 1, 1)
        return self._opts(schema)[0]

    def plan(self) -> list[CompactTask]:
        """Return the runs of files due for compaction in the latest snapshot.

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
        check_supported(schema, Operation.MAINTENANCE)
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
        for split, owns in _splits_by_value(scan.plan(), schema):
            if self.full:
                tasks += _full_runs(split, small, owns, schema.id)
                continue
            run: list[int] = []
            for i, f in enumerate([*split.files, None]):
                fits = f is not None and f.file_size_bytes < small
                if fits:
                    run.append(i)
                    continue
                if len(run) >= min_files:
                    tasks.append(_task(split, run, owns, schema.id))
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
        target = self.target_file_size_bytes()
        messages: list[CommitMessage] = []
        with ThreadPoolExecutor(max_workers=max(1, min(self._workers, len(tasks)))) as pool:
            futures = [
                pool.submit(self.rewriter.rewrite, t, target_file_size_bytes=target) for t in tasks
            ]
            errors: list[BaseException] = []
            for fut in futures:
                try:
                    messages += fut.result()
                except BaseException as exc:  # noqa: BLE001 - re-raised below after cleanup
                    errors.append(exc)
        if errors:
            self.abort(messages)
            raise errors[0]
        return self.commit_rewritten(messages, started=start)

    def commit_rewritten(
        self, messages: Sequence[CommitMessage], *, started: float | None = None
    ) -> CompactResult:
        """Commit rewritten runs (one message per run, any order) as one COMPACT snapshot.

        Messages of one (partition, bucket) are merged into one. A commit that
        surely failed deletes the outputs, so they never linger.

        Args:
            messages: What :meth:`AppendRewriter.rewrite` returned for runs of
                :meth:`plan` (in this process or on executors).
            started: ``time.monotonic()`` when the compaction began (for
                ``duration_s``); default now.

        Returns:
            What was rewritten (``snapshot_id`` ``None`` for no messages).

        Raises:
            CommitConflictError: a concurrent commit deleted an input; the
                outputs were deleted.
            CommitRetriesExhaustedError: lost the publish race too often; the
                outputs were deleted.
            CommitStateUnknownError: the outcome is unknown; outputs are kept.

        Storage:
            One manifest, two manifest lists and one snapshot file; on a
            failed commit, deletes the messages' outputs.
        """
        start = time.monotonic() if started is None else started
        if not messages:
            return CompactResult(snapshot_id=None, duration_s=time.monotonic() - start)
        merged: dict[tuple[bytes, int], CommitMessage] = {}
        for m in messages:
            key = (m.partition, m.bucket)
            prev = merged.get(key)
            ci = m.compact_increment
            merged[key] = CommitMessage(
                partition=m.partition,
                bucket=m.bucket,
                total_buckets=m.total_buckets,
                compact_increment=CompactIncrement(
                    compact_before=(prev.compact_increment.compact_before if prev else ())
                    + ci.compact_before,
                    compact_after=(prev.compact_increment.compact_after if prev else ())
                    + ci.compact_after,
                ),
            )
        try:
            result = self.commit.commit(list(merged.values()), kind=CommitKind.COMPACT)
        except CommitStateUnknownError:
            raise
        except Exception:  # surely not published; an interrupt may come after: keep
            self.abort(messages)
            raise
        schema = self.commit.schema_manager.latest()
        assert schema is not None
        dirs = {k: schema.partition_path_of(m.partition) for k, m in merged.items()}
        ins = [(k, f) for k, m in merged.items() for f in m.compact_increment.compact_before]
        outs = [(k, f) for k, m in merged.items() for f in m.compact_increment.compact_after]

        def path(key: tuple[bytes, int], f: DataFileMeta) -> str:
            return self.paths.data_file_path(
                dirs[key], key[1], f.file_name, external_path=f.external_path
            )

        res = CompactResult(
            snapshot_id=result.snapshot_id,
            buckets_compacted=sum(1 for m in merged.values() if m.compact_increment.compact_after),
            files_before=len(ins),
            files_after=len(outs),
            bytes_before=sum(f.file_size_bytes for _, f in ins),
            bytes_after=sum(f.file_size_bytes for _, f in outs),
            rows_rewritten=sum(f.row_count for _, f in outs),
            input_files=tuple(path(k, f) for k, f in ins),
            output_files=tuple(path(k, f) for k, f in outs),
            duration_s=time.monotonic() - start,
        )
        logger.info(
            "compacted %d file(s) into %d in %d bucket(s) of %s (snapshot %s, %.1f ms)",
            res.files_before, res.files_after, res.buckets_compacted, self.paths.root,
            res.snapshot_id, res.duration_s * 1000,
        )  # fmt: skip
        return res

    def abort(self, messages: Sequence[CommitMessage]) -> None:
        """Delete the outputs of rewritten runs that will not be committed.

        Storage: deletes the messages' ``compact_after`` files (missing ones are fine).
        """
        schema = self.commit.schema_manager.latest()
        if schema is not None and messages:
            abort_messages(self.file_io, self.paths, schema, messages)


def _task(
    split: Split, indexes: Sequence[int], owns: Sequence[bytes], schema_id: int
) -> CompactTask:
    return CompactTask(
        split=split,
        files=tuple(split.files[j] for j in indexes),
        paths=tuple(split.paths[j] for j in indexes),
        file_partitions=tuple(owns[j] for j in indexes) if owns else (),
        schema_id=schema_id,
    )


def _splits_by_value(
    splits: Sequence[Split], schema: TableSchema
) -> list[tuple[Split, tuple[bytes, ...]]]:
    """Merge splits whose partitions are equal by value (two writers' encodings).

    A merged split carries the canonical (Java) partition bytes, used for the
    outputs, and its files in sequence order; the second element gives each
    file's own partition bytes (empty when the split was not merged), which
    the DELETE entry removing it must repeat byte for byte.
    """
    types = schema.partition_types
    groups: dict[tuple[bytes, int], list[Split]] = {}
    for split in splits:
        key = (canonical_partition(split.partition, types), split.bucket)
        groups.setdefault(key, []).append(split)
    out: list[tuple[Split, tuple[bytes, ...]]] = []
    for (partition, _), group in groups.items():
        if len(group) == 1 and group[0].partition == partition:
            out.append((group[0], ()))
            continue
        rows = sorted(
            ((f, p, s.partition) for s in group for f, p in zip(s.files, s.paths, strict=True)),
            key=lambda row: (row[0].min_sequence_number, row[0].file_name),
        )
        merged = dataclasses.replace(
            group[0],
            partition=partition,
            files=tuple(f for f, _, _ in rows),
            paths=tuple(p for _, p, _ in rows),
        )
        out.append((merged, tuple(own for _, _, own in rows)))
    return out


def _full_runs(
    split: Split, small: float, owns: Sequence[bytes], schema_id: int
) -> list[CompactTask]:
    """The runs of a full compaction of ``split`` (see the module docstring)."""
    files = split.files
    head = 0
    while head < len(files) and files[head].file_size_bytes >= small:
        head += 1
    rest = range(head, len(files))
    n_small = sum(1 for i in rest if files[i].file_size_bytes < small)
    if len(rest) < _FULL_COMPACT_MIN_FILES or n_small <= len(rest) - n_small:
        return []
    return [_task(split, list(rest), owns, schema_id)]
