"""Inline maintenance: the due manifest merge and snapshot expiry after a writer's commit.

For tables that no daemon maintains, the table option
``snaplake.maintenance.inline = true`` makes the writer's process run the
*due* manifest merge (minor or, above the threshold, full) and snapshot
expiry right after each successful commit; on a primary-key table (unless
``write-only = true``) first one round of LSM compaction, for the buckets
whose sorted runs reached ``num-sorted-run.compaction-trigger``. The commit itself is unchanged
and already landed; a maintenance failure is logged and reported in the
result, never raised into the writer (DESIGN.md §7).

This module takes the table duck-typed (:class:`MaintainedTable`) because the
compaction layer must not import ``snaplake.table``.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Protocol

from snaplake.commit.manifest_commit import ManifestMergeCommit
from snaplake.commit.retry import RetryPolicy
from snaplake.compaction.append_compact import CompactResult
from snaplake.compaction.expire import ExpireResult, ExpireSnapshots
from snaplake.compaction.manifest_merge import ManifestFileMerger, MergeResult
from snaplake.compaction.merge_tree_compact import MergeTreeCompactor
from snaplake.errors import SnaplakeError
from snaplake.store.format.paths import PathFactory
from snaplake.store.format.schema import SchemaManager
from snaplake.store.io.file_io import FileIO
from snaplake.store.snapshot_manager import SnapshotManager

__all__ = ["MAINTENANCE_COMMIT_USER", "InlineMaintenanceResult", "MaintainedTable",
           "run_inline_maintenance"]  # fmt: skip

logger = logging.getLogger(__name__)

MAINTENANCE_COMMIT_USER = "snaplake-maintenance"
"""The ``commit_user`` of every maintenance snapshot."""


class MaintainedTable(Protocol):
    """What maintenance needs from a table (``snaplake.table.Table`` satisfies it)."""

    file_io: FileIO
    paths: PathFactory
    schema_manager: SchemaManager
    snapshot_manager: SnapshotManager
    identifier: str


@dataclass(frozen=True, slots=True, kw_only=True)
class InlineMaintenanceResult:
    """What inline maintenance did after one commit.

    Attributes:
        enabled: ``snaplake.maintenance.inline`` was true (else nothing ran).
        compact: The LSM compaction result (primary-key tables), if it ran.
        merge: The merge result, if the merge ran.
        expire: The expiry result, if the expiry ran.
        error: ``"<ErrorClass>: message"`` of a failure (logged), else ``None``.
        duration_s: Wall time, seconds.
    """

    enabled: bool
    compact: CompactResult | None = None
    merge: MergeResult | None = None
    expire: ExpireResult | None = None
    error: str | None = None
    duration_s: float = 0.0


def maintenance_commit(
    table: MaintainedTable, *, retry_policy: RetryPolicy | None = None
) -> ManifestMergeCommit:
    """Return a committer for maintenance snapshots of ``table`` (user ``snaplake-maintenance``).

    Args:
        table: The table.
        retry_policy: Backoff of lost publish races; ``None`` = the table's
            ``commit.*`` options.
    """
    return ManifestMergeCommit(
        file_io=table.file_io,
        paths=table.paths,
        schema_manager=table.schema_manager,
        snapshot_manager=table.snapshot_manager,
        table_name=table.identifier,
        commit_user=MAINTENANCE_COMMIT_USER,
        retry_policy=retry_policy,
    )


def run_inline_maintenance(table: MaintainedTable) -> InlineMaintenanceResult:
    """Run the due manifest merge, then snapshot expiry, if the table opted in.

    Call it right after a writer's commit landed. With
    ``snaplake.maintenance.inline`` unset or false it returns at once
    (``enabled=False``) after reading the cached schema.

    Args:
        table: The table (anything with ``file_io``, ``paths``,
            ``schema_manager``, ``snapshot_manager`` and ``identifier``).

    Returns:
        What ran; a failure is in ``error`` (and logged at WARNING), never raised,
        because the writer's commit already succeeded.

    Storage:
        As :meth:`ManifestFileMerger.execute` and :meth:`ExpireSnapshots.execute`
        when they are due; nothing otherwise.
    """
    start = time.monotonic()
    schema = table.schema_manager.latest()
    if schema is None or not schema.core_options.maintenance_inline:
        return InlineMaintenanceResult(enabled=False)
    merge: MergeResult | None = None
    expire: ExpireResult | None = None
    compact: CompactResult | None = None
    try:
        if schema.primary_keys and not schema.core_options.write_only:
            compact = MergeTreeCompactor(commit=maintenance_commit(table), workers=1).execute()
        merge = ManifestFileMerger(commit=maintenance_commit(table)).execute()
        expire = ExpireSnapshots(
            file_io=table.file_io,
            paths=table.paths,
            schema_manager=table.schema_manager,
            snapshot_manager=table.snapshot_manager,
        ).execute()
    except (SnaplakeError, OSError) as exc:
        # The writer's commit landed; maintenance is retried after the next one.
        logger.warning("inline maintenance of %s failed", table.identifier, exc_info=True)
        return InlineMaintenanceResult(
            enabled=True, compact=compact, merge=merge, expire=expire,
            error=f"{type(exc).__name__}: {exc}", duration_s=time.monotonic() - start,
        )  # fmt: skip
    return InlineMaintenanceResult(
        enabled=True, compact=compact, merge=merge, expire=expire,
        duration_s=time.monotonic() - start,
    )  # fmt: skip
