"""Small-file compaction of append tables: the append kind's planner and rewrite units.

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

:class:`AppendCompactionPlanner` is the append kind's
:class:`~snaplake.compaction.job.CompactionPlanner`: it packs the runs of a
bucket into :class:`AppendRewriteUnit` s of at most ``max_unit_bytes`` of
input (a larger run is cut by :func:`split_run` where an output rolls), and
merges the units' messages per (partition, bucket) before the commit. The
:class:`~snaplake.compaction.job.CompactionJob` runs them.

Appends never conflict with it. If a concurrent commit deleted one of the
inputs (another compaction, an overwrite), the commit raises
``CommitConflictError``, the outputs are deleted, and the table keeps the
other commit's result: nothing is lost.

Source: Paimon ``BucketedAppendCompactManager`` (files ordered by min sequence
number, ``compaction.min.file-num``, small = below ``compactionFileSize``,
large files at the head left alone; ``FullCompactTask``: leading large files
skipped, the rest rewritten when at least 3 remain and small ones outnumber
large ones), ``AppendCompactCoordinator`` (bucket-unaware tables,
``target-file-size * compaction.small-file-ratio``) and ``AppendCompactTask``.
Difference: Paimon's window may include a large file between small ones; here
runs never cross a large file, so outputs never overlap a kept file's range.
Outputs are written in the table's schema at planning time, whatever schemas
the inputs were written with.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from snaplake.commit.message import CommitMessage, CompactIncrement
from snaplake.compaction.append_rewrite import AppendRewriter, CompactTask, output_groups
from snaplake.compaction.job import CompactionPlan, partition_specs
from snaplake.options import CoreOptions
from snaplake.options.registry import DELETION_VECTOR_INDEX_FILE_TARGET_SIZE
from snaplake.store.format.partition import canonical_partition
from snaplake.store.format.paths import PathFactory
from snaplake.store.format.schema import SchemaManager, TableSchema
from snaplake.store.io.file_io import FileIO
from snaplake.store.read.scan import FileStoreScan, Split
from snaplake.store.table_storage import TableStorage
from snaplake.write.deletion_files import DeletionFileMaintainer, delete_index_files
from snaplake.write.table_write import abort_messages

__all__ = [
    "AppendCompactionPlanner",
    "AppendRewriteUnit",
    "CompactTask",
    "drop_compacted_vectors",
    "split_run",
]

_FULL_COMPACT_MIN_FILES = 3
"""Paimon's ``FULL_COMPACT_MIN_FILE``: a full compaction rewrites at least this many files."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AppendRewriteUnit:
    """Runs of small files of one (partition, bucket) to rewrite in one task (picklable).

    Attributes:
        tasks: The runs (or slices of one run), in sequence order.
        target_file_size_bytes: Where outputs are rolled.
    """

    tasks: tuple[CompactTask, ...]
    target_file_size_bytes: int

    def __post_init__(self) -> None:
        if not self.tasks:
            raise ValueError("a rewrite unit needs at least one run")

    @property
    def partition(self) -> bytes:
        """Partition BinaryRow bytes of the unit's bucket."""
        return self.tasks[0].split.partition

    @property
    def bucket(self) -> int:
        """The unit's bucket."""
        return self.tasks[0].split.bucket

    @property
    def input_bytes(self) -> int:
        """Bytes of the input files."""
        return sum(f.file_size_bytes for t in self.tasks for f in t.files)

    def rewrite(
        self, *, file_io: FileIO, paths: PathFactory, schema_manager: SchemaManager
    ) -> list[CommitMessage]:
        """Rewrite every run with :class:`AppendRewriter`; one message per run.

        Args:
            file_io: Storage of the table.
            paths: Names the outputs (a Spark job passes one whose names carry its token).
            schema_manager: Reads the schemas the runs were written with.

        Raises:
            FileNotFoundError: an input vanished; this unit left no output.
            StorageError: the storage failed; this unit left no output.

        Storage:
            Creates the outputs in the bucket's directory; deletes them again
            if a later run of the unit fails.
        """
        rewriter = AppendRewriter(file_io=file_io, paths=paths, schema_manager=schema_manager)
        done: list[CommitMessage] = []
        try:
            for task in self.tasks:
                done += rewriter.rewrite(task, target_file_size_bytes=self.target_file_size_bytes)
        except BaseException:
            schema = schema_manager.latest()
            if schema is not None and done:
                abort_messages(file_io, paths, schema, done)
            raise
        return done


class AppendCompactionPlanner:
    """The append kind's compaction planner: runs of small files, packed into units per bucket.

    Args:
        table: The table's storage, paths and managers (its latest snapshot
            is the one planned, its latest schema the outputs').
        full: Plan a full compaction (see the module docstring) instead of
            runs of small files.
        partitions: Partition specs (``{key: value}``, a subset of the keys is
            fine) to compact; ``None`` = every partition.
        options: Effective options (``target-file-size``,
            ``compaction.min.file-num``, ``compaction.small-file-ratio``);
            ``None`` = the latest schema's.
        max_files_per_bucket: Plan at most this many input files per
            (partition, bucket): each keeps its oldest ones (a prefix of a run
            of consecutive small files is itself such a run), and the plan
            says it cut something off (``capped``), so a backlog is compacted
            in rounds of bounded memory; ``None`` = no cap.

    Raises:
        ValueError: an empty ``partitions`` list, or ``max_files_per_bucket < 2``.
    """

    workers: ClassVar[int] = 4
    """Units rewritten at a time in process by default (each streams its runs)."""

    def __init__(
        self,
        table: TableStorage,
        *,
        full: bool = False,
        partitions: Sequence[Mapping[str, Any]] | None = None,
        options: CoreOptions | None = None,
        max_files_per_bucket: int | None = None,
    ) -> None:
        if max_files_per_bucket is not None and max_files_per_bucket < 2:
            raise ValueError(f"max_files_per_bucket must be >= 2, got {max_files_per_bucket}")
        self.table = table
        self.full = full
        self.specs = partition_specs(partitions)
        self.options = options
        self.max_files_per_bucket = max_files_per_bucket

    def plan(self, *, max_unit_bytes: int) -> CompactionPlan:
        """Plan the latest snapshot: due runs, capped per bucket, packed into units.

        A bucket named by several partition specs is planned once. Runs of one
        bucket share a unit while it stays within ``max_unit_bytes``; a run
        larger than that is cut by :func:`split_run`. Units come largest first.

        Raises:
            CorruptMetadataError: a manifest is undecodable.
            SchemaMismatchError: a partition spec names a non-partition column.
            ValueError: ``max_unit_bytes < 1``.

        Storage: reads the latest snapshot's manifests; writes nothing.
        """
        if max_unit_bytes < 1:
            raise ValueError(f"max_unit_bytes must be >= 1, got {max_unit_bytes}")
        t = self.table
        latest = t.snapshot_manager.latest_snapshot()
        schema = t.schema_manager.latest()
        if latest is None or schema is None:
            return CompactionPlan(snapshot_id=None)
        target, min_files, ratio = self._opts(schema)
        buckets: dict[tuple[bytes, int], list[CompactTask]] = {}
        planned_by: dict[tuple[bytes, int], int] = {}
        for n, spec in enumerate(self.specs):
            scan = FileStoreScan(
                file_io=t.file_io, paths=t.paths, schema_manager=t.schema_manager,
                snapshot=latest, partition_filter=spec, deletion_vectors=True,
            )  # fmt: skip
            for task in _runs(scan.plan(), schema, target * ratio, min_files, full=self.full):
                key = (task.split.partition, task.split.bucket)
                if planned_by.setdefault(key, n) == n:  # else an earlier spec covered it
                    buckets.setdefault(key, []).append(task)
        capped = False
        units: list[AppendRewriteUnit] = []
        for tasks in buckets.values():
            kept, cut = _cap(tasks, self.max_files_per_bucket)
            capped = capped or cut
            sliced = [
                piece
                for task in kept
                for piece in split_run(
                    task, target_file_size_bytes=target, max_bytes=max_unit_bytes
                )
            ]
            units += _pack(sliced, target=target, max_unit_bytes=max_unit_bytes)
        units.sort(key=lambda u: -u.input_bytes)
        return CompactionPlan(snapshot_id=latest.id, units=tuple(units), capped=capped)

    def commit_messages(
        self, plan: CompactionPlan, messages: Sequence[CommitMessage]
    ) -> list[CommitMessage]:
        """Merge the runs' messages (any order) into one message per (partition, bucket).

        The deletion vectors of the rewritten inputs are dropped: each bucket's
        index files holding one are replaced (``CompactIncrement`` new and
        deleted index files; see :func:`drop_compacted_vectors`).

        Raises:
            FileNotFoundError, CorruptMetadataError: a vector file is missing or damaged.

        Storage: writes the replacing DELETION_VECTORS files.
        """
        return drop_compacted_vectors(
            self.table, plan, self._merge(messages), target_size=self._dv_target_size()
        )

    def _dv_target_size(self) -> int:
        schema = self.table.schema_manager.latest()
        opts = self.options or (schema.core_options if schema is not None else None)
        return (opts.get(DELETION_VECTOR_INDEX_FILE_TARGET_SIZE) if opts else None) or 2 << 20

    @staticmethod
    def _merge(messages: Sequence[CommitMessage]) -> list[CommitMessage]:
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
        return list(merged.values())

    def _opts(self, schema: TableSchema) -> tuple[int, int, float]:
        o = self.options or schema.core_options
        return (
            max(o.target_file_size_bytes, 1),
            max(o.compaction_min_file_num, 2),
            o.compaction_small_file_ratio,
        )


def split_run(
    task: CompactTask, *, target_file_size_bytes: int, max_bytes: int
) -> list[CompactTask]:
    """Cut a run larger than ``max_bytes`` into consecutive slices at output boundaries.

    Slices end where :func:`~snaplake.compaction.append_rewrite.output_groups`
    closes an output, so rewriting the slices one by one produces the same
    output files (same rows, same order) as rewriting the run whole; only
    each slice's sequence range is its own files' range.

    Args:
        task: One run.
        target_file_size_bytes: Where outputs are rolled.
        max_bytes: Input bytes per slice (a single output group larger than
            this stays one slice).
    """
    if sum(f.file_size_bytes for f in task.files) <= max_bytes:
        return [task]
    slices: list[list[int]] = [[]]
    size = 0
    for group in output_groups(task.files, target_file_size_bytes):
        group_bytes = sum(task.files[i].file_size_bytes for i in group)
        if slices[-1] and size + group_bytes > max_bytes:
            slices.append([])
            size = 0
        slices[-1] += group
        size += group_bytes
    return [_slice(task, s) for s in slices]


def _slice(task: CompactTask, indexes: Sequence[int]) -> CompactTask:
    """``task`` with only the files at ``indexes`` (their paths and own partitions aligned)."""
    return dataclasses.replace(
        task,
        files=tuple(task.files[i] for i in indexes),
        paths=tuple(task.paths[i] for i in indexes),
        file_partitions=tuple(task.file_partitions[i] for i in indexes)
        if task.file_partitions
        else (),
    )


def _cap(tasks: Sequence[CompactTask], max_files: int | None) -> tuple[list[CompactTask], bool]:
    """Keep the oldest ``max_files`` planned files of one bucket; say whether any was cut off.

    A run cut to fewer than two files is left for a later round.
    """
    if max_files is None:
        return list(tasks), False
    room = max_files
    out: list[CompactTask] = []
    cut = False
    for task in tasks:
        keep = min(room, len(task.files))
        cut = cut or keep < len(task.files)
        if keep < 2:  # nothing to merge; the next round takes it
            continue
        room -= keep
        out.append(_slice(task, range(keep)))
    return out, cut


def _pack(
    tasks: Sequence[CompactTask], *, target: int, max_unit_bytes: int
) -> list[AppendRewriteUnit]:
    """Pack one bucket's runs, in order, into units of at most ``max_unit_bytes`` of input."""
    packed: list[list[CompactTask]] = [[]]
    size = 0
    for task in tasks:
        task_bytes = sum(f.file_size_bytes for f in task.files)
        if packed[-1] and size + task_bytes > max_unit_bytes:
            packed.append([])
            size = 0
        packed[-1].append(task)
        size += task_bytes
    return [AppendRewriteUnit(tasks=tuple(p), target_file_size_bytes=target) for p in packed if p]


def _runs(
    splits: Sequence[Split], schema: TableSchema, small: float, min_files: int, *, full: bool
) -> list[CompactTask]:
    """The runs due in ``splits``: of small files, or of a full compaction."""
    tasks: list[CompactTask] = []
    for split, owns in _splits_by_value(splits, schema):
        if full:
            tasks += _full_runs(split, small, owns, schema.id)
            continue
        run: list[int] = []
        for i, f in enumerate([*split.files, None]):
            if f is not None and f.file_size_bytes < small:
                run.append(i)
                continue
            if len(run) >= min_files:
                tasks.append(_task(split, run, owns, schema.id))
            run = []
    return tasks


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
            deletion_files=tuple(d for s in group for d in s.deletion_files),
            deletion_paths=tuple(d for s in group for d in s.deletion_paths),
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


def drop_compacted_vectors(
    table: TableStorage,
    plan: CompactionPlan,
    messages: Sequence[CommitMessage],
    *,
    target_size: int,
) -> list[CommitMessage]:
    """Add to each bucket's message the replacement of the vectors of its rewritten inputs.

    The planned splits carry each bucket's DELETION_VECTORS files (cut to its
    live files); the files holding a vector of an input are replaced by files
    with the bucket's other vectors (:class:`DeletionFileMaintainer`), so no
    vector names a file the compaction removed.

    Raises:
        FileNotFoundError, CorruptMetadataError: a vector file is missing or damaged.

    Storage: writes DELETION_VECTORS files (deleted again if this fails).

    Source: Paimon ``AppendCompactTask.doCompact`` (``notifyRemovedDeletionVector``).
    """
    splits = {
        (t.split.partition, t.split.bucket): t.split
        for u in plan.units
        if isinstance(u, AppendRewriteUnit)
        for t in u.tasks
        if t.split.deletion_files
    }
    if not splits:
        return list(messages)
    schema = table.schema_manager.latest()
    bitmap64 = schema is not None and schema.core_options.deletion_vectors_bitmap64
    out: list[CommitMessage] = []
    try:
        for m in messages:
            split = splits.get((m.partition, m.bucket))
            if split is None:
                out.append(m)
                continue
            maintainer = DeletionFileMaintainer(
                file_io=table.file_io, paths=table.paths, index_files=split.deletion_files,
                live_files={f.file_name for f in split.files}, bucketed=split.total_buckets > 0,
                target_size=target_size, bitmap64=bitmap64,
            )  # fmt: skip
            for f in m.compact_increment.compact_before:
                maintainer.remove(f.file_name)
            new, replaced = maintainer.persist()
            ci = dataclasses.replace(
                m.compact_increment, new_index_files=new, deleted_index_files=replaced
            )
            out.append(dataclasses.replace(m, compact_increment=ci))
    except BaseException:
        delete_index_files(
            table.file_io,
            table.paths,
            [f for m in out for f in m.compact_increment.new_index_files],
        )
        raise
    return out
