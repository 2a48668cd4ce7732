"""Table maintenance: manifest merge, expiry, orphan clean, compaction, inline maintenance.

Tags, consumers and rollback live beside the snapshot manager
(``snaplake.store``). Compaction rewrites small files of append tables and
runs the LSM compaction of primary-key tables.

Each operation is a separate commit by the ``snaplake-maintenance`` user (or a
pure deletion) and returns a frozen result dataclass. This package imports
``snaplake.commit`` and ``snaplake.store`` only, never the table facade.
"""

from snaplake.compaction.append_compact import AppendCompactor, CompactResult, CompactTask
from snaplake.compaction.append_rewrite import AppendRewriter
from snaplake.compaction.capped_compact import CappedCompactor
from snaplake.compaction.distributed import (
    DistributedCompaction,
    RewriteUnit,
    distributed_compaction,
)
from snaplake.compaction.expire import ExpireResult, ExpireSnapshots
from snaplake.compaction.inline import InlineMaintenanceResult, run_inline_maintenance
from snaplake.compaction.maintenance import (
    MAINTENANCE_COMMIT_USER,
    MAINTENANCE_RETRY_POLICY,
    FileCounts,
    count_files,
    count_manifests,
    maintenance_committer,
)
from snaplake.compaction.manifest_merge import ManifestFileMerger, MergeResult
from snaplake.compaction.merge_tree_compact import MergeTreeCompactor, commit_compaction
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

__all__ = [
    "DEFAULT_OLDER_THAN",
    "MAINTENANCE_COMMIT_USER",
    "MAINTENANCE_RETRY_POLICY",
    "AppendCompactor",
    "AppendRewriter",
    "CappedCompactor",
    "BucketCompaction",
    "CompactResult",
    "CompactTask",
    "DistributedCompaction",
    "ExpireResult",
    "ExpireSnapshots",
    "FileCounts",
    "InlineMaintenanceResult",
    "ManifestFileMerger",
    "MergeTreeCompactPlanner",
    "MergeTreeCompactor",
    "MergeResult",
    "OrphanCleanResult",
    "OrphanFilesClean",
    "RewriteUnit",
    "SortedRunStats",
    "commit_compaction",
    "rewrite_bucket",
    "distributed_compaction",
    "count_files",
    "count_manifests",
    "maintenance_committer",
    "run_inline_maintenance",
]
