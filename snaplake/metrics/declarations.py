"""The metric declarations: every prometheus_client metric of snaplake as a table row.

:data:`METRICS` names each metric of :class:`~snaplake.metrics.recording.SnaplakeMetrics`
(attribute, kind, Prometheus name, labels, HELP text, histogram buckets) in
registration order; the label values that are fixed sets and the
``commit_user`` bound are declared beside it. Nothing here records or serves.
"""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

__all__ = [
    "COMMIT_DURATION_BUCKETS_S",
    "CONFIGURED_TABLE_METRICS",
    "FILE_TYPES",
    "MAINTENANCE_OUTCOMES",
    "MAX_COMMIT_USERS",
    "METRICS",
    "OTHER_COMMIT_USER",
    "MetricSpec",
]

#: Bucket bounds of the commit-latency histograms, seconds (5 ms .. 2 min).
COMMIT_DURATION_BUCKETS_S: tuple[float, ...] = (
    0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.25, 0.5, 0.75,
    1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0,
)  # fmt: skip
_ATTEMPT_BUCKETS: tuple[float, ...] = (1, 2, 3, 4, 6, 8, 11, 16)
_MAINTENANCE_BUCKETS_S: tuple[float, ...] = (
    0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0,
)  # fmt: skip
_LAG_BUCKETS_S: tuple[float, ...] = (0.1, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 300.0)

#: Values of the ``outcome`` label of ``snaplake_maintenance_runs_total``.
MAINTENANCE_OUTCOMES: tuple[str, ...] = ("success", "noop", "failure")
#: Values of the ``file_type`` label of ``snaplake_files_deleted_total``.
FILE_TYPES: tuple[str, ...] = ("data", "manifest", "manifest_list", "snapshot", "other")


@dataclass(frozen=True, slots=True)
class MetricSpec:
    """A row of :data:`METRICS`: attribute, kind, name, labels, HELP text, histogram buckets.

    Attributes:
        attr: The attribute of ``SnaplakeMetrics`` holding the metric.
        kind: ``Counter``, ``Gauge`` or ``Histogram``.
        name: The Prometheus name (prometheus_client appends ``_total`` to a counter's).
        labels: Label names, in order.
        help: The HELP text.
        buckets: Histogram bucket bounds (``+Inf`` is appended); histograms only.
    """

    attr: str
    kind: type[Counter] | type[Gauge] | type[Histogram]
    name: str
    labels: tuple[str, ...]
    help: str
    buckets: tuple[float, ...] = ()

    def build(self, registry: CollectorRegistry) -> Counter | Gauge | Histogram:
        """Create the metric on ``registry`` (ValueError: the name is already there)."""
        if issubclass(self.kind, Histogram):
            return Histogram(
                self.name, self.help, self.labels, registry=registry, buckets=self.buckets
            )
        return self.kind(self.name, self.help, self.labels, registry=registry)


MAX_COMMIT_USERS = 20
"""Distinct ``commit_user`` label values per table; later users are counted as ``other``.

A table has a few writers (a Spark query's user is stable across its
restarts), so the bound only stops a misconfigured writer with a fresh user
per run from growing the series without end."""

OTHER_COMMIT_USER = "other"
"""The ``commit_user`` label of users past :data:`MAX_COMMIT_USERS`."""

#: Every prometheus_client metric of
#: :class:`~snaplake.metrics.recording.SnaplakeMetrics`, in registration order.
#: ``snaplake_table_freshness_seconds`` is not here: :mod:`snaplake.metrics.recording`
#: computes it at scrape time.
# fmt: off
METRICS: tuple[MetricSpec, ...] = (
    # -- commits recorded in this process (commit listener) -------------------
    MetricSpec("commits", Counter, "snaplake_commits", ("table", "kind", "outcome"),
               "Commit calls made in this process, by table, kind and outcome "
               "(success|duplicate|conflict|exhausted|unknown)."),
    MetricSpec("commit_duration", Histogram, "snaplake_commit_duration_seconds", ("table", "kind"),
               "Wall time of commit calls made in this process (all outcomes), seconds.",
               COMMIT_DURATION_BUCKETS_S),
    MetricSpec("commit_attempts", Histogram, "snaplake_commit_attempts", ("table", "kind"),
               "Publish attempts per commit call made in this process (1 = no lost race).",
               _ATTEMPT_BUCKETS),
    MetricSpec("commit_retries", Counter, "snaplake_commit_retries", ("table", "kind"),
               "Lost publish races retried by commits in this process."),
    MetricSpec("commit_files_added", Counter, "snaplake_commit_files_added", ("table", "kind"),
               "Data files added by successful commits in this process."),
    MetricSpec("commit_records_added", Counter, "snaplake_commit_records_added", ("table", "kind"),
               "Rows added minus rows deleted by successful commits in this process."),
    # -- table level, derived from the snapshots the daemon tails -------------
    MetricSpec("table_commits", Counter, "snaplake_table_commits", ("table", "kind"),
               "Snapshots committed to the table by any writer, by kind "
               "(seen by the daemon tailing the table)."),
    MetricSpec("table_commits_by_user", Counter, "snaplake_table_commits_by_user",
               ("table", "commit_user"),
               "Snapshots committed to the table, by commitUser (seen by the daemon tailing the "
               f"table; a table's first {MAX_COMMIT_USERS} users seen, later ones as 'other')."),
    MetricSpec("table_commit_duration", Histogram, "snaplake_table_commit_duration_seconds",
               ("table", "kind"), "Commit wall time recorded by snaplake writers in snapshot "
               "properties (snaplake.commit.duration-ms), seconds; every snaplake writer of "
               "the table.",
               COMMIT_DURATION_BUCKETS_S),
    MetricSpec("table_commit_attempts", Histogram, "snaplake_table_commit_attempts",
               ("table", "kind"),
               "Publish attempts recorded by snaplake writers in snapshot properties "
               "(snaplake.commit.attempts).", _ATTEMPT_BUCKETS),
    MetricSpec("table_files_added", Counter, "snaplake_table_files_added", ("table", "kind"),
               "Data files added by snapshots of the table, by kind."),
    MetricSpec("table_files_deleted", Counter, "snaplake_table_files_removed", ("table", "kind"),
               "Data files logically removed (DELETE entries) by snapshots of the table, by kind."),
    MetricSpec("table_records_added", Counter, "snaplake_table_records_added", ("table", "kind"),
               "Rows added minus rows deleted by snapshots of the table (deltaRecordCount), "
               "by kind."),
    MetricSpec("table_snapshots_missed", Counter, "snaplake_table_snapshots_missed", ("table",),
               "Snapshots that expired before the daemon could read them (not in the commit "
               "counts)."),
    MetricSpec("table_watch_lag", Histogram, "snaplake_table_watch_lag_seconds", ("table",),
               "Delay between a snapshot's commit time and the daemon seeing it, seconds.",
               _LAG_BUCKETS_S),
    MetricSpec("snapshot_latest_id", Gauge, "snaplake_snapshot_latest_id", ("table",),
               "Id of the table's latest snapshot."),
    MetricSpec("snapshots_retained", Gauge, "snaplake_snapshots_retained", ("table",),
               "Snapshot files currently retained by the table."),
    MetricSpec("snapshots_retained_limit", Gauge, "snaplake_snapshots_retained_limit",
               ("table", "bound"), "Effective retention limits of the table: "
               "bound=min (snapshot.num-retained.min) and bound=max (snapshot.num-retained.max)."),
    MetricSpec("snapshot_time_retained", Gauge, "snaplake_snapshot_time_retained_seconds",
               ("table",), "Effective snapshot.time-retained of the table, seconds."),
    MetricSpec("manifest_files", Gauge, "snaplake_manifest_files", ("table",),
               "Manifest files referenced by the latest snapshot (base + delta manifest lists)."),
    MetricSpec("manifest_merge_min_count", Gauge, "snaplake_manifest_merge_threshold", ("table",),
               "Effective manifest.merge-min-count of the table (the merge threshold)."),
    MetricSpec("data_files", Gauge, "snaplake_data_files", ("table",),
               "Live data files in the latest snapshot."),
    MetricSpec("small_files", Gauge, "snaplake_small_files", ("table",),
               "Live data files smaller than target-file-size * compaction.small-file-ratio "
               "in the latest snapshot."),
    MetricSpec("sorted_runs_max", Gauge, "snaplake_sorted_runs_max", ("table",),
               "Primary-key tables: most sorted runs in one bucket of the latest snapshot."),
    MetricSpec("buckets_over_trigger", Gauge, "snaplake_buckets_over_compaction_trigger",
               ("table",),
               "Primary-key tables: buckets with more sorted runs than "
               "num-sorted-run.compaction-trigger."),
    MetricSpec("table_records", Gauge, "snaplake_table_records", ("table",),
               "Rows in the latest snapshot (totalRecordCount)."),
    MetricSpec("table_schema_id", Gauge, "snaplake_table_schema_id", ("table",),
               "Id of the table's latest schema (schema/schema-<id>); it steps up on alter_table."),
    # -- maintenance -----------------------------------------------------------
    MetricSpec("maintenance_runs", Counter, "snaplake_maintenance_runs",
               ("table", "task", "outcome"),
               "Maintenance task runs by table, task and outcome "
               "(success = acted, noop = nothing due, failure = raised)."),
    MetricSpec("maintenance_failures", Counter, "snaplake_maintenance_failures",
               ("table", "task", "error"), "Maintenance task failures by exception class."),
    MetricSpec("maintenance_duration", Histogram, "snaplake_maintenance_duration_seconds",
               ("table", "task"), "Wall time of maintenance task runs, seconds.",
               _MAINTENANCE_BUCKETS_S),
    MetricSpec("snapshots_expired", Counter, "snaplake_snapshots_expired", ("table",),
               "Snapshots expired by the daemon."),
    MetricSpec("files_deleted", Counter, "snaplake_files_deleted", ("table", "file_type"),
               "Files physically deleted by maintenance, by file type "
               "(data|manifest|manifest_list|snapshot|other)."),
    MetricSpec("manifests_merged", Counter, "snaplake_manifests_merged", ("table",),
               "Manifest files replaced by manifest merges."),
    MetricSpec("files_compacted", Counter, "snaplake_files_compacted", ("table",),
               "Small data files rewritten by compaction."),
    MetricSpec("check_bad_files", Gauge, "snaplake_check_bad_files", ("table",),
               "Live data files whose content contradicts their manifest entry (stats, key "
               "range, row count, size), as found by the daemon's last check run."),
    MetricSpec("partitions_expired", Counter, "snaplake_partitions_expired", ("table",),
               "Partitions dropped by the daemon's partition expiry (partition.expiration-time)."),
    MetricSpec("remote_failures", Counter, "snaplake_daemon_remote_failures",
               ("table", "task", "error"),
               "Maintenance runs handed to a remote engine (Spark Connect) that failed and ran in "
               "process instead, by exception class."),
    MetricSpec("tags", Gauge, "snaplake_tags", ("table",),
               "Tags of the table (manual and automatic) after the daemon's last auto_tag or "
               "expire_tags run."),
    MetricSpec("tags_created", Counter, "snaplake_tags_created", ("table",),
               "Tags created by the daemon's auto_tag task (tag.automatic-creation)."),
    MetricSpec("tags_expired", Counter, "snaplake_tags_expired", ("table",),
               "Tags deleted by the daemon (tagTimeRetained, tag.num-retained-max)."),
    MetricSpec("consumers_expired", Counter, "snaplake_consumers_expired", ("table",),
               "Consumers deleted by the daemon, idle longer than consumer.expiration-time."),
    MetricSpec("consumer_lag", Gauge, "snaplake_consumer_lag_snapshots", ("table", "consumer"),
               "Snapshots a consumer has yet to read (latest id + 1 - its nextSnapshot), as of "
               "the daemon's last expire_consumers run."),
    MetricSpec("consumer_lag_seconds", Gauge, "snaplake_consumer_lag_seconds",
               ("table", "consumer"),
               "Seconds a consumer is behind: now minus the commit time of its oldest unread "
               "snapshot (its nextSnapshot), 0 when caught up, as of the daemon's last "
               "expire_consumers run."),
    MetricSpec("last_success", Gauge, "snaplake_daemon_last_success_timestamp_seconds",
               ("table", "task"),
               "Epoch seconds of the last successful (or no-op) run of a maintenance task."),
    # -- the daemon ------------------------------------------------------------
    MetricSpec("build_info", Gauge, "snaplake_build_info", ("version",),
               "Always 1; the snaplake version of this process."),
    MetricSpec("daemon_up", Gauge, "snaplake_daemon_up", (),
               "1 while the maintenance daemon runs."),
    MetricSpec("daemon_start_time", Gauge, "snaplake_daemon_start_time_seconds", (),
               "Epoch seconds when the daemon started."),
    MetricSpec("daemon_tables", Gauge, "snaplake_daemon_tables", (),
               "Tables the daemon is configured to maintain (discovered)."),
    MetricSpec("missing_tables", Gauge, "snaplake_daemon_missing_tables", ("warehouse", "table"),
               "1 for each configured tables entry (table is the entry as written, warehouse its "
               "[[warehouse]] index) that names no existing table, database or warehouse, else 0."),
    MetricSpec("lease_held", Gauge, "snaplake_table_lease_held", ("table",),
               "1 if this daemon holds the table's maintenance lease."),
    MetricSpec("lease_acquired", Counter, "snaplake_lease_acquisitions", ("table",),
               "Maintenance leases acquired (including takeovers of expired leases)."),
    MetricSpec("lease_lost", Counter, "snaplake_lease_losses", ("table",),
               "Maintenance leases lost to another daemon."),
)
# fmt: on

#: Metrics whose ``table`` label is a configured ``tables`` entry, not a maintained table:
#: :meth:`~snaplake.metrics.recording.SnaplakeMetrics.forget_table` (a lease lost, a table
#: dropped) leaves them alone.
CONFIGURED_TABLE_METRICS = frozenset({"missing_tables"})
