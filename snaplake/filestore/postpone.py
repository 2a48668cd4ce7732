"""PostponeBucketFileStore: primary-key tables with ``bucket = -2`` (postpone buckets).

Writers put unsorted, unmerged level-0 files into each partition's
``bucket-postpone`` directory (:mod:`snaplake.write.postpone_write`); batch
reads skip them, as Paimon's do (the rows become visible after compaction);
compaction assigns the pending rows to real buckets per partition and merges
them with the partition's real-bucket files
(:mod:`snaplake.compaction.postpone_compact`), besides compacting the real
buckets as any key-value table. Everything else (commit rules, merge-on-read
of real buckets, file sizes) is the key-value kind's.

Source: Paimon ``KeyValueFileStore`` with ``BucketMode.POSTPONE_MODE``
(``PostponeBucketFileStoreWrite``, ``AbstractFileStoreScan.onlyReadRealBuckets``,
``PostponeUtils``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from snaplake.commit.conflict import ConflictRule
from snaplake.commit.file_store_commit import FileStoreCommit
from snaplake.compaction.job import CompactionJob
from snaplake.compaction.postpone_compact import PartitionBucketsRule, PostponeCompactionPlanner
from snaplake.filestore.key_value import KeyValueFileStore
from snaplake.options import CoreOptions
from snaplake.store.format.schema import TableSchema
from snaplake.store.format.snapshot import Snapshot
from snaplake.store.read.predicate import Predicate
from snaplake.store.read.scan import FileStoreScan
from snaplake.write.postpone_write import PostponeBucketTableWrite

__all__ = ["PostponeBucketFileStore"]


class PostponeBucketFileStore(KeyValueFileStore):
    """The postpone-bucket kind: pending files in bucket -2, real buckets assigned by compaction.

    Source: Paimon ``KeyValueFileStore`` in ``POSTPONE_MODE``.
    """

    kind: ClassVar[str] = "primary-key"

    def new_write(
        self, commit_user: str, *, restored: Mapping[tuple[bytes, int], int] | None = None
    ) -> PostponeBucketTableWrite:
        """Return a :class:`~snaplake.write.postpone_write.PostponeBucketTableWrite`.

        ``restored`` is not used: a postpone writer restores nothing (its rows
        get sequence numbers when compaction assigns them).
        """
        return PostponeBucketTableWrite(
            file_io=self.file_io, paths=self.paths, schema=self.schema, commit_user=commit_user
        )

    writes_by_bucket: ClassVar[bool] = False

    def restore_write_state(self) -> dict[tuple[bytes, int], int]:
        """``{}``: postpone writers ignore previous files (Paimon ``withIgnorePreviousFiles``)."""
        return {}

    def conflict_rules(self) -> tuple[ConflictRule, ...]:
        """The LSM rule, and one bucket count per partition among its real buckets."""
        return (*super().conflict_rules(), PartitionBucketsRule())

    def new_scan(
        self,
        snapshot: Snapshot | None,
        *,
        partition_filter: Mapping[str, Any] | Sequence[Predicate] | None = None,
        predicate: Sequence[Predicate] = (),
        read_schema: TableSchema | None = None,
    ) -> FileStoreScan:
        """Plan the real buckets' live files only: pending files are invisible to batch reads.

        Source: Paimon ``AbstractBatchTableScan`` (``onlyReadRealBuckets``).
        """
        return FileStoreScan(
            file_io=self.file_io, paths=self.paths, schema_manager=self.table.schema_manager,
            snapshot=snapshot, partition_filter=partition_filter, predicate=predicate,
            read_schema=read_schema, stats_filter=self.stats_filter(), only_real_buckets=True,
        )  # fmt: skip

    def new_compaction(
        self,
        *,
        commit: FileStoreCommit,
        full: bool = False,
        partitions: Sequence[Mapping[str, Any]] | None = None,
        options: CoreOptions | None = None,
        max_files_per_bucket: int | None = None,
    ) -> CompactionJob:
        """Assign pending rows to real buckets, and LSM-compact the real buckets.

        See :class:`~snaplake.compaction.postpone_compact.PostponeCompactionPlanner`;
        ``max_files_per_bucket`` is validated only (a partition's pending files
        are assigned in one unit, a bucket's merge is never cut).

        Raises:
            ValueError: an empty ``partitions`` list, or ``max_files_per_bucket < 2``.
        """
        if max_files_per_bucket is not None and max_files_per_bucket < 2:
            raise ValueError(f"max_files_per_bucket must be >= 2, got {max_files_per_bucket}")
        planner = PostponeCompactionPlanner(
            self.table, full=full, partitions=partitions, options=options
        )
        return CompactionJob(commit=commit, planner=planner)
