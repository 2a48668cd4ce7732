"""What a maintainer (the daemon, a Spark job, inline maintenance) needs around the operations.

- :func:`maintenance_committer`: the committer of every maintenance snapshot
  (user ``snaplake-maintenance``); manifest merge and compaction publish
  through its :class:`~snaplake.commit.snapshot_commit.SnapshotCommit`.
- :data:`MAINTENANCE_RETRY_POLICY`: the backoff a background maintainer uses
  to keep up with a hot writer.
- :func:`count_manifests` and :func:`count_files`: the figures the
  thresholds of manifest merge and small-file compaction are checked against.

This package must not import ``snaplake.table``, so the table is taken
duck-typed (:class:`FileStoreTable`).
"""

from __future__ import annotations

from dataclasses import dataclass

from snaplake.commit.file_store_commit import FileStoreCommit, FileStoreTable
from snaplake.commit.retry import RetryPolicy
from snaplake.compaction.merge_tree_plan import SortedRunStats, sorted_run_stats
from snaplake.options import CoreOptions
from snaplake.store.format.partition import canonical_partition
from snaplake.store.format.snapshot import Snapshot
from snaplake.store.read.scan import FileStoreScan
from snaplake.store.table_storage import TableStorage

__all__ = [
    "MAINTENANCE_COMMIT_USER",
    "MAINTENANCE_RETRY_POLICY",
    "FileCounts",
    "count_files",
    "count_manifests",
    "count_sorted_runs",
    "maintenance_committer",
]

MAINTENANCE_COMMIT_USER = "snaplake-maintenance"
"""The ``commit_user`` of every maintenance snapshot."""

MAINTENANCE_RETRY_POLICY = RetryPolicy(
    max_retries=500, timeout_s=120.0, min_wait_s=0.002, max_wait_s=0.1, jitter=0.5
)
"""Retries of a background maintainer's commits.

A streaming writer may commit every few milliseconds; with the table's
writer-oriented backoff (doubling up to ``commit.max-retry-wait``) a
compaction would fall further behind with every retry. A maintainer retries
often, briefly, and for up to two minutes.
"""


def maintenance_committer(
    table: FileStoreTable, *, retry_policy: RetryPolicy | None = None
) -> FileStoreCommit:
    """Return the committer of maintenance snapshots of ``table`` (user ``snaplake-maintenance``).

    The committer checks the table kind's conflict rules
    (``table.file_store().conflict_rules()``: the LSM rule of a primary-key
    table), as :meth:`FileStoreCommit.of` does.

    Args:
        table: The table.
        retry_policy: Backoff of lost publish races; ``None`` = the table's
            ``commit.*`` options (inline maintenance), a background
            maintainer passes :data:`MAINTENANCE_RETRY_POLICY`.
    """
    return FileStoreCommit.of(table, commit_user=MAINTENANCE_COMMIT_USER, retry_policy=retry_policy)


@dataclass(frozen=True, slots=True, kw_only=True)
class FileCounts:
    """Live data files of a table's latest snapshot.

    Attributes:
        data_files: Live data files.
        small_files: Of these, files below ``target-file-size *
            compaction.small-file-ratio``.
        buckets_due: (partition, bucket) groups holding at least
            ``compaction.min.file-num`` small files.
        small_threshold_bytes: The size under which a file is small.
    """

    data_files: int
    small_files: int
    buckets_due: int
    small_threshold_bytes: int


def count_manifests(table: TableStorage, snapshot: Snapshot | None) -> int:
    """Return how many manifest files ``snapshot`` references (base + delta lists).

    Storage: reads two manifest lists (served from the metadata cache when warm).
    """
    if snapshot is None:
        return 0
    scan = FileStoreScan(
        file_io=table.file_io,
        paths=table.paths,
        schema_manager=table.schema_manager,
        snapshot=snapshot,
    )
    return len(scan.manifest_metas())


def count_files(
    table: TableStorage,
    snapshot: Snapshot | None,
    *,
    options: CoreOptions,
    target_file_size_bytes: int,
) -> FileCounts:
    """Count the live and the small data files of ``snapshot``, per (partition, bucket).

    Args:
        table: The table.
        snapshot: Usually the latest snapshot; ``None`` = empty table.
        options: Effective options (``compaction.small-file-ratio``,
            ``compaction.min.file-num``).
        target_file_size_bytes: ``target-file-size`` under ``options``, whose
            default depends on the table's kind (the FileStore's
            ``target_file_size``); a file is small below it times
            ``compaction.small-file-ratio``.

    Storage: reads every manifest of the snapshot.

    Source: Paimon ``CoreOptions.targetFileSize(hasPrimaryKey)``.
    """
    threshold = int(target_file_size_bytes * options.compaction_small_file_ratio)
    if snapshot is None:
        return FileCounts(data_files=0, small_files=0, buckets_due=0,
                          small_threshold_bytes=threshold)  # fmt: skip
    scan = FileStoreScan(
        file_io=table.file_io,
        paths=table.paths,
        schema_manager=table.schema_manager,
        snapshot=snapshot,
    )
    small: dict[tuple[bytes, int], int] = {}
    types = scan.schema.partition_types if scan.schema is not None else ()
    total = 0
    for entry in scan.plan_entries():
        total += 1
        if entry.file.file_size_bytes < threshold:
            key = (canonical_partition(entry.partition, types), entry.bucket)  # by value
            small[key] = small.get(key, 0) + 1
    due = sum(1 for n in small.values() if n >= options.compaction_min_file_num)
    return FileCounts(
        data_files=total,
        small_files=sum(small.values()),
        buckets_due=due,
        small_threshold_bytes=threshold,
    )


def count_sorted_runs(
    table: TableStorage, snapshot: Snapshot | None, *, options: CoreOptions
) -> SortedRunStats:
    """Sorted runs per bucket of a primary-key table's ``snapshot``.

    Storage: reads every manifest of the snapshot.
    """
    if snapshot is None:
        return SortedRunStats()
    scan = FileStoreScan(
        file_io=table.file_io,
        paths=table.paths,
        schema_manager=table.schema_manager,
        snapshot=snapshot,
    )
    return sorted_run_stats(scan.plan_entries(), trigger=options.num_sorted_run_compaction_trigger)
