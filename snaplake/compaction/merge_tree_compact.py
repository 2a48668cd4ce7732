"""LSM compaction of primary-key tables: the key-value kind's planner and rewrite units.

:class:`MergeTreeCompactionPlanner` is the key-value kind's
:class:`~snaplake.compaction.job.CompactionPlanner`:
:class:`~snaplake.compaction.merge_tree_plan.MergeTreeCompactPlanner` picks,
per (partition, bucket), the unit to compact (Paimon's universal compaction,
or everything into the top level), and each bucket becomes one
:class:`MergeTreeRewriteUnit` (one k-way merge, never sliced), rewritten by
:func:`~snaplake.compaction.merge_tree_rewrite.rewrite_bucket`. The
:class:`~snaplake.compaction.job.CompactionJob` commits the units' messages
as one COMPACT snapshot, marked as a full compaction when every bucket of
the table was fully compacted; conflict detection includes the LSM rule (no
overlapping key ranges within a level >= 1). A lost commit deletes the
outputs, never an input a unit only moved to another level.

:func:`compact_new_files` compacts a writer's own new files before its
commit (first-row and deletion-vector tables, whose readers skip level 0).

Source: Paimon ``MergeTreeCompactManager``, ``MergeTreeCompactTask``,
``FileStoreCommitImpl`` (COMPACT commits).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from snaplake.commit.message import CommitMessage
from snaplake.compaction.job import CompactionPlan, partition_specs
from snaplake.compaction.merge_tree_plan import (
    FULL_COMPACTION_PROPERTY,
    BucketCompaction,
    MergeTreeCompactPlanner,
    SortedRunStats,
    bucket_dv_index,
    plan_bucket,
)
from snaplake.compaction.merge_tree_rewrite import rewrite_bucket
from snaplake.mergetree.sorted_run import KeyComparator
from snaplake.mergetree.universal import UniversalCompaction
from snaplake.options import CoreOptions
from snaplake.store.format.data_file import DataFileMeta
from snaplake.store.format.paths import PathFactory
from snaplake.store.format.schema import SchemaManager, TableSchema
from snaplake.store.io.file_io import FileIO
from snaplake.store.read.scan import FileStoreScan
from snaplake.store.table_storage import TableStorage

__all__ = ["MergeTreeCompactionPlanner", "MergeTreeRewriteUnit", "compact_new_files"]


@dataclass(frozen=True, slots=True, kw_only=True)
class MergeTreeRewriteUnit:
    """One bucket's LSM compaction, as planned, for one task (picklable).

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

        Memory is bounded by the streaming k-way merge (a batch per sorted
        run, never the bucket).

        Args:
            file_io: Storage of the table.
            paths: Names the outputs (a Spark job passes one whose names carry its token).
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


class MergeTreeCompactionPlanner:
    """The key-value kind's compaction planner: one unit per bucket universal compaction picks.

    Args:
        table: The table's storage, paths and managers.
        full: Compact every bucket into one top-level sorted run.
        partitions: Partition specs to compact (``None`` = every partition).
        options: Effective options for picking (the daemon's overrides);
            ``None`` = the table's.

    Raises:
        ValueError: an empty ``partitions`` list.
    """

    workers: ClassVar[int] = 2
    """Buckets merged at a time in process by default (each holds one k-way merge)."""

    def __init__(
        self,
        table: TableStorage,
        *,
        full: bool = False,
        partitions: Sequence[Mapping[str, Any]] | None = None,
        options: CoreOptions | None = None,
    ) -> None:
        self.planners = tuple(
            MergeTreeCompactPlanner(table, full=full, partition_filter=spec, options=options)
            for spec in partition_specs(partitions)
        )
        self._filtered = partitions is not None

    def plan(self, *, max_unit_bytes: int) -> CompactionPlan:
        """Plan the latest snapshot's LSM compaction: one unit per bucket, largest first.

        A bucket named by several partition specs is planned once. A bucket is
        never sliced, whatever ``max_unit_bytes`` says (its unit is one merge
        of overlapping sorted runs); ``max_unit_bytes`` is only validated. The
        plan marks its commit as a full compaction
        (``full-compaction.delta-commits`` counts from there) only when every
        bucket of the table was planned for one.

        Raises:
            CorruptMetadataError: a manifest is undecodable.
            SchemaMismatchError: a partition spec names a non-partition column.
            ValueError: ``max_unit_bytes < 1``.

        Storage: reads the latest snapshot's manifests; writes nothing.
        """
        if max_unit_bytes < 1:
            raise ValueError(f"max_unit_bytes must be >= 1, got {max_unit_bytes}")
        planned: dict[tuple[bytes, int], BucketCompaction] = {}
        full = True
        snapshot_id = None
        runs = SortedRunStats()
        for planner in self.planners:
            plan = planner.plan()
            full = full and plan.full
            snapshot_id = plan.snapshot_id
            runs = SortedRunStats(
                buckets=runs.buckets + plan.runs.buckets,
                max_sorted_runs=max(runs.max_sorted_runs, plan.runs.max_sorted_runs),
                buckets_over_trigger=runs.buckets_over_trigger + plan.runs.buckets_over_trigger,
            )
            for task in plan.tasks:
                planned.setdefault((task.partition, task.bucket), task)
        units = sorted((MergeTreeRewriteUnit(task=t) for t in planned.values()),
                       key=lambda u: -u.input_bytes)  # fmt: skip
        marked = full and not self._filtered
        return CompactionPlan(
            snapshot_id=snapshot_id,
            units=tuple(units),
            whole_buckets=True,
            properties={FULL_COMPACTION_PROPERTY: "true"} if marked else {},
            sorted_runs=runs,
        )

    def commit_messages(
        self, plan: CompactionPlan, messages: Sequence[CommitMessage]
    ) -> list[CommitMessage]:
        """The bucket messages to commit (empty ones dropped), each of a bucket of ``plan``.

        Raises:
            ValueError: a message of a bucket ``plan`` did not plan.
        """
        planned = {(u.partition, u.bucket) for u in plan.units}
        for m in messages:
            if (m.partition, m.bucket) not in planned:
                raise ValueError(
                    f"a message for bucket {m.bucket} of a partition this job did not plan; "
                    "commit only messages of the units of the plan"
                )
        return [m for m in messages if not m.is_empty()]


def compact_new_files(
    table: TableStorage, *, schema: TableSchema, messages: Sequence[CommitMessage]
) -> list[CommitMessage]:
    """Lift a writer's new level-0 files with lookup compaction, in the writer's commit.

    Paimon's readers skip level 0 of first-row and deletion-vector tables, so
    such a writer compacts its level-0 files into a level >= 1 before it commits
    (first-row: dropping rows whose key an older version already holds;
    deletion vectors: marking the superseded rows in the bucket's new vectors
    file, which the message's compact increment replaces the old one with).
    Each returned message keeps the new files as ADDs and adds the compaction
    (the new files among its inputs); the commit publishes the new files
    in an APPEND snapshot, then the compaction in a COMPACT one.

    Args:
        table: The table's storage, paths and managers (its latest snapshot
            holds the buckets' current files).
        schema: The writer's schema (the table's latest is used when newer).
        messages: The writer's prepared messages (new level-0 files).

    Raises:
        MergeFunctionError: the merge engine rejects a key's versions.

    Storage: writes the compaction outputs; on failure deletes them (the
    caller aborts the level-0 files).

    Source: Paimon ``MergeTreeWriter.prepareCommit`` with ``lookup`` (waits
    for the forced level-0 compaction), ``ForceUpLevel0Compaction``.
    """
    if not any(m.data_increment.new_files for m in messages):
        return list(messages)  # nothing to lift: no schema or snapshot read
    file_io, paths = table.file_io, table.paths
    current = table.schema_manager.latest()
    if current is not None and current.id > schema.id:
        # The writer was opened before an alter: compact in the current schema, so
        # files written under it since keep their newer columns (the writer's new
        # files read into it by field id).
        schema = current
    latest = table.snapshot_manager.latest_snapshot()
    dv_files = (
        bucket_dv_index(table, latest) if schema.core_options.deletion_vectors_enabled else {}
    )
    live: dict[tuple[bytes, int], tuple[list[DataFileMeta], list[str]]] = {}
    if latest is not None:
        scan = FileStoreScan(
            file_io=file_io, paths=paths, schema_manager=table.schema_manager, snapshot=latest
        )
        for split in scan.plan():
            live[(split.partition, split.bucket)] = (list(split.files), list(split.paths))
    cmp = KeyComparator(schema.key_types)
    strategy = UniversalCompaction.from_options(schema.core_options)
    out: list[CommitMessage] = []
    written: list[str] = []
    try:
        for m in messages:
            new = list(m.data_increment.new_files)
            if not new:
                out.append(m)
                continue
            part_path = schema.partition_path_of(m.partition)
            files, file_paths = live.get((m.partition, m.bucket), ([], []))
            new_paths = [paths.data_file_path(part_path, m.bucket, f.file_name) for f in new]
            task, _ = plan_bucket(
                schema,
                cmp,
                strategy,
                partition=m.partition,
                partition_path=part_path,
                bucket=m.bucket,
                total_buckets=m.total_buckets,
                files=[*files, *new],
                paths=[*file_paths, *new_paths],
                full=False,
                dv_index=dv_files.get((m.partition, m.bucket)),
            )
            if task is None:
                out.append(m)
                continue
            result = rewrite_bucket(task, file_io=file_io, paths=paths, schema=schema)
            written.extend(result.written)
            out.append(dataclasses.replace(m, compact_increment=result.message.compact_increment))
    except BaseException:
        file_io.delete_many(written)
        raise
    return out
