"""Table maintenance: manifest merge, expiry, orphan clean, compaction, inline maintenance.

Tags, consumers and rollback live beside the snapshot manager
(``snaplake.store``). Compaction is one :class:`CompactionJob` (plan units,
rewrite, commit once, abort) with a planner per table kind: small files of
append tables (:class:`AppendCompactionPlanner`), the LSM compaction of
primary-key tables (:class:`MergeTreeCompactionPlanner`); the table's
FileStore picks it.

Each operation is a separate commit by the ``snaplake-maintenance`` user (or a
pure deletion) and returns a frozen result dataclass. This package imports
``snaplake.commit`` and ``snaplake.store`` only, never the table facade.
"""

from snaplake.compaction.append_compact import (
    AppendCompactionPlanner,
    AppendRewriteUnit,
    CompactTask,
)
from snaplake.compaction.append_rewrite import AppendRewriter
from snaplake.compaction.expire import ExpireResult, ExpireSnapshots
from snaplake.compaction.inline import InlineMaintenanceResult, run_inline_maintenance
from snaplake.compaction.job import (
    CompactionJob,
    CompactionPlan,
    CompactionPlanner,
    CompactionUnit,
)
from snaplake.compaction.maintenance import (
    MAINTENANCE_COMMIT_USER,
    MAINTENANCE_RETRY_POLICY,
    FileCounts,
    count_files,
    count_manifests,
    maintenance_committer,
)
from snaplake.compaction.manifest_merge import ManifestFileMerger, MergeResult
from snaplake.compaction.merge_tree_compact import (
    MergeTreeCompactionPlanner,
    MergeTreeRewriteUnit,
    compact_new_files,
)
from snaplake.compaction.merge_tree_plan import (
    BucketCompaction,
    MergeTreeCompactPlanner,
    SortedRunStats,
)
from snaplake.compaction.merge_tree_rewrite import rewrite_bucket
from snaplake.compaction.orphan_clean import (
    DEFAULT_OLDER_THAN,
    OrphanCleanResult,
    OrphanFilesClean,
)
from snaplake.compaction.partition_expire import (
    ExpiredPartition,
    PartitionExpire,
    PartitionExpireResult,
)
from snaplake.compaction.result import CompactResult

__all__ = [
    "DEFAULT_OLDER_THAN",
    "MAINTENANCE_COMMIT_USER",
    "MAINTENANCE_RETRY_POLICY",
    "AppendCompactionPlanner",
    "AppendRewriteUnit",
    "AppendRewriter",
    "BucketCompaction",
    "CompactResult",
    "CompactTask",
    "CompactionJob",
    "CompactionPlan",
    "CompactionPlanner",
    "CompactionUnit",
    "ExpireResult",
    "ExpireSnapshots",
    "ExpiredPartition",
    "FileCounts",
    "InlineMaintenanceResult",
    "ManifestFileMerger",
    "MergeResult",
    "MergeTreeCompactPlanner",
    "MergeTreeCompactionPlanner",
    "MergeTreeRewriteUnit",
    "OrphanCleanResult",
    "OrphanFilesClean",
    "PartitionExpire",
    "PartitionExpireResult",
    "SortedRunStats",
    "compact_new_files",
    "count_files",
    "count_manifests",
    "maintenance_committer",
    "rewrite_bucket",
    "run_inline_maintenance",
]
