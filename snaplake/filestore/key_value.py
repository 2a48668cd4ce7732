"""KeyValueFileStore: primary-key tables (an LSM tree per bucket, merged on read).

Source: Paimon ``KeyValueFileStore``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, ClassVar

import pyarrow as pa

from snaplake.commit.conflict import ConflictRule
from snaplake.commit.file_store_commit import FileStoreCommit
from snaplake.commit.message import CommitMessage
from snaplake.commit.result import CommitResult
from snaplake.compaction.job import CompactionJob, CompactionPlanner
from snaplake.compaction.maintenance import count_sorted_runs
from snaplake.compaction.merge_tree_compact import MergeTreeCompactionPlanner
from snaplake.compaction.merge_tree_plan import SortedRunStats
from snaplake.filestore.base import DeletePreview, FileStore
from snaplake.mergetree.change_read import KeyValueChangeRead
from snaplake.mergetree.conflict import LsmConflictRule
from snaplake.mergetree.merge_function import force_lookup
from snaplake.mergetree.read import (
    MergeSplitsTask,
    read_primary_key_batches,
    read_primary_key_splits,
)
from snaplake.mergetree.sorted_run import KeyComparator
from snaplake.options import CoreOptions, Operation
from snaplake.store.format.primary_key import MergeEngine
from snaplake.store.format.schema import TableSchema
from snaplake.store.format.snapshot import Snapshot
from snaplake.store.read.missing_files import MissingFileCheck
from snaplake.store.read.predicate import Predicate, resolve_projection
from snaplake.store.read.scan import Split
from snaplake.store.read.schema_evolution import SchemaEvolution
from snaplake.store.read.stats_filter import KeyStatsFilter
from snaplake.write.batch_write import write_and_commit
from snaplake.write.cross_partition import BucketIndex
from snaplake.write.kv_write import KeyValueTableWrite, restore_max_sequences

__all__ = ["KeyValueFileStore"]


class KeyValueFileStore(FileStore):
    """The key-value kind: upserting writers, merge-on-read, LSM compaction.

    Source: Paimon ``KeyValueFileStore``.
    """

    kind: ClassVar[str] = "primary-key"

    def _new_write(
        self, commit_user: str, restored: Mapping[tuple[bytes, int], int] | None
    ) -> KeyValueTableWrite:
        """Return a :class:`~snaplake.write.kv_write.KeyValueTableWrite` in this store's schema.

        Without ``restored`` the writer restores each bucket's max sequence
        number (:meth:`restore_write_state`) at its first write (a missing
        manifest raises ``CorruptMetadataError`` naming it). A first-row
        table, one with deletion vectors or a ``lookup`` changelog or
        ``force-lookup`` table with ``lookup-wait`` (unless ``write-only``) lifts its
        new level-0 files before the commit (:meth:`lift_level0`), as Paimon's
        readers skip level 0 of such tables.
        """
        opts = self.schema.core_options
        lift = None
        skips_level0 = opts.merge_engine == MergeEngine.FIRST_ROW or opts.deletion_vectors_enabled
        waits = (opts.changelog_producer == "lookup" or force_lookup(opts)) and opts.lookup_wait
        if (skips_level0 or waits) and not opts.write_only:
            lift = self.lift_level0
        restore = self.restore_write_state if restored is None else lambda: restored
        return KeyValueTableWrite(
            file_io=self.file_io, paths=self.paths, schema=self.schema,
            commit_user=commit_user, restore_sequences=restore, lift_level0=lift,
            bucket_index=self.new_bucket_index(commit_user),
        )  # fmt: skip

    def new_bucket_index(self, commit_user: str) -> BucketIndex | None:
        """The bucket index of ``commit_user``'s writer: ``None`` for fixed buckets."""
        return None

    @property
    def bucket_mode(self) -> str:
        """``"fixed"`` (``bucket > 0``), ``"postpone"`` (-2) or ``"cross-partition"`` (-1).

        ``bucket = -1`` is one of the variants:
        :class:`~snaplake.filestore.dynamic_bucket.DynamicBucketFileStore`
        (``"dynamic"``) or
        :class:`~snaplake.filestore.cross_partition.CrossPartitionFileStore`
        (``"cross-partition"``: a primary key lacking a partition key).

        Source: Paimon ``KeyValueFileStore.bucketMode``.
        """
        bucket = self.schema.core_options.bucket
        if bucket > 0:
            return "fixed"
        return "postpone" if bucket == -2 else "cross-partition"

    takes_row_kinds: ClassVar[bool] = True
    writes_by_bucket: ClassVar[bool] = True

    def restore_write_state(self) -> dict[tuple[bytes, int], int]:
        """``{(partition, bucket): largest sequence number}`` of the latest snapshot's live files.

        Raises:
            CorruptMetadataError: a manifest of the latest snapshot is missing (named).

        Storage: reads the latest snapshot's manifest list and manifests.

        Source: Paimon ``AbstractFileStoreWrite`` (``getMaxSequenceNumber(restoreFiles)``).
        """
        table = self.table
        latest = table.snapshot_manager.latest_snapshot()
        if latest is None:
            return {}
        with MissingFileCheck(
            file_io=table.file_io, paths=table.paths,
            schema_manager=table.schema_manager, snapshot=latest,
        ).reading():  # fmt: skip
            return restore_max_sequences(self.new_scan(latest))

    def lift_level0(self, messages: list[CommitMessage]) -> list[CommitMessage]:
        """Compact a writer's new level-0 files up with lookup, in the same messages.

        The :class:`~snaplake.write.kv_write.Level0Lift` of first-row and
        deletion-vector tables
        (see :func:`~snaplake.compaction.merge_tree_compact.compact_new_files`).

        Raises:
            MergeFunctionError: the merge engine rejects a key's versions.

        Storage: writes the compaction outputs (the caller aborts on failure).
        """
        from snaplake.compaction.merge_tree_compact import compact_new_files

        return compact_new_files(self.table, schema=self.schema, messages=messages)

    def conflict_rules(self) -> tuple[ConflictRule, ...]:
        """The LSM rule: files a commit puts at levels >= 1 overlap no other file of their level.

        Ordered by this schema's key types (the primary keys never change).
        See :class:`snaplake.mergetree.conflict.LsmConflictRule`.
        """
        return (LsmConflictRule(KeyComparator(self.schema.key_types)),)

    def read(
        self,
        splits: Sequence[Split],
        *,
        read_schema: TableSchema,
        columns: Sequence[str] | None,
        predicates: Sequence[Predicate],
        limit: int | None,
        evolution: SchemaEvolution,
        schema_of: Callable[[int], TableSchema],
    ) -> pa.Table:
        """Merge the versions of each key (see :func:`read_primary_key_splits`)."""
        return read_primary_key_splits(
            self.file_io, splits, schema=read_schema, columns=columns,
            predicates=predicates, limit=limit, schema_of=schema_of,
        )  # fmt: skip

    def read_batches(
        self,
        splits: Sequence[Split],
        *,
        read_schema: TableSchema,
        columns: Sequence[str] | None,
        predicates: Sequence[Predicate],
        evolution: SchemaEvolution,
        schema_of: Callable[[int], TableSchema],
    ) -> Iterator[pa.RecordBatch]:
        """Yield the merged rows, bucket by bucket (see :func:`read_primary_key_batches`)."""
        tables = read_primary_key_batches(
            self.file_io, splits, schema=read_schema, columns=columns,
            predicates=predicates, schema_of=schema_of,
        )  # fmt: skip
        return (b for t in tables for b in t.to_batches())

    def split_read_task(
        self,
        splits: Sequence[Split],
        *,
        read_schema: TableSchema,
        columns: Sequence[str],
        schema_of: Callable[[int], TableSchema],
    ) -> MergeSplitsTask:
        """A :class:`~snaplake.mergetree.read.MergeSplitsTask`: whole buckets merged per call.

        Reads the schema of every ``_SCHEMA_ID`` in ``splits`` now (the task
        carries them to the executors).
        """
        ids = {f.schema_id for s in splits for f in s.files}
        return MergeSplitsTask(
            file_io=self.file_io, schema=read_schema, splits=tuple(splits),
            columns=tuple(columns), schemas={i: schema_of(i) for i in ids},
        )  # fmt: skip

    # scan ------------------------------------------------------------------
    def batch_scan_skip_level0(self, options: CoreOptions) -> bool:
        """With deletion vectors, unless ``deletion-vectors.merge-on-read``.

        Compaction publishes every row above level 0 and marks the versions it supersedes.

        Source: Paimon ``CoreOptions.batchScanSkipLevel0``.
        """
        return options.deletion_vectors_enabled and not options.deletion_vectors_merge_on_read

    def raw_convertible_splits(self, options: CoreOptions) -> bool:
        """With deletion vectors: splits of level >= 1 files without retractions.

        Such a split is read file by file, with no key merge (the vectors drop
        every superseded version).

        Source: Paimon ``MergeTreeSplitGenerator`` (``deletionVectorsEnabled``).
        """
        return options.deletion_vectors_enabled

    def stats_filter(self) -> KeyStatsFilter:
        """Prune by a file's key stats, on key predicates only (see :class:`KeyStatsFilter`).

        Source: Paimon ``KeyValueFileStoreScan``.
        """
        return KeyStatsFilter()

    # changes ---------------------------------------------------------------
    def changelog_producer(self, options: CoreOptions) -> str | None:
        """``changelog-producer`` (``input``, ``lookup``, ``full-compaction``); ``None``: none."""
        producer = options.changelog_producer
        return None if producer == "none" else producer

    def change_read(
        self,
        *,
        read_schema: TableSchema,
        columns: Sequence[str],
        schemas: Mapping[int, TableSchema],
    ) -> KeyValueChangeRead:
        """Each file's rows unmerged, with their own kinds (see :class:`KeyValueChangeRead`)."""
        return KeyValueChangeRead(self.file_io, read_schema, dict(schemas), tuple(columns))

    # kind facts ------------------------------------------------------------
    @property
    def key_fields(self) -> tuple[str, ...]:
        """The trimmed primary key of this store's schema."""
        return self.schema.trimmed_primary_keys

    def target_file_size(self, options: CoreOptions) -> int:
        """``target-file-size`` as set, else 128 MB."""
        return options.target_file_size(has_primary_key=True)

    def count_sorted_runs(
        self, snapshot: Snapshot | None, *, options: CoreOptions
    ) -> SortedRunStats:
        """Sorted runs per bucket (see ``compaction.maintenance.count_sorted_runs``)."""
        return count_sorted_runs(self.table, snapshot, options=options)

    # delete ----------------------------------------------------------------
    def _matching_rows(self, predicates: Sequence[Predicate]) -> tuple[pa.Table, DeletePreview]:
        """The merged rows of the latest snapshot ``predicates`` match, and their preview."""
        self.check_supported(Operation.WRITE)
        table = self.table
        latest = table.snapshot_manager.latest_snapshot()
        resolve_projection(self.schema.arrow_schema, [], predicates)
        splits = self.new_scan(latest, predicate=predicates, batch_read=True).plan()
        rows = self.read(
            splits, read_schema=self.schema, columns=None, predicates=predicates, limit=None,
            evolution=SchemaEvolution(self.schema, table.schema_manager.schema),
            schema_of=table.schema_manager.schema,
        )  # fmt: skip
        files = tuple(sorted(f.file_name for s in splits for f in s.files)) if rows else ()
        return rows, DeletePreview(latest.id if latest else None, rows.num_rows, files)

    def preview_delete(self, predicates: Sequence[Predicate]) -> DeletePreview:
        """Keys a delete would retract; ``files`` are the files that may hold them.

        Raises:
            UnsupportedTableError: a table snaplake cannot write.
            SchemaMismatchError: an unknown filter column or a literal of the wrong type.
        """
        return self._matching_rows(predicates)[1]

    def delete(self, predicates: Sequence[Predicate], *, commit: FileStoreCommit) -> CommitResult:
        """Read the matching keys (merged read) and write ``-D`` rows for them; one commit.

        Raises:
            UnsupportedTableError: a table snaplake cannot write (nothing written).
            SchemaMismatchError: an unknown filter column or a literal of the wrong type.

        Storage: level-0 files of ``-D`` rows and one APPEND commit (see
        :func:`~snaplake.write.batch_write.write_and_commit`).

        Source: Paimon Spark ``DeleteFromPaimonTableCommand`` (primary-key tables).
        """
        rows, _ = self._matching_rows(predicates)
        if not rows.num_rows:
            return commit.commit([])
        write = self.new_write(commit.commit_user)
        return write_and_commit(write, commit, rows, row_kinds=["-D"] * rows.num_rows)

    # compaction ------------------------------------------------------------
    def new_compaction(
        self,
        *,
        commit: FileStoreCommit,
        full: bool = False,
        partitions: Sequence[Mapping[str, Any]] | None = None,
        options: CoreOptions | None = None,
        max_files_per_bucket: int | None = None,
    ) -> CompactionJob:
        """LSM compaction (see :class:`MergeTreeCompactionPlanner`).

        ``max_files_per_bucket`` is validated only: a bucket's unit is one
        merge of overlapping sorted runs, never cut, so the plan is never capped.

        Raises:
            ValueError: an empty ``partitions`` list, or ``max_files_per_bucket < 2``.
        """
        if max_files_per_bucket is not None and max_files_per_bucket < 2:
            raise ValueError(f"max_files_per_bucket must be >= 2, got {max_files_per_bucket}")
        planner = self.compaction_planner(full=full, partitions=partitions, options=options)
        return CompactionJob(commit=commit, planner=planner)

    def compaction_planner(
        self,
        *,
        full: bool,
        partitions: Sequence[Mapping[str, Any]] | None,
        options: CoreOptions | None,
    ) -> CompactionPlanner:
        """This kind's planner (arguments as :meth:`new_compaction`): LSM compaction.

        Raises:
            ValueError: an empty ``partitions`` list.
        """
        return MergeTreeCompactionPlanner(
            self.table, full=full, partitions=partitions, options=options
        )

    def inline_compaction(self, *, commit: FileStoreCommit) -> CompactionJob | None:
        """One LSM round of the buckets due, unless ``write-only`` (writers never compact)."""
        if self.schema.core_options.write_only:
            return None
        return self.new_compaction(commit=commit)
