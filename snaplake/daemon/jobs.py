"""The daemon's jobs: plain functions that check a threshold, act, and return a typed result.

Each job takes a :class:`~snaplake.table.Table` and the table's effective
options (the daemon's defaults overlaid by the table's own options, see
:meth:`DaemonConfig.effective_options`), needs no scheduler, and raises what
the maintenance operation raises; the scheduler's job boundary
(:func:`run_job`) catches, logs and counts failures.

- :func:`merge_manifests_job`: merge when the latest snapshot references at
  least ``manifest.merge-min-count`` manifests.
- :func:`compact_job`: the table kind's compaction (``FileStore.new_compaction``):
  primary-key tables: one LSM compaction round for the buckets universal
  compaction picks; append tables: rewrite small files when a (partition,
  bucket) holds at least ``compaction.min.file-num`` files smaller than
  ``target-file-size * compaction.small-file-ratio``, at most
  ``max_files_per_bucket`` of them per commit (a backlog takes several rounds,
  each one commit, so the memory of a run does not grow with the backlog).
- :func:`expire_snapshots_job`: expire by ``snapshot.num-retained.*`` /
  ``snapshot.time-retained`` / ``snapshot.expire.limit``.
- :func:`orphan_clean_job`: delete unreferenced files older than a grace period.
- :func:`check_job`: verify every live data file of the latest snapshot
  against its manifest entry (``Table.check``); one warning per bad file.
- :func:`expire_partitions_job`: drop the partitions older than the table's
  ``partition.expiration-time``, at most every ``partition.expiration-check-interval``.

Imports no apscheduler and no prometheus_client (metrics are recorded through
:class:`snaplake.metrics.SnaplakeMetrics`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, MutableMapping
from datetime import UTC, datetime, timedelta

from snaplake.compaction.expire import ExpireResult, ExpireSnapshots
from snaplake.compaction.maintenance import (
    MAINTENANCE_RETRY_POLICY,
    count_files,
    count_manifests,
    count_sorted_runs,
    maintenance_committer,
)
from snaplake.compaction.manifest_merge import ManifestFileMerger
from snaplake.compaction.merge_tree_plan import SortedRunStats
from snaplake.compaction.orphan_clean import OrphanFilesClean
from snaplake.compaction.partition_expire import PartitionExpire, partition_expire_config
from snaplake.compaction.result import CompactResult
from snaplake.daemon.config import Task
from snaplake.daemon.job_results import (
    CheckJobResult,
    CompactJobResult,
    ExpireJobResult,
    JobResult,
    ManifestMergeJobResult,
    OrphanCleanJobResult,
    PartitionExpireJobResult,
)
from snaplake.daemon.lifecycle_jobs import (
    AutoTagJobResult,
    ExpireConsumersJobResult,
    ExpireTagsJobResult,
    record_lifecycle_result,
)
from snaplake.daemon.memory import release_memory
from snaplake.daemon.remote import RemoteCompaction, RemoteOutcome
from snaplake.metrics import SnaplakeMetrics
from snaplake.options import CoreOptions
from snaplake.store.format.paths import count_file_types
from snaplake.table import Table

__all__ = [
    "check_job",
    "compact_job",
    "expire_partitions_job",
    "expire_snapshots_job",
    "merge_manifests_job",
    "orphan_clean_job",
    "record_job_result",
    "run_job",
]

logger = logging.getLogger(__name__)

LIFECYCLE_RESULTS = (AutoTagJobResult, ExpireTagsJobResult, ExpireConsumersJobResult)

# (table, task) -> the failure last logged with a traceback, until the task succeeds again.
_failing: dict[tuple[str, str], str] = {}
_failing_lock = threading.Lock()


def merge_manifests_job(table: Table, *, options: CoreOptions) -> ManifestMergeJobResult:
    """Merge the latest snapshot's manifests once there are ``manifest.merge-min-count`` of them.

    Args:
        table: The table to maintain.
        options: Effective options of the table.

    Returns:
        Counts before, the threshold, and the merge's result if it ran.

    Raises:
        CorruptMetadataError: a manifest list or manifest is undecodable.
        CommitConflictError: a concurrent merge replaced the same manifests.

    Storage: reads the latest manifest lists; when due, writes merged
    manifests and a COMPACT snapshot (see ``Table.merge_manifests``).
    """
    latest = table.latest_snapshot()
    count = count_manifests(table, latest)
    min_count = options.manifest_merge_min_count
    if count < min_count:
        return ManifestMergeJobResult(
            table=table.identifier, manifest_files=count, merge_min_count=min_count
        )
    merge = ManifestFileMerger(
        commit=maintenance_committer(table, retry_policy=MAINTENANCE_RETRY_POLICY),
        options=options,
        retry_policy=MAINTENANCE_RETRY_POLICY,
    ).execute(full=False)
    return ManifestMergeJobResult(
        table=table.identifier, manifest_files=count, merge_min_count=min_count, merge=merge
    )


def compact_job(
    table: Table,
    *,
    options: CoreOptions,
    max_files_per_bucket: int = 500,
    workers: int = 1,
    budget: timedelta = timedelta(seconds=60),
    remote: RemoteCompaction | None = None,
) -> CompactJobResult:
    """Compact the table where its kind's compaction finds work, in rounds of bounded size.

    Each round plans once (the table's FileStore picks the planner: small
    files of append tables, at most ``max_files_per_bucket`` of them per
    (partition, bucket); universal LSM compaction of primary-key tables),
    hands that plan to ``remote`` when it reaches the engine's bar, else
    runs it in this process (re-planning after a lost conflict), and
    commits once. While a round's plan cut due files off, another round
    runs, for at most ``budget``: a backlog of thousands of files costs
    several small commits instead of one run holding all of them in memory.

    Args:
        table: The table to maintain.
        options: Effective options of the table.
        max_files_per_bucket: Input files per (partition, bucket) and round, >= 2.
        workers: Units rewritten at a time; the memory of a round grows
            with it (1: the daemon is a background process).
        budget: Start no new round after this long.
        remote: Delegate a round whose plan reaches ``remote.min_input_bytes``
            to a remote engine (primary-key tables: the buckets of at least
            that much; smaller ones in this process), falling back to in
            process when it fails.

    Returns:
        File counts before, the planned sorted runs (primary-key tables), and
        the rounds' combined result if any ran (``snapshot_id`` of the last
        round; counts and files summed).

    Raises:
        CorruptMetadataError: a manifest is undecodable.
        CommitConflictError: a concurrent commit removed files being
            compacted, on every re-plan (the rounds committed before it stay).
        ValueError: ``max_files_per_bucket < 2``.

    Storage: reads every manifest of the latest snapshot; when due, writes
    new data files and one COMPACT snapshot per round (see ``Table.compact``).
    """
    counts = count_files(
        table,
        table.latest_snapshot(),
        options=options,
        target_file_size_bytes=table.file_store().target_file_size(options),
    )
    job = table.file_store().new_compaction(
        commit=maintenance_committer(table, retry_policy=MAINTENANCE_RETRY_POLICY),
        options=options,
        max_files_per_bucket=max_files_per_bucket,
    )
    deadline = time.monotonic() + budget.total_seconds()
    rounds: list[CompactResult] = []
    engine, failure = "in-process", None
    planned: SortedRunStats | None = None
    while True:
        plan = job.plan_units()
        if not rounds:
            planned = plan.sorted_runs
        outcome = remote.try_compact(table, job, plan) if remote is not None else RemoteOutcome()
        if remote is not None and outcome.result is not None:
            rounds.append(outcome.result)
            engine = remote.name
        else:
            failure = failure or outcome.failure
            rounds.append(job.execute(plan=plan, workers=workers))
        if rounds[-1].snapshot_id is None or not plan.capped or time.monotonic() >= deadline:
            break
        release_memory()  # before the next round reads its inputs
    result = CompactResult.of_rounds(rounds)
    acted = result.snapshot_id is not None
    after = planned
    if planned is not None and acted:
        after = count_sorted_runs(table, table.latest_snapshot(), options=options)
    return CompactJobResult(
        table=table.identifier, files=counts, compaction=result if acted else None,
        engine=engine, remote_failure=failure, sorted_runs=planned, sorted_runs_after=after,
    )  # fmt: skip


def _merge_expire_results(passes: list[ExpireResult]) -> ExpireResult:
    if len(passes) == 1:
        return passes[0]
    return ExpireResult(
        dry_run=False,
        expired_snapshot_ids=tuple(i for p in passes for i in p.expired_snapshot_ids),
        earliest_retained_id=passes[-1].earliest_retained_id,
        latest_id=passes[-1].latest_id,
        data_files=tuple(f for p in passes for f in p.data_files),
        changelog_files=tuple(f for p in passes for f in p.changelog_files),
        index_files=tuple(f for p in passes for f in p.index_files),
        manifest_files=tuple(f for p in passes for f in p.manifest_files),
        snapshot_files=tuple(f for p in passes for f in p.snapshot_files),
        bytes_freed=sum(p.bytes_freed for p in passes),
        duration_s=sum(p.duration_s for p in passes),
    )


def expire_snapshots_job(
    table: Table, *, options: CoreOptions, budget: timedelta = timedelta(seconds=60)
) -> ExpireJobResult:
    """Expire snapshots beyond the retention options.

    Skips the (metadata-reading) planning when no more than
    ``snapshot.num-retained.min`` snapshots are retained.

    Args:
        table: The table to maintain.
        options: Effective options of the table (they override the table's
            own retention options only where the table has none).
        budget: Keep running passes of ``snapshot.expire.limit`` snapshots
            while the previous pass hit the limit, for at most this long.

    Returns:
        Snapshots retained before, and what the expiry deleted (all passes).

    Raises:
        CorruptMetadataError: metadata needed for planning is undecodable;
            nothing was deleted.
        InvalidOptionError: ``snapshot.num-retained.max < .min``.

    Storage: see ``ExpireSnapshots.execute``.
    """
    sm = table.snapshot_manager
    latest, earliest = sm.latest_snapshot_id(), sm.earliest_snapshot_id()
    retained = (latest - earliest + 1) if latest is not None and earliest is not None else 0
    if retained <= options.snapshot_num_retained_min:
        return ExpireJobResult(table=table.identifier, snapshots_retained=retained)
    expirer = ExpireSnapshots(table, options=options)
    # snapshot.expire.limit bounds one pass (Paimon expires after every commit);
    # the daemon runs passes until it has caught up with a fast writer.
    deadline = time.monotonic() + budget.total_seconds()
    passes = [expirer.execute()]
    while (
        passes[-1].snapshots_expired >= options.snapshot_expire_limit
        and time.monotonic() < deadline
    ):
        passes.append(expirer.execute())
    expire = _merge_expire_results(passes)
    deleted = {
        "data": len(expire.data_files) + len(expire.changelog_files),  # both in bucket dirs
        "snapshot": len(expire.snapshot_files),
    }
    for kind, n in count_file_types(expire.manifest_files + expire.index_files).items():
        deleted[kind] = deleted.get(kind, 0) + n
    return ExpireJobResult(
        table=table.identifier, snapshots_retained=retained, expire=expire, files_deleted=deleted
    )


def orphan_clean_job(
    table: Table, *, older_than: timedelta, dry_run: bool = False
) -> OrphanCleanJobResult:
    """Delete files under the table that nothing references and that are older than ``older_than``.

    Args:
        table: The table to maintain.
        older_than: Grace period; files younger than this are never deleted
            (a writer may be about to commit them).
        dry_run: Only report.

    Returns:
        What was (or would be) deleted, by file type.

    Raises:
        CorruptMetadataError: metadata is undecodable; nothing was deleted.

    Storage: lists the table directory; deletes orphan files unless ``dry_run``.
    """
    cleaner = OrphanFilesClean(
        file_io=table.file_io,
        paths=table.paths,
        snapshot_manager=table.snapshot_manager,
        older_than=older_than,
    )
    clean = cleaner.plan() if dry_run else cleaner.execute()
    return OrphanCleanJobResult(
        table=table.identifier,
        dry_run=dry_run,
        clean=clean,
        files_deleted={} if dry_run else count_file_types(clean.orphan_files),
    )


def check_job(table: Table) -> CheckJobResult:
    """Verify every live data file of the latest snapshot against its manifest entry.

    Logs one WARNING per bad file (its path and the fields that disagree);
    the count goes to ``snaplake_check_bad_files{table}``.

    Args:
        table: The table to check.

    Returns:
        The check's result.

    Raises:
        CorruptMetadataError: a manifest or schema is undecodable.
        StorageError: the storage failed.

    Storage: reads the latest snapshot's manifests and every live data file;
    writes nothing (see ``Table.check``).
    """
    result = table.check()
    fields: dict[str, list[str]] = {}
    for m in result.mismatches:
        fields.setdefault(m.path, []).append(f"{m.field}[{m.column}]" if m.column else m.field)
    for path, names in fields.items():
        logger.warning(
            "check of %s: data file %s contradicts its manifest entry in %s (snapshot %s); "
            "readers trust those facts: rewrite the file or restore the table",
            table.identifier, path, ", ".join(names), result.snapshot_id,
        )  # fmt: skip
    return CheckJobResult(table=table.identifier, check=result)


_last_partition_checks: dict[str, datetime] = {}
"""``db.table`` -> when this process last checked its partitions (the default memory)."""


def expire_partitions_job(
    table: Table,
    *,
    options: CoreOptions,
    now: datetime | None = None,
    last_checks: MutableMapping[str, datetime] | None = None,
) -> PartitionExpireJobResult:
    """Drop the table's expired partitions, at most every ``partition.expiration-check-interval``.

    A table without ``partition.expiration-time`` (or without partition keys)
    is left alone. The first run in a process checks at once; later runs
    check once ``now`` is past the last check plus the interval (an interval
    of 0 checks at every run).

    Args:
        table: The table to maintain.
        options: Effective options of the table (its own partition options).
        now: The aware clock to expire at (default: the current time).
        last_checks: When each table was last checked (default: this
            process's memory); updated when the table is checked.

    Returns:
        Whether the table was checked, and what the expiry dropped.

    Raises:
        CommitConflictError: writers kept changing the expired partitions
            (see ``PartitionExpire.execute``); the next run tries again.

    Storage: see ``PartitionExpire.execute``.

    Source: Paimon ``PartitionExpire.expire`` (the check interval).
    """
    now = datetime.now(UTC) if now is None else now
    memory = _last_partition_checks if last_checks is None else last_checks
    config = partition_expire_config(options)
    if config is None or not table.partition_keys:
        return PartitionExpireJobResult(table=table.identifier, checked=False)
    last = memory.get(table.identifier)
    interval = config.check_interval
    if last is not None and interval and not now > last + interval:
        return PartitionExpireJobResult(table=table.identifier, checked=False)
    expire = PartitionExpire(
        table,
        commit=maintenance_committer(table, retry_policy=MAINTENANCE_RETRY_POLICY),
        options=options,
    ).execute(now)
    memory[table.identifier] = now
    return PartitionExpireJobResult(table=table.identifier, checked=True, expire=expire)


# ----------------------------------------------------------------- job boundary
def record_job_result(
    metrics: SnaplakeMetrics, result: JobResult, *, duration_s: float, now_s: float
) -> None:
    """Turn a job result into maintenance metrics.

    Args:
        metrics: Where to record.
        result: A job's result.
        duration_s: Wall time of the job, seconds.
        now_s: Epoch seconds of completion (for the last-success gauge).
    """
    table, task = result.table, result.task.value
    metrics.maintenance_runs.labels(table, task, "success" if result.acted else "noop").inc()
    metrics.maintenance_duration.labels(table, task).observe(duration_s)
    metrics.last_success.labels(table, task).set(now_s)
    if isinstance(result, ManifestMergeJobResult):
        metrics.manifest_merge_min_count.labels(table).set(result.merge_min_count)
        if result.manifests_merged:
            metrics.manifests_merged.labels(table).inc(result.manifests_merged)
    elif isinstance(result, CompactJobResult):
        if not result.acted:
            metrics.data_files.labels(table).set(result.files.data_files)
            metrics.small_files.labels(table).set(result.files.small_files)
        if result.files_compacted:
            metrics.files_compacted.labels(table).inc(result.files_compacted)
        if result.remote_failure:
            metrics.remote_failures.labels(table, task, result.remote_failure).inc()
        if result.sorted_runs_after is not None:  # fresher than the watcher's files_interval
            metrics.sorted_runs_max.labels(table).set(result.sorted_runs_after.max_sorted_runs)
            metrics.buckets_over_trigger.labels(table).set(
                result.sorted_runs_after.buckets_over_trigger
            )
    elif isinstance(result, ExpireJobResult):
        if result.snapshots_expired:
            metrics.snapshots_expired.labels(table).inc(result.snapshots_expired)
        for file_type, n in result.files_deleted.items():
            if n:
                metrics.files_deleted.labels(table, file_type).inc(n)
    elif isinstance(result, OrphanCleanJobResult):
        for file_type, n in result.files_deleted.items():
            if n:
                metrics.files_deleted.labels(table, file_type).inc(n)
    elif isinstance(result, CheckJobResult):
        metrics.check_bad_files.labels(table).set(len(result.check.bad_files))
    elif isinstance(result, PartitionExpireJobResult) and result.partitions_expired:
        metrics.partitions_expired.labels(table).inc(result.partitions_expired)
    elif isinstance(result, LIFECYCLE_RESULTS):
        record_lifecycle_result(metrics, result)


def run_job(
    fn: Callable[[], JobResult],
    *,
    table: str,
    task: Task,
    metrics: SnaplakeMetrics,
    clock: Callable[[], float] = time.monotonic,
    wall_clock: Callable[[], float] = time.time,
) -> JobResult | None:
    """Run one job at the job boundary: time it, record it, and never let it raise.

    A failure is logged at ERROR with the table, the task and the traceback
    (a repeat of the same failure without the traceback), counted in
    ``snaplake_maintenance_runs_total{outcome="failure"}`` and
    ``snaplake_maintenance_failures_total{error=<class>}``, and retried at
    the next scheduled run.

    Args:
        fn: The job, bound to its table and options.
        table: ``db.table`` (for logs and labels).
        task: Which task.
        metrics: Where to record.
        clock: Monotonic seconds.
        wall_clock: Epoch seconds.

    Returns:
        The job's result, or ``None`` when it failed.
    """
    start = clock()
    key = (table, task.value)
    try:
        result = fn()
    except Exception as exc:  # job boundary: one table's failure must not stop the daemon
        duration = clock() - start
        metrics.maintenance_runs.labels(table, task.value, "failure").inc()
        metrics.maintenance_failures.labels(table, task.value, type(exc).__name__).inc()
        metrics.maintenance_duration.labels(table, task.value).observe(duration)
        signature = f"{type(exc).__name__}: {exc}"
        with _failing_lock:
            repeated = _failing.get(key) == signature
            _failing[key] = signature
        if repeated:  # the traceback was logged when this failure first appeared
            logger.error("%s of %s still fails (%s); retrying at the next run",
                         task.value, table, signature)  # fmt: skip
        else:
            logger.exception(
                "%s of %s failed after %.1f ms (%s); retrying at the next run",
                task.value, table, duration * 1000, type(exc).__name__,
            )  # fmt: skip
        return None
    with _failing_lock:
        recovered = _failing.pop(key, None)
    if recovered is not None:
        logger.info("%s of %s succeeds again (was: %s)", task.value, table, recovered)
    duration = clock() - start
    record_job_result(metrics, result, duration_s=duration, now_s=wall_clock())
    level = logging.INFO if result.acted and task is not Task.WATCH else logging.DEBUG
    logger.log(level, "%s of %s: %s (%.1f ms)", task.value, table, result.summary(),
               duration * 1000)  # fmt: skip
    return result
