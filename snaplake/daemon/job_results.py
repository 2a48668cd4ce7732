"""What the daemon's jobs return: one frozen result per job, with the fields the metrics record.

Each job of :mod:`snaplake.daemon.jobs` returns one of these;
:func:`snaplake.daemon.jobs.record_job_result` turns them into Prometheus
samples and log lines.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from snaplake.compaction.check import CheckResult
from snaplake.compaction.expire import ExpireResult
from snaplake.compaction.maintenance import FileCounts
from snaplake.compaction.manifest_merge import MergeResult
from snaplake.compaction.merge_tree_plan import SortedRunStats
from snaplake.compaction.orphan_clean import OrphanCleanResult
from snaplake.compaction.partition_expire import PartitionExpireResult
from snaplake.compaction.result import CompactResult
from snaplake.daemon.config import Task

__all__ = [
    "CheckJobResult",
    "CompactJobResult",
    "ExpireJobResult",
    "JobResult",
    "ManifestMergeJobResult",
    "OrphanCleanJobResult",
    "PartitionExpireJobResult",
]


class JobResult(Protocol):
    """What every job result has."""

    @property
    def table(self) -> str:
        """``db.table``."""

    @property
    def task(self) -> Task:
        """Which task produced it."""

    @property
    def acted(self) -> bool:
        """Whether the job changed the table (False = below threshold / nothing to do)."""

    def summary(self) -> str:
        """One log line (counts only)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ManifestMergeJobResult:
    """Result of :func:`merge_manifests_job`.

    Attributes:
        table: ``db.table``.
        manifest_files: Manifests referenced by the latest snapshot before.
        merge_min_count: The effective ``manifest.merge-min-count``.
        merge: The merge's own result when it ran, else ``None``.
    """

    table: str
    manifest_files: int
    merge_min_count: int
    merge: MergeResult | None = None
    task: Task = Task.MANIFEST_MERGE

    @property
    def acted(self) -> bool:
        """Whether a merge snapshot was published."""
        return self.merge is not None and self.merge.merged

    @property
    def manifests_merged(self) -> int:
        """Manifests replaced (before minus after) by the published merge."""
        if self.merge is None or not self.merge.merged:
            return 0
        return max(0, self.merge.manifests_before - self.merge.manifests_after)

    def summary(self) -> str:
        """One log line."""
        after = self.merge.manifests_after if self.acted and self.merge else self.manifest_files
        return (
            f"{self.manifest_files} manifest(s) -> {after}, merge-min-count {self.merge_min_count}"
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactJobResult:
    """Result of :func:`compact_job`.

    Attributes:
        table: ``db.table``.
        files: Data-file counts before compacting.
        compaction: The compaction's own result when it ran, else ``None``.
        engine: Where it ran: ``"in-process"`` or the remote engine (``"spark"``).
        remote_failure: Exception class of a failed remote attempt (then it
            ran in process), else ``None``.
        sorted_runs: Primary-key tables: sorted runs per bucket of the planned
            snapshot (before compacting).
        sorted_runs_after: Primary-key tables: sorted runs per bucket of the
            latest snapshot after the run (the planned ones when nothing was
            compacted); the daemon's ``snaplake_sorted_runs_max`` gauges.
    """

    table: str
    files: FileCounts
    compaction: CompactResult | None = None
    engine: str = "in-process"
    remote_failure: str | None = None
    sorted_runs: SortedRunStats | None = None
    sorted_runs_after: SortedRunStats | None = None
    task: Task = Task.COMPACT

    @property
    def acted(self) -> bool:
        """Whether a compaction snapshot was published."""
        return self.compaction is not None and self.compaction.snapshot_id is not None

    @property
    def files_compacted(self) -> int:
        """Small files rewritten."""
        return self.compaction.files_before if self.acted and self.compaction else 0

    def summary(self) -> str:
        """One log line: what the plan saw, then what was compacted.

        Primary-key tables also get the sorted runs after the run. Universal
        compaction also picks buckets under the run trigger (size
        amplification, size ratio), so "0 buckets over the trigger" and files
        compacted are not a contradiction; the line keeps the two apart.
        """
        where = (f" on {self.engine}" if self.acted and self.engine != "in-process" else "") + (
            f" ({self.remote_failure} remotely)" if self.remote_failure else ""
        )
        c = self.compaction if self.acted else None
        if self.sorted_runs is not None:
            runs = self.sorted_runs
            line = (
                f"{self.files.data_files} data file(s); planned: at most {runs.max_sorted_runs} "
                f"sorted run(s) per bucket, {runs.buckets_over_trigger} bucket(s) over "
                "num-sorted-run.compaction-trigger; "
            )
            if c is None:
                return line + "nothing to compact" + where
            line += (
                f"compacted {c.files_before} file(s) of {c.buckets_compacted} bucket(s) into "
                f"{c.files_after}{where}"
            )
            after = self.sorted_runs_after
            if after is not None:
                line += (
                    f"; now: at most {after.max_sorted_runs} sorted run(s) per bucket, "
                    f"{after.buckets_over_trigger} bucket(s) over the trigger"
                )
            return line
        line = (
            f"{self.files.data_files} data file(s), {self.files.small_files} small; planned: "
            f"{self.files.buckets_due} bucket(s) due; "
        )
        if c is None:
            return line + "nothing to compact" + where
        return line + (
            f"compacted {c.files_before} file(s) of {c.buckets_compacted} bucket(s) into "
            f"{c.files_after}{where}"
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ExpireJobResult:
    """Result of :func:`expire_snapshots_job`.

    Attributes:
        table: ``db.table``.
        snapshots_retained: Snapshots retained before the run.
        expire: The expiry's result when it ran, else ``None``.
        files_deleted: Files deleted by type (``data``, ``manifest``,
            ``manifest_list``, ``snapshot``).
    """

    table: str
    snapshots_retained: int
    expire: ExpireResult | None = None
    files_deleted: Mapping[str, int] = field(default_factory=dict)
    task: Task = Task.EXPIRE_SNAPSHOTS

    @property
    def snapshots_expired(self) -> int:
        """Snapshots expired."""
        return self.expire.snapshots_expired if self.expire is not None else 0

    @property
    def acted(self) -> bool:
        """Whether anything was deleted."""
        return self.snapshots_expired > 0 or any(self.files_deleted.values())

    def summary(self) -> str:
        """One log line."""
        return f"{self.snapshots_retained} snapshot(s) retained, {self.snapshots_expired} expired"


@dataclass(frozen=True, slots=True, kw_only=True)
class OrphanCleanJobResult:
    """Result of :func:`orphan_clean_job`.

    Attributes:
        table: ``db.table``.
        dry_run: Nothing was deleted.
        clean: The orphan clean's own result.
        files_deleted: Files deleted by type.
    """

    table: str
    dry_run: bool
    clean: OrphanCleanResult | None = None
    files_deleted: Mapping[str, int] = field(default_factory=dict)
    task: Task = Task.ORPHAN_CLEAN

    @property
    def acted(self) -> bool:
        """Whether files were deleted."""
        return any(self.files_deleted.values())

    def summary(self) -> str:
        """One log line."""
        total = sum(self.files_deleted.values())
        return f"{total} orphan file(s) {'found' if self.dry_run else 'deleted'}"


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckJobResult:
    """Result of :func:`check_job`.

    Attributes:
        table: ``db.table``.
        check: What the check found.
    """

    table: str
    check: CheckResult
    task: Task = Task.CHECK

    @property
    def acted(self) -> bool:
        """Always False: a check changes nothing."""
        return False

    def summary(self) -> str:
        """One log line."""
        c = self.check
        return (
            f"{c.files_checked} data file(s) of snapshot {c.snapshot_id} checked, "
            f"{len(c.bad_files)} contradict their manifest entries"
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionExpireJobResult:
    """Result of :func:`~snaplake.daemon.jobs.expire_partitions_job`.

    Attributes:
        table: ``db.table``.
        checked: The table was checked (False: it sets no
            ``partition.expiration-time``, has no partition keys, or was
            checked less than ``partition.expiration-check-interval`` ago).
        expire: The expiry's result when it checked, else ``None``.
    """

    table: str
    checked: bool
    expire: PartitionExpireResult | None = None
    task: Task = Task.EXPIRE_PARTITIONS

    @property
    def partitions_expired(self) -> int:
        """Partitions dropped."""
        return self.expire.partitions_expired if self.expire is not None else 0

    @property
    def acted(self) -> bool:
        """Whether partitions were dropped."""
        return self.partitions_expired > 0

    def summary(self) -> str:
        """One log line."""
        if not self.checked or self.expire is None:
            return "not due"
        e = self.expire
        return (
            f"{e.partitions_expired} partition(s) older than {e.expire_before} dropped "
            f"({e.files_deleted} file(s), {e.rows_deleted} row(s), {e.replans} re-plan(s))"
        )


# ------------------------------------------------------------------------- jobs
