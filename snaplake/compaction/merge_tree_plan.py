"""Planning of primary-key table compaction: per bucket, what to merge into which level.

:class:`MergeTreeCompactPlanner` reads the latest snapshot and, per (partition,
bucket), builds the :class:`~snaplake.mergetree.sorted_run.Levels` and lets
:class:`~snaplake.mergetree.universal.UniversalCompaction` pick a unit (or, with
``full=True``, everything into the top level). Buckets below the trigger get no
task; only real buckets are planned (the pending files of postpone-bucket tables,
bucket -2, are assigned by :mod:`snaplake.compaction.postpone_compact`). Each
:class:`BucketCompaction` is a small, picklable description that
:func:`~snaplake.compaction.merge_tree_rewrite.rewrite_bucket` executes, in
process or on an executor. :func:`sorted_run_stats` counts sorted runs per bucket
for the daemon's metrics.

Source: Paimon ``MergeTreeCompactManager.triggerCompaction`` (unit filter,
``dropDelete``), ``CompactStrategy.pickFullCompaction``, ``Levels.numberOfSortedRuns``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from snaplake.mergetree.merge_function import force_lookup
from snaplake.mergetree.sorted_run import KeyComparator, Levels
from snaplake.mergetree.universal import CompactUnit, UniversalCompaction, pick_full_compaction
from snaplake.options import CoreOptions
from snaplake.store.format.data_file import DataFileMeta, FileSource
from snaplake.store.format.index_file import DELETION_VECTORS_INDEX, IndexFileMeta
from snaplake.store.format.manifest import ManifestEntry
from snaplake.store.format.paths import PathFactory
from snaplake.store.format.primary_key import MergeEngine
from snaplake.store.format.schema import TableSchema
from snaplake.store.format.snapshot import CommitKind, Snapshot
from snaplake.store.io.file_io import FileIO
from snaplake.store.read.index_scan import read_index_entries
from snaplake.store.read.scan import FileStoreScan
from snaplake.store.table_storage import TableStorage
from snaplake.write.kv_file_writer import KeyValueFileWriter

__all__ = [
    "BucketCompaction",
    "CompactPlan",
    "FULL_COMPACTION_PROPERTY",
    "MergeTreeCompactPlanner",
    "SortedRunStats",
    "bucket_dv_index",
    "plan_bucket",
    "sorted_run_stats",
]


FULL_COMPACTION_PROPERTY = "full-compaction"
"""Snapshot property ``"true"`` on a COMPACT snapshot that compacted every bucket fully
(counts ``full-compaction.delta-commits`` from there)."""


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
        lookup: Lookup compaction: a level-0 row's key is looked up in
            ``lookup_files`` (first-row tables drop the row when found;
            deletion-vector tables merge the found record in and mark it deleted).
        lookup_files: With ``lookup``: first-row tables: the bucket's level >= 1
            files outside the unit; deletion-vector tables: its files above the
            output level.
        lookup_paths: Full path of each lookup file.
        deletion_vectors: The table has ``deletion-vectors.enabled``: inputs and
            lookups are read with their vectors, found records are marked and the
            bucket's vectors file is rewritten.
        dv_index: The bucket's DELETION_VECTORS file when planned (``None``: none).
        changelog: The ``changelog-producer`` whose changelog this compaction
            writes (``"lookup"``: output level > 0; ``"full-compaction"``: the
            output is the top level), else ``""``.
        force_lookup: ``force-lookup`` without lookup of its own (no deletion
            vectors, first-row or lookup changelog): a level-0 key's record
            found in ``lookup_files`` is merged in as the lookup changelog
            producer does, and no changelog is written (Paimon's
            ``LookupMergeTreeCompactRewriter`` without ``produceChangelog``).
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
    deletion_vectors: bool = False
    dv_index: IndexFileMeta | None = None
    changelog: str = ""
    force_lookup: bool = False

    def output_writer(
        self,
        file_io: FileIO,
        paths: PathFactory,
        schema: TableSchema,
        *,
        file_source: FileSource,
        changelog: bool = False,
    ) -> KeyValueFileWriter:
        """A writer of this compaction's outputs (or, ``changelog``, its changelog files).

        Files roll at the primary-key ``target-file-size``, into the bucket's
        directory at :attr:`output_level`; ``file_source`` is recorded in each
        file's meta (``COMPACT`` for rewritten data, ``APPEND`` for changelog).
        Writes nothing until rows are given.

        Source: Paimon ``KeyValueFileWriterFactory`` (one per bucket and level).
        """
        return KeyValueFileWriter(
            file_io=file_io,
            paths=paths,
            schema=schema,
            partition_path=self.partition_path,
            bucket=self.bucket,
            level=self.output_level,
            file_source=file_source,
            target_file_size=schema.core_options.target_file_size(has_primary_key=True),
            changelog=changelog,
        )


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


class MergeTreeCompactPlanner:
    """Plans LSM compaction of a primary-key table's latest snapshot.

    Args:
        table: The table's storage, paths and managers.
        full: Compact every bucket fully into its top level.
        partition_filter: ``{partition_key: value}`` to plan only matching partitions.
        options: Effective options for picking (the daemon's overrides); ``None`` =
            the table's.
    """

    def __init__(
        self,
        table: TableStorage,
        *,
        full: bool = False,
        partition_filter: Mapping[str, Any] | None = None,
        options: CoreOptions | None = None,
    ) -> None:
        self.table = table
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
            snap = self.table.snapshot_manager.try_snapshot(snap.id - 1) if snap.id > 1 else None
        return False

    def plan(self) -> CompactPlan:
        """Plan the latest snapshot.

        The caller has checked the schema
        (:meth:`snaplake.compaction.job.CompactionJob.plan_units`).

        Raises:
            CorruptMetadataError: a manifest is undecodable.

        Storage: reads the latest snapshot's manifests; writes nothing.
        """
        t = self.table
        latest = t.snapshot_manager.latest_snapshot()
        if latest is None:
            return CompactPlan(snapshot_id=None, tasks=(), full=self.full, runs=SortedRunStats())
        # Outputs are written in the current schema (files of older schemas are
        # read into it by field id), as Paimon's compaction writes with the
        # table's latest schema.
        schema = t.schema_manager.latest() or t.schema_manager.schema(latest.schema_id)
        opts = self.options or schema.core_options
        full = self.full or self.full_compaction_due(latest, opts.full_compaction_delta_commits)
        strategy = UniversalCompaction.from_options(opts)
        cmp = KeyComparator(schema.key_types)
        scan = FileStoreScan(
            file_io=t.file_io, paths=t.paths, schema_manager=t.schema_manager,
            snapshot=latest, partition_filter=self.partition_filter, only_real_buckets=True,
        )  # fmt: skip
        dv_files = bucket_dv_index(t, latest) if opts.deletion_vectors_enabled else {}
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
                dv_index=dv_files.get((split.partition, split.bucket)),
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
    dv_index: IndexFileMeta | None = None,
) -> tuple[BucketCompaction | None, int]:
    """Pick one bucket's compaction (or none) from its live files.

    First-row and deletion-vector tables compact with lookup and always lift
    level 0 (Paimon's readers skip it): when universal picking finds nothing,
    the level-0 runs are picked with the runs that size ratio adds. With
    deletion vectors, retractions are dropped at every output level > 0, and a
    full compaction of a bucket that already is one top run rewrites the top
    files that carry a vector (``dv_index``, the bucket's vectors file, names them).

    ``options`` (default: the table's) give ``num-levels`` and the merge engine.

    Returns:
        The task (``None`` when nothing is due) and the bucket's sorted-run count.

    Source: Paimon ``MergeTreeCompactManager.triggerCompaction``,
    ``ForceUpLevel0Compaction.pick``, ``UniversalCompaction.forcePickL0``.
    """
    opts = options or schema.core_options
    levels = Levels(cmp, files, opts.num_levels)
    runs = levels.level_sorted_runs()
    dv = opts.deletion_vectors_enabled
    lookup = dv or opts.merge_engine == MergeEngine.FIRST_ROW
    producer = opts.changelog_producer
    forced = force_lookup(opts)
    num_levels = levels.number_of_levels
    unit: CompactUnit | None
    if full:
        unit = pick_full_compaction(num_levels, runs)
        with_vectors = {r.data_file_name for r in (dv_index.dv_ranges or ())} if dv_index else set()
        if unit is None and with_vectors:
            marked = tuple(f for f in files if f.file_name in with_vectors)
            unit = CompactUnit(levels.max_level, marked) if marked else None
    else:
        unit = strategy.pick(num_levels, runs)
        if unit is None and (lookup or producer == "lookup" or forced):
            unit = strategy.force_pick_level0(num_levels, runs)
    if unit is None:
        return None, len(runs)
    by_name = dict(zip((f.file_name for f in files), paths, strict=True))
    in_unit = {f.file_name for f in unit.files}
    floor = unit.output_level + 1 if dv or not lookup else 1
    looks = lookup or producer == "lookup" or forced
    others = [f for f in files if f.level >= floor and f.file_name not in in_unit] if looks else []
    task = BucketCompaction(
        partition=partition,
        partition_path=partition_path,
        bucket=bucket,
        total_buckets=total_buckets,
        schema_id=schema.id,
        output_level=unit.output_level,
        max_level=levels.max_level,
        drop_delete=unit.output_level != 0
        and (dv or unit.output_level >= levels.non_empty_highest_level()),
        files=unit.files,
        paths=tuple(by_name[f.file_name] for f in unit.files),
        lookup=lookup,
        lookup_files=tuple(others),
        lookup_paths=tuple(by_name[f.file_name] for f in others),
        deletion_vectors=dv,
        dv_index=dv_index if dv else None,
        changelog=_changelog_of(producer, unit.output_level, levels.max_level),
        force_lookup=forced and not lookup and producer != "lookup" and unit.output_level > 0,
    )
    return task, len(runs)


def _changelog_of(producer: str, output_level: int, max_level: int) -> str:
    """The producer whose changelog a compaction into ``output_level`` writes, else ``""``.

    Source: Paimon ``LookupMergeTreeCompactRewriter.rewriteChangelog`` (output
    level > 0), ``FullChangelogMergeTreeCompactRewriter`` (the top level).
    """
    if producer == "lookup" and output_level > 0:
        return producer
    if producer == "full-compaction" and output_level == max_level:
        return producer
    return ""


def bucket_dv_index(
    table: TableStorage, snapshot: Snapshot | None
) -> dict[tuple[bytes, int], IndexFileMeta]:
    """``{(partition, bucket): its DELETION_VECTORS file}`` of ``snapshot``.

    Raises:
        FileNotFoundError: the snapshot's index manifest is missing.
        CorruptMetadataError: the index manifest is undecodable.

    Storage: reads the snapshot's index manifest (cached).

    Source: Paimon ``IndexFileHandler.scanEntries(DELETION_VECTORS_INDEX, ...)``.
    """
    entries = read_index_entries(table, snapshot, index_type=DELETION_VECTORS_INDEX)
    return {(e.partition, e.bucket): e.index_file for e in entries}


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
