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
executors and back as CommitMessage bytes. Append tables are handled by
:class:`AppendDistributedCompaction` (the planner of ``Table.compact``); a
primary-key table's LSM compaction plugs in as another implementation of the
two protocols (:func:`distributed_compaction` picks by table kind).

Source: Paimon's Spark ``CompactProcedure`` (serialised per-bucket tasks on
executors, one ``BatchTableCommit`` on the driver) and ``AppendCompactTask``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from snaplake.commit.file_store_commit import FileStoreCommit
from snaplake.commit.message import CommitMessage
from snaplake.commit.table_write import abort_messages
from snaplake.compaction.append_compact import AppendCompactor, CompactResult
from snaplake.compaction.append_rewrite import AppendRewriter, CompactTask, output_groups
from snaplake.errors import UnsupportedTableError
from snaplake.store.format.paths import PathFactory
from snaplake.store.format.schema import SchemaManager
from snaplake.store.io.file_io import FileIO

__all__ = [
    "DEFAULT_MAX_UNIT_BYTES",
    "AppendDistributedCompaction",
    "AppendRewriteUnit",
    "DistributedCompaction",
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


def distributed_compaction(
    *,
    commit: FileStoreCommit,
    partitions: Sequence[Mapping[str, Any]] | None = None,
    full: bool = False,
    target_file_size_bytes: int | None = None,
    min_file_num: int | None = None,
    small_file_ratio: float | None = None,
) -> DistributedCompaction:
    """Return the distributed compaction of the committer's table (chosen by table kind).

    Args:
        commit: The maintenance committer of the table.
        partitions: Partition specs (``{key: value}``, a subset of the keys is
            fine) to compact; ``None`` = every partition.
        full: A full compaction (see :mod:`snaplake.compaction.append_compact`).
        target_file_size_bytes: Override ``target-file-size``.
        min_file_num: Override ``compaction.min.file-num``.
        small_file_ratio: Override ``compaction.small-file-ratio``.

    Raises:
        UnsupportedTableError: a primary-key table (its LSM compaction does
            not run distributed yet); nothing was written.
        ValueError: an empty ``partitions`` list.
    """
    schema = commit.schema_manager.latest()
    if schema is not None and schema.primary_keys:
        raise UnsupportedTableError(
            f"table {commit.paths.root} has a primary key {list(schema.primary_keys)}; "
            "distributed compaction handles append tables only so far — compact it in process",
            feature="primary-key table",
            operation="distributed compaction",
        )
    if partitions is not None and not partitions:
        raise ValueError("partitions is empty; pass None to compact every partition")
    specs: list[Mapping[str, Any] | None] = list(partitions) if partitions is not None else [None]
    return AppendDistributedCompaction(
        [
            AppendCompactor(
                commit=commit,
                partition_filter=spec,
                target_file_size_bytes=target_file_size_bytes,
                min_file_num=min_file_num,
                small_file_ratio=small_file_ratio,
                full=full,
            )
            for spec in specs
        ]
    )
