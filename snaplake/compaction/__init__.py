"""Table maintenance: manifest merge, expiry, orphan clean, compaction, tags, rollback.

Also consumers and inline maintenance. Compaction rewrites small files of
append tables and runs the LSM compaction of primary-key tables.

Each operation is a separate commit by the ``snaplake-maintenance`` user (or a
pure deletion) and returns a frozen result dataclass. This package imports
``snaplake.commit`` and ``snaplake.store`` only, never the table facade.
"""

from snaplake.compaction.append_compact import AppendCompactor, CompactResult, CompactTask
from snaplake.compaction.consumers import ConsumerManager
from snaplake.compaction.expire import ExpireResult, ExpireSnapshots
from snaplake.compaction.inline import (
    MAINTENANCE_COMMIT_USER,
    InlineMaintenanceResult,
    maintenance_commit,
    run_inline_maintenance,
)
from snaplake.compaction.manifest_merge import ManifestFileMerger, MergeResult
from snaplake.compaction.merge_tree_compact import (
    BucketCompaction,
    MergeTreeCompactor,
    MergeTreeCompactPlanner,
    SortedRunStats,
    commit_compaction,
    rewrite_bucket,
)
from snaplake.compaction.orphan_clean import (
    DEFAULT_OLDER_THAN,
    OrphanCleanResult,
    OrphanFilesClean,
)
from snaplake.compaction.rollback import RollbackResult, rollback_to
from snaplake.compaction.tags import TagInfo, TagManager

__all__ = [
    "DEFAULT_OLDER_THAN",
    "MAINTENANCE_COMMIT_USER",
    "AppendCompactor",
    "BucketCompaction",
    "CompactResult",
    "CompactTask",
    "ConsumerManager",
    "ExpireResult",
    "ExpireSnapshots",
    "InlineMaintenanceResult",
    "ManifestFileMerger",
    "MergeTreeCompactPlanner",
    "MergeTreeCompactor",
    "MergeResult",
    "OrphanCleanResult",
    "OrphanFilesClean",
    "RollbackResult",
    "SortedRunStats",
    "TagInfo",
    "TagManager",
    "commit_compaction",
    "maintenance_commit",
    "rewrite_bucket",
    "rollback_to",
    "run_inline_maintenance",
]
