"""LSM compaction of primary-key tables: plan on a driver, rewrite per bucket, commit.

Three steps, so an engine such as Spark can run the middle one on executors:

1. :class:`~snaplake.compaction.merge_tree_plan.MergeTreeCompactPlanner` picks,
   per (partition, bucket), the unit to compact (``merge_tree_plan``).
2. :func:`~snaplake.compaction.merge_tree_rewrite.rewrite_bucket` turns one task
   into one ``CommitMessage`` (``merge_tree_rewrite``).
3. :func:`commit_compaction` publishes one COMPACT snapshot (compact
   before/after). :class:`MergeTreeCompactor` runs all three; on a conflict
   (another compaction won, or an LSM overlap) it deletes its own outputs,
   never an upgraded input, and plans again on the new latest snapshot.
   :func:`compact_new_files` compacts a writer's own new files before its
   commit (inline mode, Spark writers).

Source: Paimon ``MergeTreeCompactManager``, ``MergeTreeCompactTask``,
``FileStoreCommitImpl`` (COMPACT commits).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from snaplake.commit.file_store_commit import FileStoreCommit
from snaplake.commit.message import CommitMessage
from snaplake.commit.result import CommitResult
from snaplake.compaction.append_compact import CompactResult
from snaplake.compaction.merge_tree_plan import (
    FULL_COMPACTION_PROPERTY,
    BucketCompaction,
    CompactPlan,
    MergeTreeCompactPlanner,
    plan_bucket,
)
from snaplake.compaction.merge_tree_rewrite import RewriteResult, rewrite_bucket
from snaplake.errors import CommitConflictError, CommitStateUnknownError
from snaplake.mergetree.sorted_run import KeyComparator
from snaplake.mergetree.universal import UniversalCompaction
from snaplake.options import CoreOptions
from snaplake.store.format.data_file import DataFileMeta
from snaplake.store.format.paths import PathFactory
from snaplake.store.format.schema import SchemaManager, TableSchema
from snaplake.store.format.snapshot import CommitKind
from snaplake.store.io.file_io import FileIO
from snaplake.store.read.scan import FileStoreScan
from snaplake.store.snapshot_manager import SnapshotManager

__all__ = ["MergeTreeCompactor", "commit_compaction", "compact_new_files"]

logger = logging.getLogger(__name__)

_MAX_REPLANS = 3


def commit_compaction(
    commit: FileStoreCommit, results: Sequence[RewriteResult], *, full: bool
) -> CommitResult:
    """Publish the rewrites as one COMPACT snapshot.

    Args:
        commit: The maintenance committer.
        results: Output of :func:`rewrite_bucket`, one per bucket.
        full: Every bucket of the table was fully compacted (marks the
            snapshot for ``full-compaction.delta-commits``).

    Raises:
        CommitConflictError: an input is no longer live or the outputs overlap
            another file of their level (a concurrent compaction won).
        CommitRetriesExhaustedError: writers kept winning the publish race.

    Storage: one manifest, two manifest lists, one snapshot.
    """
    messages = [r.message for r in results if not r.message.is_empty()]
    properties = {FULL_COMPACTION_PROPERTY: "true"} if full else None
    return commit.commit(messages, kind=CommitKind.COMPACT, properties=properties)


class MergeTreeCompactor:
    """Plan, rewrite (buckets in parallel) and commit one LSM compaction round.

    Args:
        commit: The maintenance committer.
        full: Compact every bucket fully.
        partition_filter: Only these partitions.
        workers: Buckets rewritten at once (each holds one k-way merge in memory).
        max_replans: Plans tried when a concurrent compaction wins.
        task_filter: Optional filter of planned tasks (the daemon caps work per run).
        options: Effective options for picking (the daemon's overrides).
    """

    def __init__(
        self,
        *,
        commit: FileStoreCommit,
        full: bool = False,
        partition_filter: Mapping[str, Any] | None = None,
        workers: int = 2,
        max_replans: int = _MAX_REPLANS,
        task_filter: Callable[[Sequence[BucketCompaction]], Sequence[BucketCompaction]]
        | None = None,
        options: CoreOptions | None = None,
    ) -> None:
        self.commit = commit
        self.planner = MergeTreeCompactPlanner(
            file_io=commit.file_io,
            paths=commit.paths,
            schema_manager=commit.schema_manager,
            snapshot_manager=commit.snapshot_manager,
            full=full,
            partition_filter=partition_filter,
            options=options,
        )
        self.workers = max(1, workers)
        self.max_replans = max(1, max_replans)
        self.task_filter = task_filter
        self.last_plan: CompactPlan | None = None

    def execute(self) -> CompactResult:
        """Run one round; plan again (up to ``max_replans`` times) when a compaction races.

        Returns:
            What was rewritten; ``snapshot_id`` is ``None`` when nothing was due.

        Raises:
            CommitConflictError: every plan lost to a concurrent compaction.
            CommitRetriesExhaustedError: writers kept winning; outputs deleted.
            CommitStateUnknownError: the publish outcome is unknown; outputs kept.
            MergeFunctionError: the merge engine rejects a key's versions.

        Storage: see :func:`rewrite_bucket` and :func:`commit_compaction`.
        """
        start = time.monotonic()
        for attempt in range(1, self.max_replans + 1):
            plan = self.planner.plan()
            self.last_plan = plan
            tasks = list(plan.tasks)
            if self.task_filter is not None:
                tasks = list(self.task_filter(tasks))
            if not tasks:
                return CompactResult(snapshot_id=None, duration_s=time.monotonic() - start)
            try:
                return self._run(plan, tasks, start)
            except CommitConflictError:
                if attempt == self.max_replans:
                    raise
                logger.info("compaction of %s lost a race; planning again", self.commit.table_name)
        raise AssertionError("unreachable")

    def _run(self, plan: CompactPlan, tasks: list[BucketCompaction], start: float) -> CompactResult:
        schemas = {t.schema_id: self.commit.schema_manager.schema(t.schema_id) for t in tasks}
        results: list[RewriteResult] = []
        errors: list[BaseException] = []

        def run(task: BucketCompaction) -> RewriteResult:
            return rewrite_bucket(
                task,
                file_io=self.commit.file_io,
                paths=self.commit.paths,
                schema=schemas[task.schema_id],
            )

        with ThreadPoolExecutor(max_workers=min(self.workers, len(tasks))) as pool:
            for fut in [pool.submit(run, t) for t in tasks]:
                try:
                    results.append(fut.result())
                except BaseException as exc:  # noqa: BLE001 - re-raised after cleanup
                    errors.append(exc)
        written = [p for r in results for p in r.written]
        if errors:
            self.commit.file_io.delete_many(written)
            raise errors[0]
        full = plan.full and self.task_filter is None and self.planner.partition_filter is None
        try:
            result = commit_compaction(self.commit, results, full=full)
        except CommitStateUnknownError:
            raise
        except Exception:  # surely not published; an interrupt may come after: keep
            self.commit.file_io.delete_many(written)
            raise
        res = CompactResult.of_messages(
            result.snapshot_id,
            [r.message for r in results],
            rows_rewritten=sum(r.rows_rewritten for r in results),
            input_files=[p for t in tasks for p in t.paths],
            output_files=written,
            start=start,
        )
        logger.info(
            "LSM-compacted %d bucket(s) of %s: %d file(s) -> %d (snapshot %s, %.1f ms)",
            res.buckets_compacted, self.commit.table_name, res.files_before, res.files_after,
            res.snapshot_id, res.duration_s * 1000,
        )  # fmt: skip
        return res


def compact_new_files(
    *,
    file_io: FileIO,
    paths: PathFactory,
    schema_manager: SchemaManager,
    snapshot_manager: SnapshotManager,
    schema: TableSchema,
    messages: Sequence[CommitMessage],
) -> list[CommitMessage]:
    """Lift a writer's new level-0 files with lookup compaction, in the writer's commit.

    Paimon's readers skip level 0 of first-row tables, so a first-row writer
    compacts its level-0 files into a level >= 1 before it commits (dropping rows
    whose key an older version already holds). Each returned message keeps the
    new files as ADDs and adds the compaction (the new files among its
    inputs), so one snapshot publishes the result.

    Args:
        file_io: Storage of the table.
        paths: The table's PathFactory.
        schema_manager: Reads schemas.
        snapshot_manager: Reads the latest snapshot (the buckets' current files).
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
    current = schema_manager.latest()
    if current is not None and current.id > schema.id:
        # The writer was opened before an alter: compact in the current schema, so
        # files written under it since keep their newer columns (the writer's new
        # files read into it by field id).
        schema = current
    latest = snapshot_manager.latest_snapshot()
    live: dict[tuple[bytes, int], tuple[list[DataFileMeta], list[str]]] = {}
    if latest is not None:
        scan = FileStoreScan(
            file_io=file_io, paths=paths, schema_manager=schema_manager, snapshot=latest
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
