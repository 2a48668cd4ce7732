"""Inline maintenance: the due manifest merge and snapshot expiry after a writer's commit.

For tables that no daemon maintains, the table option
``snaplake.maintenance.inline = true`` makes the writer's process run the
*due* manifest merge (minor or, above the threshold, full) and snapshot
expiry right after each successful commit; first, when the caller passes the
table kind's inline compaction (``FileStore.inline_compaction``: primary-key
tables unless ``write-only = true``), one round of it, in process (for LSM
compaction: the buckets whose sorted runs reached
``num-sorted-run.compaction-trigger``). The commit itself is unchanged and
already landed; a maintenance failure is logged and reported in the result,
never raised into the writer (DESIGN.md §7).

The table is taken duck-typed (:class:`~snaplake.commit.file_store_commit.FileStoreTable`);
this package cannot ask the FileStore, so the caller (``Table.new_commit``)
passes the job.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from snaplake.commit.file_store_commit import FileStoreTable
from snaplake.compaction.expire import ExpireResult, ExpireSnapshots
from snaplake.compaction.job import CompactionJob
from snaplake.compaction.maintenance import maintenance_committer
from snaplake.compaction.manifest_merge import ManifestFileMerger, MergeResult
from snaplake.compaction.result import CompactResult
from snaplake.errors import SnaplakeError

__all__ = ["InlineMaintenanceResult", "run_inline_maintenance"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class InlineMaintenanceResult:
    """What inline maintenance did after one commit.

    Attributes:
        enabled: ``snaplake.maintenance.inline`` was true (else nothing ran).
        compact: The compaction's result, if one was passed and it ran.
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


def run_inline_maintenance(
    table: FileStoreTable, *, compaction: CompactionJob | None = None
) -> InlineMaintenanceResult:
    """Run ``compaction``, the due manifest merge, then snapshot expiry, if the table opted in.

    Call it right after a writer's commit landed. With
    ``snaplake.maintenance.inline`` unset or false it returns at once
    (``enabled=False``) after reading the cached schema.

    Args:
        table: The table (anything with ``file_io``, ``paths``,
            ``schema_manager``, ``snapshot_manager`` and ``identifier``).
        compaction: The table kind's inline compaction, run first with one
            worker (``None``: none).

    Returns:
        What ran; a failure is in ``error`` (and logged at WARNING), never raised,
        because the writer's commit already succeeded.

    Storage:
        As :meth:`CompactionJob.execute`, :meth:`ManifestFileMerger.execute` and
        :meth:`ExpireSnapshots.execute` when they are due; nothing otherwise.
    """
    start = time.monotonic()
    schema = table.schema_manager.latest()
    if schema is None or not schema.core_options.maintenance_inline:
        return InlineMaintenanceResult(enabled=False)
    merge: MergeResult | None = None
    expire: ExpireResult | None = None
    compact: CompactResult | None = None
    try:
        if compaction is not None:
            compact = compaction.execute(workers=1)
        merge = ManifestFileMerger(commit=maintenance_committer(table)).execute()
        expire = ExpireSnapshots(table).execute()
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
