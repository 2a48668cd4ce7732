"""Compaction split for a cluster: plan on a driver, rewrite per bucket anywhere, commit once.

A :class:`DistributedCompaction` is what an engine (``snaplake.spark.compact``)
drives:

1. on the driver, :meth:`~DistributedCompaction.plan_units` turns the
   compaction plan of the latest snapshot into :class:`RewriteUnit` s, each
   the rewrite of one (partition, bucket) or of a slice of a large one, of at
   most about ``max_unit_bytes`` of input;
2. anywhere (a Spark executor), :meth:`RewriteUnit.rewrite` writes a unit's
   outputs and returns its CommitMessages; a unit that fails deletes what it
   wrote;
3. on the driver, :meth:`~DistributedCompaction.commit_rewritten` commits
   every message as one COMPACT snapshot with conflict detection (a lost
   conflict deletes the outputs), or :meth:`~DistributedCompaction.abort`
   deletes them.

Units are picklable values holding no client; the engine ships them to
executors and back as CommitMessage bytes. :func:`distributed_compaction`
picks the implementation by table kind:

- append tables: :class:`AppendDistributedCompaction` (the planner of
  ``Table.compact``), units of at most ``max_unit_bytes``;
- primary-key tables: :class:`MergeTreeDistributedCompaction`, Paimon's
  universal (or full) LSM compaction with one unit per bucket (a bucket's
  compaction is one k-way merge, streamed with the in-process bounded memory),
  planned by :class:`~snaplake.compaction.merge_tree_plan.MergeTreeCompactPlanner`,
  rewritten by :func:`~snaplake.compaction.merge_tree_rewrite.rewrite_bucket`,
  committed by :func:`~snaplake.compaction.merge_tree_compact.commit_compaction`
  (conflict detection with the LSM rule). A lost conflict deletes the outputs,
  never an input a unit upgraded to a new level.

Source: Paimon's Spark ``CompactProcedure`` (serialised per-bucket tasks on
executors, one ``BatchTableCommit`` on the driver), ``AppendCompactTask`` and,
for primary-key tables, ``MergeTreeCompactTask`` run per bucket.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from snaplake.commit.file_store_commit import FileStoreCommit
from snaplake.commit.message import CommitMessage
from snaplake.compaction.append_compact import AppendCompactor, CompactResult
from snaplake.compaction.append_rewrite import AppendRewriter, CompactTask, output_groups
from snaplake.compaction.merge_tree_compact import commit_compaction
from snaplake.compaction.merge_tree_plan import BucketCompaction, MergeTreeCompactPlanner
from snaplake.compaction.merge_tree_rewrite import RewriteResult, rewrite_bucket
from snaplake.errors import CommitStateUnknownError
from snaplake.options import CoreOptions
from snaplake.store.format.paths import PathFactory
from snaplake.store.format.schema import SchemaManager
from snaplake.store.io.file_io import FileIO
from snaplake.write.table_write import abort_messages

__all__ = [
    "DEFAULT_MAX_UNIT_BYTES",
    "AppendDistributedCompaction",
    "AppendRewriteUnit",
    "DistributedCompaction",
    "MergeTreeDistributedCompaction",
    "MergeTreeRewriteUnit",
    "RewriteUnit",
    "distributed_compaction",
    "split_run",
]

DEFAULT_MAX_UNIT_BYTES = 1 << 30
"""Input bytes of one unit (1 GiB): a larger bucket is rewritten as several slices."""


class RewriteUnit(Protocol):
    """One executor task's work; a picklable value without clients."""

    @property
    def partition(self) -> bytes:
        """The (partition, bucket) rewritten: partition BinaryRow bytes."""
        ...

    @property
    def bucket(self) -> int:
        """The bucket rewritten."""
        ...

    @property
    def input_bytes(self) -> int:
        """Bytes of the unit's input files (for scheduling, largest first)."""
        ...

    def rewrite(
        self, *, file_io: FileIO, paths: PathFactory, schema_manager: SchemaManager
    ) -> list[CommitMessage]:
        """Write the unit's outputs and return their messages; delete them again on failure."""
        ...


class DistributedCompaction(Protocol):
    """The driver's side of a compaction run on a cluster."""

    def plan_units(self, *, max_unit_bytes: int) -> Sequence[RewriteUnit]:
        """Plan the latest snapshot's compaction as units of at most ``max_unit_bytes``."""
        ...

    def commit_rewritten(
        self, messages: Sequence[CommitMessage], *, started: float | None = None
    ) -> CompactResult:
        """Commit the units' messages as one COMPACT snapshot (outputs deleted on failure)."""
        ...

    def abort(self, messages: Sequence[CommitMessage]) -> None:
        """Delete the outputs of messages that will not be committed."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class AppendRewriteUnit:
    """Runs of small files of one (partition, bucket) to rewrite in one task.

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
            paths: Names the outputs (a job passes one whose names carry its token).
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
    return [
        dataclasses.replace(
            task,
            files=tuple(task.files[i] for i in s),
            paths=tuple(task.paths[i] for i in s),
            file_partitions=tuple(task.file_partitions[i] for i in s)
            if task.file_partitions
            else (),
        )
        for s in slices
    ]


class AppendDistributedCompaction:
    """:class:`DistributedCompaction` for append tables: ``Table.compact``'s planner and commit.

    Args:
        compactors: One :class:`AppendCompactor` per partition spec (one with
            no filter for the whole table); all share one committer.
    """

    def __init__(self, compactors: Sequence[AppendCompactor]) -> None:
        if not compactors:
            raise ValueError("at least one compactor is needed")
        self.compactors = tuple(compactors)

    def plan_units(self, *, max_unit_bytes: int) -> list[AppendRewriteUnit]:
        """Plan the runs (as ``Table.compact`` would) and pack them per bucket into units.

        A bucket named by several partition specs is planned once. Runs of one
        bucket share a unit while it stays within ``max_unit_bytes``; a run
        larger than that is cut by :func:`split_run`. Units come largest first.

        Raises:
            CorruptMetadataError: a manifest is undecodable.
            SchemaMismatchError: a partition spec names a non-partition column.

        Storage: reads the latest snapshot's manifests; writes nothing.
        """
        if max_unit_bytes < 1:
            raise ValueError(f"max_unit_bytes must be >= 1, got {max_unit_bytes}")
        target = self.compactors[0].target_file_size_bytes()
        buckets: dict[tuple[bytes, int], list[CompactTask]] = {}
        planned_by: dict[tuple[bytes, int], int] = {}
        for n, compactor in enumerate(self.compactors):
            for task in compactor.plan():
                key = (task.split.partition, task.split.bucket)
                if planned_by.setdefault(key, n) != n:
                    continue  # an earlier spec covered this bucket
                buckets.setdefault(key, []).extend(
                    split_run(task, target_file_size_bytes=target, max_bytes=max_unit_bytes)
                )
        units: list[AppendRewriteUnit] = []
        for tasks in buckets.values():
            packed: list[list[CompactTask]] = [[]]
            size = 0
            for task in tasks:
                task_bytes = sum(f.file_size_bytes for f in task.files)
                if packed[-1] and size + task_bytes > max_unit_bytes:
                    packed.append([])
                    size = 0
                packed[-1].append(task)
                size += task_bytes
            units += [AppendRewriteUnit(tasks=tuple(p), target_file_size_bytes=target)
                      for p in packed]  # fmt: skip
        units.sort(key=lambda u: -u.input_bytes)
        return units

    def commit_rewritten(
        self, messages: Sequence[CommitMessage], *, started: float | None = None
    ) -> CompactResult:
        """Commit as :meth:`AppendCompactor.commit_rewritten` (outputs deleted on failure)."""
        return self.compactors[0].commit_rewritten(messages, started=started)

    def abort(self, messages: Sequence[CommitMessage]) -> None:
        """Delete the outputs of ``messages`` (see :meth:`AppendCompactor.abort`)."""
        self.compactors[0].abort(messages)


@dataclass(frozen=True, slots=True, kw_only=True)
class MergeTreeRewriteUnit:
    """One bucket's LSM compaction, as planned on the driver, for one task.

    Attributes:
        task: The planned :class:`BucketCompaction` (its inputs, output level,
            whether retractions are dropped).
    """

    task: BucketCompaction

    @property
    def partition(self) -> bytes:
        """Partition BinaryRow bytes of the unit's bucket."""
        return self.task.partition

    @property
    def bucket(self) -> int:
        """The unit's bucket."""
        return self.task.bucket

    @property
    def input_bytes(self) -> int:
        """Bytes of the input files (upgraded ones included)."""
        return sum(f.file_size_bytes for f in self.task.files)

    def rewrite(
        self, *, file_io: FileIO, paths: PathFactory, schema_manager: SchemaManager
    ) -> list[CommitMessage]:
        """Merge the bucket's unit with :func:`rewrite_bucket`; one message.

        Memory is bounded as in process (the streaming k-way merge holds a
        batch per sorted run, never the bucket).

        Args:
            file_io: Storage of the table.
            paths: Names the outputs (a job passes one whose names carry its token).
            schema_manager: Reads the schema the unit was planned with.

        Raises:
            MergeFunctionError: the merge engine rejects a key's versions.
            FileNotFoundError: an input vanished; this unit left no output.
            StorageError: the storage failed; this unit left no output.

        Storage:
            Creates the outputs at the unit's output level in the bucket's
            directory (deleted again if this raises); never deletes an input.
        """
        schema = schema_manager.schema(self.task.schema_id)
        result = rewrite_bucket(self.task, file_io=file_io, paths=paths, schema=schema)
        return [result.message]


class MergeTreeDistributedCompaction:
    """:class:`DistributedCompaction` for primary-key tables: ``Table.compact``'s LSM round.

    Plans exactly as :class:`~snaplake.compaction.merge_tree_compact.MergeTreeCompactor`
    does (universal compaction per bucket, or full compaction), one unit per
    bucket, and commits the units' messages as one COMPACT snapshot; unlike
    the in-process compactor it does not plan again after a lost conflict
    (the rewriting ran elsewhere): the caller runs it again.

    Args:
        commit: The maintenance committer of the table.
        partitions: Partition specs to compact (``None`` = every partition).
        full: Compact every bucket into one top-level sorted run.
        options: Effective options for picking (the daemon's overrides);
            ``None`` = the table's.
    """

    def __init__(
        self,
        *,
        commit: FileStoreCommit,
        partitions: Sequence[Mapping[str, Any]] | None = None,
        full: bool = False,
        options: CoreOptions | None = None,
    ) -> None:
        self.commit = commit
        specs: list[Mapping[str, Any] | None] = (
            list(partitions) if partitions is not None else [None]
        )
        self.planners = tuple(
            MergeTreeCompactPlanner(
                file_io=commit.file_io,
                paths=commit.paths,
                schema_manager=commit.schema_manager,
                snapshot_manager=commit.snapshot_manager,
                full=full,
                partition_filter=spec,
                options=options,
            )
            for spec in specs
        )
        self._filtered = partitions is not None
        self._planned: dict[tuple[bytes, int], BucketCompaction] = {}
        self._full = False

    def plan_units(self, *, max_unit_bytes: int) -> list[MergeTreeRewriteUnit]:
        """Plan the latest snapshot's LSM compaction: one unit per bucket, largest first.

        A bucket named by several partition specs is planned once. A bucket is
        never sliced, whatever ``max_unit_bytes`` says (its unit is one merge
        of overlapping sorted runs); ``max_unit_bytes`` is only validated.

        Raises:
            UnsupportedTableError: a primary-key table snaplake cannot compact.
            CorruptMetadataError: a manifest is undecodable.
            SchemaMismatchError: a partition spec names a non-partition column.
            ValueError: ``max_unit_bytes < 1``.

        Storage: reads the latest snapshot's manifests; writes nothing.
        """
        if max_unit_bytes < 1:
            raise ValueError(f"max_unit_bytes must be >= 1, got {max_unit_bytes}")
        planned: dict[tuple[bytes, int], BucketCompaction] = {}
        full = True
        for planner in self.planners:
            plan = planner.plan()
            full = full and plan.full
            for task in plan.tasks:
                planned.setdefault((task.partition, task.bucket), task)
        self._planned = planned
        # Marked as a full compaction (full-compaction.delta-commits) only when
        # every bucket of the table was planned, as MergeTreeCompactor marks it.
        self._full = full and not self._filtered
        units = [MergeTreeRewriteUnit(task=t) for t in planned.values()]
        units.sort(key=lambda u: -u.input_bytes)
        return units

    def commit_rewritten(
        self, messages: Sequence[CommitMessage], *, started: float | None = None
    ) -> CompactResult:
        """Commit the units' messages with :func:`commit_compaction` (one COMPACT snapshot).

        Conflict detection includes the LSM rule (no overlapping key ranges
        within a level >= 1). A commit that surely failed deletes the outputs,
        never an upgraded input.

        Args:
            messages: What :meth:`MergeTreeRewriteUnit.rewrite` returned for
                the units of the last :meth:`plan_units` (on executors or here).
            started: ``time.monotonic()`` when the compaction began; default now.

        Returns:
            What was rewritten, counted as ``Table.compact()`` counts it
            (``snapshot_id`` ``None`` for no messages).

        Raises:
            CommitConflictError: an input is gone or the outputs overlap another
                file of their level (a concurrent compaction won); outputs deleted.
            CommitRetriesExhaustedError: lost the publish race too often;
                outputs deleted.
            CommitStateUnknownError: the outcome is unknown; outputs kept.

        Storage:
            One manifest, two manifest lists and one snapshot; on a failed
            commit, deletes the messages' new files.
        """
        start = time.monotonic() if started is None else started
        if not messages:
            return CompactResult(snapshot_id=None, duration_s=time.monotonic() - start)
        tasks = [self._task_of(m) for m in messages]
        results = []
        for task, m in zip(tasks, messages, strict=True):
            ci = m.compact_increment
            upgraded = {f.file_name for f in ci.compact_before}
            new = [f for f in ci.compact_after if f.file_name not in upgraded]
            written = tuple(
                self.commit.paths.data_file_path(
                    task.partition_path, m.bucket, f.file_name, external_path=f.external_path
                )
                for f in new
            )
            rows = sum(f.row_count for f in new)
            results.append(RewriteResult(message=m, written=written, rows_rewritten=rows))
        try:
            committed = commit_compaction(self.commit, results, full=self._full)
        except CommitStateUnknownError:
            raise
        except Exception:  # surely not published; an interrupt may come after: keep
            self.abort(messages)
            raise
        return CompactResult.of_messages(
            committed.snapshot_id,
            messages,
            rows_rewritten=sum(r.rows_rewritten for r in results),
            input_files=[p for t in tasks for p in t.paths],
            output_files=[p for r in results for p in r.written],
            start=start,
        )

    def abort(self, messages: Sequence[CommitMessage]) -> None:
        """Delete the new files of ``messages`` (never an upgraded input).

        Storage: deletes data files only (missing ones are fine).
        """
        schema = self.commit.schema_manager.latest()
        if schema is not None and messages:
            abort_messages(self.commit.file_io, self.commit.paths, schema, messages)

    def _task_of(self, message: CommitMessage) -> BucketCompaction:
        task = self._planned.get((message.partition, message.bucket))
        if task is None:
            raise ValueError(
                f"a message for bucket {message.bucket} of a partition this job did not plan; "
                "commit only messages of the units of the last plan_units()"
            )
        return task


def distributed_compaction(
    *,
    commit: FileStoreCommit,
    partitions: Sequence[Mapping[str, Any]] | None = None,
    full: bool = False,
    options: CoreOptions | None = None,
) -> DistributedCompaction:
    """Return the distributed compaction of the committer's table (chosen by table kind).

    Args:
        commit: The maintenance committer of the table.
        partitions: Partition specs (``{key: value}``, a subset of the keys is
            fine) to compact; ``None`` = every partition.
        full: A full compaction (append tables: see
            :mod:`snaplake.compaction.append_compact`; primary-key tables:
            every bucket into one top-level sorted run).
        options: Effective options (the daemon's overrides); ``None`` = the
            table's. Append tables take ``target-file-size``,
            ``compaction.min.file-num`` and ``compaction.small-file-ratio``
            from them, primary-key tables pick their compaction with them.

    Raises:
        ValueError: an empty ``partitions`` list.
    """
    if partitions is not None and not partitions:
        raise ValueError("partitions is empty; pass None to compact every partition")
    schema = commit.schema_manager.latest()
    if schema is not None and schema.primary_keys:
        return MergeTreeDistributedCompaction(
            commit=commit, partitions=partitions, full=full, options=options
        )
    specs: list[Mapping[str, Any] | None] = list(partitions) if partitions is not None else [None]
    return AppendDistributedCompaction(
        [
            AppendCompactor(
                commit=commit,
                partition_filter=spec,
                target_file_size_bytes=options.target_file_size_bytes if options else None,
                min_file_num=options.compaction_min_file_num if options else None,
                small_file_ratio=options.compaction_small_file_ratio if options else None,
                full=full,
            )
            for spec in specs
        ]
    )
