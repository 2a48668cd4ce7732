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
from snaplake.compaction.postpone_compact import PartitionBucketsRule, PostponeCompactionPlanner
from snaplake.filestore.key_value import KeyValueFileStore
from snaplake.options import CoreOptions
from snaplake.write.postpone_write import PostponeBucketTableWrite

__all__ = ["PostponeBucketFileStore"]


class PostponeBucketFileStore(KeyValueFileStore):
    """The postpone-bucket kind: pending files in bucket -2, real buckets assigned by compaction.

    Source: Paimon ``KeyValueFileStore`` in ``POSTPONE_MODE``.
    """

    def _new_write(
        self, commit_user: str, restored: Mapping[tuple[bytes, int], int] | None
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

    reads_real_buckets_only: ClassVar[bool] = True
    """Batch reads skip the pending files (Paimon ``AbstractBatchTableScan``,
    ``onlyReadRealBuckets``): rows are visible after compaction."""

    def compaction_planner(
        self,
        *,
        full: bool,
        partitions: Sequence[Mapping[str, Any]] | None,
        options: CoreOptions | None,
    ) -> PostponeCompactionPlanner:
        """Assign pending rows to real buckets, and LSM-compact the real buckets.

        See :class:`~snaplake.compaction.postpone_compact.PostponeCompactionPlanner`
        (a partition's pending files are assigned in one unit, a bucket's merge
        is never cut, so ``max_files_per_bucket`` caps nothing).

        Raises:
            ValueError: an empty ``partitions`` list.
        """
        return PostponeCompactionPlanner(
            self.table, full=full, partitions=partitions, options=options
        )
