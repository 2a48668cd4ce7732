"""Recording: the snaplake metrics on one registry, and the process-wide instance.

:class:`SnaplakeMetrics` creates every metric declared in
:data:`~snaplake.metrics.declarations.METRICS` (plus the scrape-time
``snaplake_table_freshness_seconds``) on a ``CollectorRegistry`` passed in, so
tests use fresh registries, and records commits (as a commit listener), the
snapshots the daemon tails and maintenance runs. :func:`default_metrics` is the
process-wide instance, recording every commit the process makes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import get_type_hints

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    PlatformCollector,
    ProcessCollector,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.metrics import MetricWrapperBase
from prometheus_client.registry import Collector

from snaplake.commit.result import CommitEvent, CommitOutcome, add_commit_listener
from snaplake.metrics.declarations import (
    CONFIGURED_TABLE_METRICS,
    FILE_TYPES,
    MAINTENANCE_OUTCOMES,
    MAX_COMMIT_USERS,
    METRICS,
    OTHER_COMMIT_USER,
)

__all__ = ["SnaplakeMetrics", "default_metrics"]


class _FreshnessCollector(Collector):
    """Exports ``now - latest commit time`` per table, computed at scrape time."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._last_commit_s: dict[str, float] = {}

    def set(self, table: str, commit_time_s: float) -> None:
        with self._lock:
            self._last_commit_s[table] = commit_time_s

    def remove(self, table: str) -> None:
        with self._lock:
            self._last_commit_s.pop(table, None)

    def describe(self) -> Iterable[Metric]:
        return [self._family()]

    def _family(self) -> GaugeMetricFamily:
        return GaugeMetricFamily(
            "snaplake_table_freshness_seconds",
            "Seconds since the latest snapshot of the table was committed (now - timeMillis), "
            "as seen by the daemon tailing it.",
            labels=["table"],
        )

    def collect(self) -> Iterable[Metric]:
        family = self._family()
        now = self._clock()
        with self._lock:
            items = sorted(self._last_commit_s.items())
        for table, commit_s in items:
            family.add_metric([table], max(0.0, now - commit_s))
        return [family]


class SnaplakeMetrics:
    """Every snaplake metric, created on one registry.

    The metric attributes (``commits``, ``table_watch_lag``, ...) are the rows of
    :data:`~snaplake.metrics.declarations.METRICS`, which gives each one's name, HELP
    text, labels and buckets.

    Args:
        registry: Where the metrics are registered; a fresh
            ``CollectorRegistry()`` in tests.
        clock: Epoch seconds, for freshness (injected by tests).

    Raises:
        ValueError: the registry already holds snaplake metrics (prometheus_client
            refuses duplicate names).
    """

    # Types for mypy: one per row of METRICS (checked by _check_metrics_table).
    commits: Counter
    commit_duration: Histogram
    commit_attempts: Histogram
    commit_retries: Counter
    commit_files_added: Counter
    commit_records_added: Counter
    table_commits: Counter
    table_commits_by_user: Counter
    table_commit_duration: Histogram
    table_commit_attempts: Histogram
    table_files_added: Counter
    table_files_deleted: Counter
    table_records_added: Counter
    table_snapshots_missed: Counter
    table_watch_lag: Histogram
    snapshot_latest_id: Gauge
    snapshots_retained: Gauge
    snapshots_retained_limit: Gauge
    snapshot_time_retained: Gauge
    manifest_files: Gauge
    manifest_merge_min_count: Gauge
    data_files: Gauge
    small_files: Gauge
    sorted_runs_max: Gauge
    buckets_over_trigger: Gauge
    table_records: Gauge
    table_schema_id: Gauge
    maintenance_runs: Counter
    maintenance_failures: Counter
    maintenance_duration: Histogram
    snapshots_expired: Counter
    files_deleted: Counter
    manifests_merged: Counter
    files_compacted: Counter
    check_bad_files: Gauge
    partitions_expired: Counter
    remote_failures: Counter
    tags: Gauge
    tags_created: Counter
    tags_expired: Counter
    consumers_expired: Counter
    consumer_lag: Gauge
    consumer_lag_seconds: Gauge
    last_success: Gauge
    build_info: Gauge
    daemon_up: Gauge
    daemon_start_time: Gauge
    daemon_tables: Gauge
    missing_tables: Gauge
    lease_held: Gauge
    lease_acquired: Counter
    lease_lost: Counter

    def __init__(
        self, *, registry: CollectorRegistry, clock: Callable[[], float] = time.time
    ) -> None:
        self.registry = registry
        self._commit_series: set[tuple[str, str]] = set()
        self._users_lock = threading.Lock()
        self._users: dict[str, set[str]] = {}  # table -> commit_user label values
        self._per_table: list[Counter | Gauge | Histogram] = []  # labelled by ``table``
        for spec in METRICS:
            metric = spec.build(registry)
            setattr(self, spec.attr, metric)
            if "table" in spec.labels and spec.attr not in CONFIGURED_TABLE_METRICS:
                self._per_table.append(metric)
        self._freshness = _FreshnessCollector(clock)
        registry.register(self._freshness)
        self.build_info.labels(_version()).set(1)

    # ------------------------------------------------------------------ commits
    def record_commit(self, event: CommitEvent) -> None:
        """Record one commit call (the commit listener).

        Args:
            event: What ``FileStoreCommit.commit`` reported; failures carry
                ``result=None``.
        """
        table, kind = event.table, event.kind.value
        if (table, kind) not in self._commit_series:
            # Every outcome exists from the first commit on: a conflict rate is 0, not absent.
            self._commit_series.add((table, kind))
            for outcome in CommitOutcome:
                self.commits.labels(table, kind, outcome.value)
            self.commit_retries.labels(table, kind)
        self.commits.labels(table, kind, event.outcome.value).inc()
        self.commit_duration.labels(table, kind).observe(max(0.0, event.duration_s))
        if event.attempts > 0:
            self.commit_attempts.labels(table, kind).observe(event.attempts)
            self.commit_retries.labels(table, kind).inc(event.attempts - 1)
        if event.result is not None and not event.result.was_duplicate:
            self.commit_files_added.labels(table, kind).inc(event.result.files_added)
            records = event.result.records_added
            if records > 0:
                self.commit_records_added.labels(table, kind).inc(records)

    # ------------------------------------------------------------------ tables
    def record_table_commit(
        self,
        *,
        table: str,
        kind: str,
        files_added: int,
        files_deleted: int,
        records_added: int,
        duration_s: float | None,
        attempts: int | None,
        lag_s: float | None = None,
        commit_user: str | None = None,
    ) -> None:
        """Record one snapshot seen by the table watcher.

        Args:
            table: ``db.table``.
            kind: Commit kind of the snapshot (``APPEND``, ``COMPACT``, ...).
            files_added: ADD entries of its delta manifests.
            files_deleted: DELETE entries of its delta manifests.
            records_added: Its ``deltaRecordCount`` (counted only when > 0).
            duration_s: ``snaplake.commit.duration-ms`` / 1000, ``None`` when the
                writer was not snaplake.
            attempts: ``snaplake.commit.attempts``, ``None`` when absent.
            lag_s: Seconds between its commit time and now.
            commit_user: Its ``commitUser`` (a table's first
                :data:`MAX_COMMIT_USERS` distinct users get their own series).
        """
        self.table_commits.labels(table, kind).inc()
        if commit_user is not None:
            self.table_commits_by_user.labels(table, self._user_label(table, commit_user)).inc()
        self.table_files_added.labels(table, kind).inc(max(0, files_added))
        self.table_files_deleted.labels(table, kind).inc(max(0, files_deleted))
        if records_added > 0:
            self.table_records_added.labels(table, kind).inc(records_added)
        if duration_s is not None:
            self.table_commit_duration.labels(table, kind).observe(max(0.0, duration_s))
        if attempts is not None:
            self.table_commit_attempts.labels(table, kind).observe(attempts)
        if lag_s is not None:
            self.table_watch_lag.labels(table).observe(max(0.0, lag_s))

    def _user_label(self, table: str, user: str) -> str:
        with self._users_lock:
            users = self._users.setdefault(table, set())
            if user in users or len(users) < MAX_COMMIT_USERS:
                users.add(user)
                return user
        return OTHER_COMMIT_USER

    def set_last_commit_time(self, *, table: str, commit_time_s: float) -> None:
        """Set the commit time (epoch seconds) freshness is measured from."""
        self._freshness.set(table, commit_time_s)

    def init_table(self, *, table: str, tasks: Iterable[str]) -> None:
        """Create the table's counters at zero so every series exists from the first scrape.

        Args:
            table: ``db.table``.
            tasks: Names of the maintenance tasks enabled for the table.
        """
        self.table_snapshots_missed.labels(table)
        self.snapshots_expired.labels(table)
        self.manifests_merged.labels(table)
        self.files_compacted.labels(table)
        self.tags_created.labels(table)
        self.tags_expired.labels(table)
        self.consumers_expired.labels(table)
        for file_type in FILE_TYPES:
            self.files_deleted.labels(table, file_type)
        for task in tasks:
            for outcome in MAINTENANCE_OUTCOMES:
                self.maintenance_runs.labels(table, task, outcome)

    def set_consumer_lags(
        self, table: str, lags: Mapping[str, int], seconds: Mapping[str, float]
    ) -> None:
        """Set ``table``'s consumer lag gauges (snapshots, seconds); drop gone consumers' series.

        Args:
            table: ``db.table``.
            lags: ``{consumer id: snapshots it has yet to read}`` of every consumer now.
            seconds: ``{consumer id: seconds behind}`` (missing ids: 0).
        """
        for gauge in (self.consumer_lag, self.consumer_lag_seconds):
            with gauge._lock:
                gone = [k for k in gauge._metrics if k[0] == table and k[1] not in lags]
            for key in gone:
                gauge.remove(*key)
        for consumer, lag in lags.items():
            self.consumer_lag.labels(table, consumer).set(lag)
            self.consumer_lag_seconds.labels(table, consumer).set(seconds.get(consumer, 0.0))

    def forget_table(self, table: str) -> None:
        """Drop every series of ``table`` (the lease went to another daemon).

        The other daemon exports the table from then on; keeping stale gauges
        here would make ``sum`` over daemons double count.
        """
        self._freshness.remove(table)
        self._commit_series = {k for k in self._commit_series if k[0] != table}
        with self._users_lock:
            self._users.pop(table, None)
        for metric in self._per_table:
            _remove_table(metric, table)


def _version() -> str:
    import snaplake

    return str(getattr(snaplake, "__version__", "unknown"))


def _remove_table(metric: MetricWrapperBase, table: str) -> None:
    """Remove every child of the labelled ``metric`` whose ``table`` label is ``table``."""
    pos = list(metric._labelnames).index("table")
    with metric._lock:
        keys = [key for key in metric._metrics if key[pos] == table]
    for key in keys:
        metric.remove(*key)


def _check_metrics_table() -> None:
    """Fail the import unless the metric annotations of SnaplakeMetrics match the METRICS rows."""
    kinds = (Counter, Gauge, Histogram)
    declared = {a: t for a, t in get_type_hints(SnaplakeMetrics).items() if t in kinds}
    rows = {spec.attr: spec.kind for spec in METRICS}
    if declared != rows or len(rows) != len(METRICS):
        diff = sorted(set(declared.items()) ^ set(rows.items()), key=str)
        raise TypeError(f"SnaplakeMetrics annotations and METRICS disagree: {diff}")


_check_metrics_table()


# ---------------------------------------------------------------- process-wide
_default: SnaplakeMetrics | None = None
_default_lock = threading.Lock()


def default_metrics() -> SnaplakeMetrics:
    """Return the process-wide metrics, recording every commit from the first call on.

    The first call creates a registry with the snaplake metrics plus the
    standard process and platform collectors (``process_cpu_seconds_total``,
    ``process_resident_memory_bytes``, ...) and registers
    :meth:`SnaplakeMetrics.record_commit` as a commit listener, so every
    later ``FileStoreCommit.commit`` in this process is recorded.
    """
    global _default
    with _default_lock:
        if _default is None:
            registry = CollectorRegistry(auto_describe=True)
            ProcessCollector(registry=registry)
            PlatformCollector(registry=registry)
            _default = SnaplakeMetrics(registry=registry)
            add_commit_listener(_default.record_commit)
        return _default
