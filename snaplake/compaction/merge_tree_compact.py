"""LSM compaction of primary-key tables: plan on a driver, rewrite per bucket, commit.

Three steps, so an engine such as Spark can run the middle one on executors:

1. :class:`MergeTreeCompactPlanner` reads the latest snapshot and, per
   (partition, bucket), builds the :class:`~snaplake.mergetree.sorted_run.Levels`
   and lets :class:`~snaplake.mergetree.universal.UniversalCompaction` pick a
   unit (or, with ``full=True``, everything into the top level). Buckets below
   the trigger get no task. Each :class:`BucketCompaction` is a small,
   picklable description.
2. :func:`rewrite_bucket` turns one task into one ``CommitMessage``: sections
   of overlapping runs (and small files) are merged with the table's merge
   engine through the streaming k-way merge and written, rolled at
   ``target-file-size``, at the output level; large files alone in their
   section are *upgraded* (the same file re-recorded at the output level).
   Retractions are dropped only when the output level is the highest
   non-empty level. Memory: bounded by the k-way merge, never a whole bucket.
3. :func:`commit_compaction` publishes one COMPACT snapshot (compact
   before/after). :class:`MergeTreeCompactor` runs all three; on a conflict
   (another compaction won, or an LSM overlap) it deletes its own outputs,
   never an upgraded input, and plans again on the new latest snapshot.

Source: Paimon ``MergeTreeCompactManager.triggerCompaction`` (unit filter,
``dropDelete``), ``MergeTreeCompactTask.doCompact`` (sections, small files,
upgrades, top-level files with deletes rewritten), ``MergeTreeCompactRewriter``,
``DataFileMeta.upgrade``, ``CompactStrategy.pickFullCompaction``.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from snaplake.commit.file_store_commit import FileStoreCommit
from snaplake.commit.kv_file_writer import KeyValueFileWriter
from snaplake.commit.message import CommitMessage, CompactIncrement
from snaplake.commit.result import CommitResult
from snaplake.compaction.append_compact import CompactResult
from snaplake.errors import CommitConflictError, CommitStateUnknownError, SchemaMismatchError
from snaplake.mergetree.kv import key_column
from snaplake.mergetree.merge_function import drop_retracts
from snaplake.mergetree.read import (
    LEVEL_COLUMN,
    BucketFiles,
    KeyValueReadContext,
    merge_bucket,
    read_context,
)
from snaplake.mergetree.sorted_run import KeyComparator, Levels, SortedRun, interval_partition
from snaplake.mergetree.universal import CompactUnit, UniversalCompaction, pick_full_compaction
from snaplake.options import CoreOptions
from snaplake.store.format.data_file import DataFileMeta, FileSource
from snaplake.store.format.manifest import ManifestEntry
from snaplake.store.format.paths import PathFactory
from snaplake.store.format.schema import SchemaManager, TableSchema
from snaplake.store.format.snapshot import CommitKind, Snapshot
from snaplake.store.io.file_io import FileIO
from snaplake.store.read.scan import FileStoreScan
from snaplake.store.snapshot_manager import SnapshotManager

__all__ = [
    "FULL_COMPACTION_PROPERTY",
    "BucketCompaction",
    "CompactPlan",
    "MergeTreeCompactPlanner",
    "MergeTreeCompactor",
    "RewriteResult",
    "SortedRunStats",
    "commit_compaction",
    "compact_new_files",
    "plan_bucket",
    "rewrite_bucket",
    "sorted_run_stats",
]

logger = logging.getLogger(__name__)

FULL_COMPACTION_PROPERTY = "full-compaction"
"""Snapshot property ``"true"`` on a COMPACT snapshot that compacted every bucket fully
(counts ``full-compaction.delta-commits`` from there)."""

_MAX_REPLANS = 3


@dataclass(frozen=True, slots=True, kw_only=True)
class BucketCompaction:
    """One bucket's compaction, planned on a snapshot (picklable; ships to executors).

    Attributes:
        partition: Partition BinaryRow bytes.
        partition_path: The partition's directory (``""`` unpartitioned).
        bucket: Bucket number.
        total_buckets: The table's bucket count when planned.
        schema_id: The table's current schema when planned (outputs are written
            in it; inputs of older schemas are read into it by field id).
        output_level: Level of the outputs.
        max_level: The bucket's top level.
        drop_delete: Drop ``-U``/``-D`` rows (the output is the highest level with data).
        files: The unit's input files.
        paths: Full path of each input, aligned with ``files``.
        lookup: first-row tables: a level-0 row whose key is already in a
            level >= 1 file is dropped (Paimon's lookup compaction).
        lookup_files: With ``lookup``: the bucket's level >= 1 files outside the unit.
        lookup_paths: Full path of each lookup file.
    """

    partition: bytes
    partition_path: str
    bucket: int
    total_buckets: int
    schema_id: int
    output_level: int
    max_level: int
    drop_delete: bool
    files: tuple[DataFileMeta, ...]
    paths: tuple[str, ...]
    lookup: bool = False
    lookup_files: tuple[DataFileMeta, ...] = ()
    lookup_paths: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class SortedRunStats:
    """Sorted runs per bucket of a snapshot (the daemon's gauges).

    Attributes:
        buckets: Buckets with files.
        max_sorted_runs: Most sorted runs in one bucket.
        buckets_over_trigger: Buckets with more runs than
            ``num-sorted-run.compaction-trigger``.
    """

    buckets: int = 0
    max_sorted_runs: int = 0
    buckets_over_trigger: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactPlan:
    """What a planner found.

    Attributes:
        snapshot_id: The planned snapshot (``None`` for an empty table).
        tasks: One task per bucket that needs compaction.
        full: Every bucket was planned for full compaction.
        runs: Sorted-run statistics of the planned snapshot.
    """

    snapshot_id: int | None
    tasks: tuple[BucketCompaction, ...]
    full: bool
    runs: SortedRunStats


@dataclass(frozen=True, slots=True, kw_only=True)
class RewriteResult:
    """What :func:`rewrite_bucket` produced.

    Attributes:
        message: compact before/after of the bucket.
        written: Full paths of files this rewrite created (upgraded inputs excluded).
        rows_rewritten: Rows written into new files.
    """

    message: CommitMessage
    written: tuple[str, ...]
    rows_rewritten: int


class MergeTreeCompactPlanner:
    """Plans LSM compaction of a primary-key table's latest snapshot.

    Args:
        file_io: Storage of the table.
        paths: The table's PathFactory.
        schema_manager: Reads schemas.
        snapshot_manager: Reads snapshots.
        full: Compact every bucket fully into its top level.
        partition_filter: ``{partition_key: value}`` to plan only matching partitions.
        options: Effective options for picking (the daemon's overrides); ``None`` =
            the table's.
    """

    def __init__(
        self,
        *,
        file_io: FileIO,
        paths: PathFactory,
        schema_manager: SchemaManager,
        snapshot_manager: SnapshotManager,
        full: bool = False,
        partition_filter: Mapping[str, Any] | None = None,
        options: CoreOptions | None = None,
    ) -> None:
        self.file_io = file_io
        self.paths = paths
        self.schema_manager = schema_manager
        self.snapshot_manager = snapshot_manager
        self.full = full
        self.partition_filter = partition_filter
        self.options = options

    def full_compaction_due(self, latest: Snapshot, every: int | None) -> bool:
        """Whether ``full-compaction.delta-commits = every`` APPEND snapshots have passed.

        Counts APPEND snapshots back from ``latest`` until one marked with
        :data:`FULL_COMPACTION_PROPERTY` (or the earliest retained snapshot).
        """
        if not every or every <= 0:
            return False
        count = 0
        snap: Snapshot | None = latest
        while snap is not None:
            if (snap.properties or {}).get(FULL_COMPACTION_PROPERTY) == "true":
                return False
            if snap.commit_kind == CommitKind.APPEND:
                count += 1
                if count >= every:
                    return True
            snap = self.snapshot_manager.try_snapshot(snap.id - 1) if snap.id > 1 else None
        return False

    def plan(self) -> CompactPlan:
        """Plan the latest snapshot.

        Raises:
            UnsupportedTableError: the table is not a primary-key table snaplake
                can compact.
            CorruptMetadataError: a manifest is undecodable.

        Storage: reads the latest snapshot's manifests; writes nothing.
        """
        latest = self.snapshot_manager.latest_snapshot()
        if latest is None:
            return CompactPlan(snapshot_id=None, tasks=(), full=self.full, runs=SortedRunStats())
        # Outputs are written in the current schema (files of older schemas are
        # read into it by field id), as Paimon's compaction writes with the
        # table's latest schema.
        schema = self.schema_manager.latest() or self.schema_manager.schema(latest.schema_id)
        schema.check_primary_key_table("maintenance")
        opts = self.options or schema.core_options
        full = self.full or self.full_compaction_due(latest, opts.full_compaction_delta_commits)
        strategy = UniversalCompaction.from_options(opts)
        cmp = KeyComparator(schema.key_types)
        scan = FileStoreScan(
            file_io=self.file_io,
            paths=self.paths,
            schema_manager=self.schema_manager,
            snapshot=latest,
            partition_filter=self.partition_filter,
        )
        tasks: list[BucketCompaction] = []
        buckets = max_runs = over = 0
        trigger = opts.num_sorted_run_compaction_trigger
        for split in scan.plan():
            task, runs = plan_bucket(
                schema,
                cmp,
                strategy,
                partition=split.partition,
                partition_path=schema.partition_path(split.partition_values),
                bucket=split.bucket,
                total_buckets=split.total_buckets,
                files=split.files,
                paths=split.paths,
                full=full,
                options=opts,
            )
            buckets += 1
            max_runs = max(max_runs, runs)
            over += runs > trigger
            if task is not None:
                tasks.append(task)
        stats = SortedRunStats(buckets=buckets, max_sorted_runs=max_runs, buckets_over_trigger=over)
        return CompactPlan(snapshot_id=latest.id, tasks=tuple(tasks), full=full, runs=stats)


def plan_bucket(
    schema: TableSchema,
    cmp: KeyComparator,
    strategy: UniversalCompaction,
    *,
    partition: bytes,
    partition_path: str,
    bucket: int,
    total_buckets: int,
    files: Sequence[DataFileMeta],
    paths: Sequence[str],
    full: bool,
    options: CoreOptions | None = None,
) -> tuple[BucketCompaction | None, int]:
    """Pick one bucket's compaction (or none) from its live files.

    First-row tables compact with lookup and always lift level 0 (Paimon's
    readers skip it): when universal picking finds nothing, the level-0 runs
    are picked with the runs that size ratio adds.

    ``options`` (default: the table's) give ``num-levels`` and the merge engine.

    Returns:
        The task (``None`` when nothing is due) and the bucket's sorted-run count.

    Source: Paimon ``MergeTreeCompactManager.triggerCompaction``,
    ``ForceUpLevel0Compaction.pick``, ``UniversalCompaction.forcePickL0``.
    """
    opts = options or schema.core_options
    levels = Levels(cmp, files, opts.num_levels)
    runs = levels.level_sorted_runs()
    lookup = opts.merge_engine == "first-row"
    num_levels = levels.number_of_levels
    unit: CompactUnit | None
    if full:
        unit = pick_full_compaction(num_levels, runs)
    else:
        unit = strategy.pick(num_levels, runs)
        if unit is None and lookup:
            unit = strategy.force_pick_level0(num_levels, runs)
    if unit is None:
        return None, len(runs)
    by_name = dict(zip((f.file_name for f in files), paths, strict=True))
    in_unit = {f.file_name for f in unit.files}
    others = [f for f in files if f.level >= 1 and f.file_name not in in_unit] if lookup else []
    task = BucketCompaction(
        partition=partition,
        partition_path=partition_path,
        bucket=bucket,
        total_buckets=total_buckets,
        schema_id=schema.id,
        output_level=unit.output_level,
        max_level=levels.max_level,
        drop_delete=unit.output_level != 0
        and unit.output_level >= levels.non_empty_highest_level(),
        files=unit.files,
        paths=tuple(by_name[f.file_name] for f in unit.files),
        lookup=lookup,
        lookup_files=tuple(others),
        lookup_paths=tuple(by_name[f.file_name] for f in others),
    )
    return task, len(runs)


def rewrite_bucket(
    task: BucketCompaction, *, file_io: FileIO, paths: PathFactory, schema: TableSchema
) -> RewriteResult:
    """Compact one bucket: merge, upgrade, write outputs; return its CommitMessage.

    Args:
        task: The planned bucket compaction.
        file_io: Storage of the table.
        paths: The table's PathFactory.
        schema: The schema of ``task.schema_id`` (inputs written under other
            schemas are read into it by field id; their schema files are read
            from ``paths``).

    Returns:
        The message (inputs as compact before, outputs and upgraded files as
        compact after) and the files written.

    Raises:
        MergeFunctionError: the merge engine rejects a key's versions.
        FileNotFoundError: an input vanished (a concurrent compaction and
            expiry removed it); the outputs written so far are deleted.
        SchemaMismatchError: an input was written under a schema newer than
            ``schema`` (its newer columns would be lost); nothing is written.

    Storage: creates data files at the output level under the bucket directory
    (deleted again if this raises). Inputs are never deleted here.

    Source: Paimon ``MergeTreeCompactTask.doCompact``.
    """
    newer = sorted({f.schema_id for f in task.files if f.schema_id > schema.id})
    if newer:
        raise SchemaMismatchError(
            f"compaction of bucket {task.bucket} would write inputs of schema(s) {newer} "
            f"into the older schema {schema.id} and lose their newer columns; compact with "
            "the table's latest schema"
        )
    older = any(f.schema_id != schema.id for f in (*task.files, *task.lookup_files))
    ctx = read_context(file_io, schema, SchemaManager(file_io, paths).schema if older else None)
    opts = schema.core_options
    min_file_size = int(
        opts.target_file_size(has_primary_key=True) * opts.compaction_small_file_ratio
    )
    bucket_files = BucketFiles(task.files, task.paths)
    before: list[DataFileMeta] = []
    after: list[DataFileMeta] = []
    written: list[str] = []
    rows = 0
    lookup = _LookupKeys(task, file_io=file_io, ctx=ctx) if task.lookup else None

    def rewrite_impl(candidate: list[list[SortedRun]]) -> None:
        nonlocal rows
        writer = KeyValueFileWriter(
            file_io=file_io,
            paths=paths,
            schema=schema,
            partition_path=task.partition_path,
            bucket=task.bucket,
            level=task.output_level,
            file_source=FileSource.COMPACT,
            target_file_size=opts.target_file_size(has_primary_key=True),
        )
        try:
            chunks = merge_bucket(
                ctx, candidate, bucket_files, schema.field_names, with_level=lookup is not None
            )
            for chunk in chunks:
                out = drop_retracts(chunk) if task.drop_delete else chunk
                if lookup is not None:
                    out = lookup.drop_known(out)
                rows += out.num_rows
                writer.write(out)
            files = writer.close()
        except BaseException:
            writer.abort()
            raise
        before.extend(f for section in candidate for run in section for f in run.files)
        after.extend(w.meta for w in files)
        written.extend(w.path for w in files)

    def upgrade(file: DataFileMeta) -> None:
        has_deletes = file.delete_row_count is None or file.delete_row_count > 0
        # Lookup: a level-0 file's keys must be checked against the other levels.
        if (task.output_level == task.max_level and has_deletes) or (
            lookup is not None and file.level == 0
        ):
            rewrite_impl([[SortedRun((file,))]])
        elif file.level != task.output_level:
            before.append(file)
            after.append(dataclasses.replace(file, level=task.output_level))

    def rewrite(candidate: list[list[SortedRun]]) -> None:
        if not candidate:
            return
        if len(candidate) == 1 and len(candidate[0]) == 1:
            for f in candidate[0][0].files:
                upgrade(f)
        else:
            rewrite_impl(candidate)
        candidate.clear()

    try:
        candidate: list[list[SortedRun]] = []
        for section in interval_partition(task.files, ctx.cmp):
            if len(section) > 1:
                candidate.append(list(section))
                continue
            for f in section[0].files:
                if f.file_size_bytes < min_file_size:
                    candidate.append([SortedRun((f,))])
                else:
                    rewrite(candidate)
                    upgrade(f)
        rewrite(candidate)
    except BaseException:
        file_io.delete_many(written)
        raise
    message = CommitMessage(
        partition=task.partition,
        bucket=task.bucket,
        total_buckets=task.total_buckets,
        compact_increment=CompactIncrement(
            compact_before=tuple(before), compact_after=tuple(after)
        ),
    )
    return RewriteResult(message=message, written=tuple(written), rows_rewritten=rows)


class _LookupKeys:
    """The keys of a bucket's level >= 1 files outside the unit (read once, keys only).

    A folded row whose version came from level 0 and whose key is among them is
    dropped: in a first-row table the older version wins and already lives at a
    higher level (Paimon's ``FirstRowMergeFunctionWrapper`` with lookup).
    """

    def __init__(
        self, task: BucketCompaction, *, file_io: FileIO, ctx: KeyValueReadContext
    ) -> None:
        self.task = task
        self.file_io = file_io
        self.ctx = ctx
        self._keys: pa.Table | None = None

    def _load(self) -> pa.Table:
        if self._keys is None:
            names = [key_column(k) for k in self.ctx.spec.key_names]
            full = self.ctx.kv_schema([])
            schema = pa.schema([full.field(n) for n in names])
            parts = [
                t
                for f, p in zip(self.task.lookup_files, self.task.lookup_paths, strict=True)
                for t in self.ctx.read_file(f, p, schema, batch_rows=None)
            ]
            self._keys = pa.concat_tables(parts) if parts else schema.empty_table()
        return self._keys

    def drop_known(self, chunk: pa.Table) -> pa.Table:
        """``chunk`` without level-0 rows whose key a lookup file holds."""
        if chunk.num_rows == 0 or not self.task.lookup_files:
            return chunk
        level0 = np.asarray(
            pc.equal(chunk.column(LEVEL_COLUMN), 0).to_numpy(zero_copy_only=False), dtype=np.bool_
        )
        if not level0.any():
            return chunk
        keys = self._load()
        names = keys.column_names
        probe = chunk.select(names).append_column("__row", pa.array(np.arange(chunk.num_rows)))
        hit = probe.join(keys, keys=names, join_type="left semi", use_threads=False)
        known = np.zeros(chunk.num_rows, dtype=np.bool_)
        known[np.asarray(hit.column("__row").to_numpy(), dtype=np.int64)] = True
        drop = known & level0
        return chunk.filter(pa.array(~drop)) if drop.any() else chunk


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
        try:
            if errors:
                raise errors[0]
            full = plan.full and self.task_filter is None and self.planner.partition_filter is None
            result = commit_compaction(self.commit, results, full=full)
        except CommitStateUnknownError:
            raise
        except BaseException:
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


def sorted_run_stats(entries: Sequence[ManifestEntry], *, trigger: int) -> SortedRunStats:
    """Sorted runs per bucket from live entries (level-0 files + non-empty levels >= 1).

    Args:
        entries: Live ADD entries of a snapshot.
        trigger: ``num-sorted-run.compaction-trigger``.

    Source: Paimon ``Levels.numberOfSortedRuns``.
    """
    level0: dict[tuple[bytes, int], int] = {}
    higher: dict[tuple[bytes, int], set[int]] = {}
    for e in entries:
        key = (e.partition, e.bucket)
        if e.file.level == 0:
            level0[key] = level0.get(key, 0) + 1
        else:
            higher.setdefault(key, set()).add(e.file.level)
    runs = [level0.get(k, 0) + len(higher.get(k, ())) for k in {*level0, *higher}]
    return SortedRunStats(
        buckets=len(runs),
        max_sorted_runs=max(runs, default=0),
        buckets_over_trigger=sum(1 for r in runs if r > trigger),
    )
