"""Prometheus metrics of snaplake: commits in this process, tables, maintenance, the daemon.

This is the only module that imports ``prometheus_client`` (DESIGN.md §3). It
is shared by every process that commits (a Spark driver, a batch job, the
maintenance daemon):

- **Commit metrics** are recorded by a commit listener
  (:func:`snaplake.commit.result.add_commit_listener`) for every commit call in
  the process, successful or not: ``snaplake_commits_total``,
  ``snaplake_commit_duration_seconds``, ``snaplake_commit_attempts``,
  ``snaplake_commit_retries_total``, ``snaplake_commit_files_added_total``,
  ``snaplake_commit_records_added_total``. A writer exposes them with
  :func:`serve` or pushes them with :func:`push_to_gateway`.
- **Table metrics** (``snaplake_table_*``, ``snaplake_snapshot*``,
  ``snaplake_manifest*``, ``snaplake_data_files``, ``snaplake_small_files``)
  are derived by the daemon from the snapshots it tails, so one scrape target
  covers writers that nobody scrapes. They have their own names
  (``snaplake_table_commits_total`` rather than ``snaplake_commits_total``):
  a commit seen both by its writer's listener and by the daemon is then never
  counted twice by a ``sum``.
- **Maintenance and daemon metrics** (``snaplake_maintenance_*``,
  ``snaplake_daemon_*``).

Labels are bounded: ``table`` (``db.table`` of a table the process committed
to or maintains), ``kind`` (a :class:`~snaplake.store.format.snapshot.CommitKind`),
``outcome``, ``task``, ``file_type``, ``error`` (an exception class name),
``commit_user`` (at most :data:`MAX_COMMIT_USERS` per table, then ``other``).
Never a snapshot id or a path.

Metric objects live on a :class:`SnaplakeMetrics` built on a
``CollectorRegistry`` passed in, so tests use fresh registries;
:func:`default_metrics` is the process-wide instance behind :func:`serve`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, get_type_hints

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    PlatformCollector,
    ProcessCollector,
)
from prometheus_client import push_to_gateway as _push_to_gateway
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import choose_encoder
from prometheus_client.metrics import MetricWrapperBase
from prometheus_client.registry import Collector

from snaplake.commit.result import (
    CommitEvent,
    CommitOutcome,
    add_commit_listener,
    remove_commit_listener,
)

__all__ = [
    "COMMIT_DURATION_BUCKETS_S",
    "FILE_TYPES",
    "MAINTENANCE_OUTCOMES",
    "HealthStatus",
    "MetricsServer",
    "SnaplakeMetrics",
    "default_metrics",
    "exposition",
    "MAX_COMMIT_USERS",
    "OTHER_COMMIT_USER",
    "push_to_gateway",
    "serve",
]

logger = logging.getLogger(__name__)

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
class _Spec:
    """A row of :data:`_METRICS`: attribute, kind, name, labels, HELP text, histogram buckets."""

    attr: str
    kind: type[Counter] | type[Gauge] | type[Histogram]
    name: str  # prometheus_client appends ``_total`` to a counter's name
    labels: tuple[str, ...]
    help: str
    buckets: tuple[float, ...] = ()  # histograms only (``+Inf`` is appended)

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

#: Every prometheus_client metric of :class:`SnaplakeMetrics`, in registration order.
#: ``snaplake_table_freshness_seconds`` is not here: :class:`_FreshnessCollector`
#: computes it at scrape time.
# fmt: off
_METRICS: tuple[_Spec, ...] = (
    # -- commits recorded in this process (commit listener) -------------------
    _Spec("commits", Counter, "snaplake_commits", ("table", "kind", "outcome"),
          "Commit calls made in this process, by table, kind and outcome "
          "(success|duplicate|conflict|exhausted|unknown)."),
    _Spec("commit_duration", Histogram, "snaplake_commit_duration_seconds", ("table", "kind"),
          "Wall time of commit calls made in this process (all outcomes), seconds.",
          COMMIT_DURATION_BUCKETS_S),
    _Spec("commit_attempts", Histogram, "snaplake_commit_attempts", ("table", "kind"),
          "Publish attempts per commit call made in this process (1 = no lost race).",
          _ATTEMPT_BUCKETS),
    _Spec("commit_retries", Counter, "snaplake_commit_retries", ("table", "kind"),
          "Lost publish races retried by commits in this process."),
    _Spec("commit_files_added", Counter, "snaplake_commit_files_added", ("table", "kind"),
          "Data files added by successful commits in this process."),
    _Spec("commit_records_added", Counter, "snaplake_commit_records_added", ("table", "kind"),
          "Rows added minus rows deleted by successful commits in this process."),
    # -- table level, derived from the snapshots the daemon tails -------------
    _Spec("table_commits", Counter, "snaplake_table_commits", ("table", "kind"),
          "Snapshots committed to the table by any writer, by kind "
          "(seen by the daemon tailing the table)."),
    _Spec("table_commits_by_user", Counter, "snaplake_table_commits_by_user",
          ("table", "commit_user"),
          "Snapshots committed to the table, by commitUser (seen by the daemon tailing the "
          f"table; a table's first {MAX_COMMIT_USERS} users seen, later ones as 'other')."),
    _Spec("table_commit_duration", Histogram, "snaplake_table_commit_duration_seconds",
          ("table", "kind"), "Commit wall time recorded by snaplake writers in snapshot "
          "properties (snaplake.commit.duration-ms), seconds; every snaplake writer of the table.",
          COMMIT_DURATION_BUCKETS_S),
    _Spec("table_commit_attempts", Histogram, "snaplake_table_commit_attempts", ("table", "kind"),
          "Publish attempts recorded by snaplake writers in snapshot properties "
          "(snaplake.commit.attempts).", _ATTEMPT_BUCKETS),
    _Spec("table_files_added", Counter, "snaplake_table_files_added", ("table", "kind"),
          "Data files added by snapshots of the table, by kind."),
    _Spec("table_files_deleted", Counter, "snaplake_table_files_removed", ("table", "kind"),
          "Data files logically removed (DELETE entries) by snapshots of the table, by kind."),
    _Spec("table_records_added", Counter, "snaplake_table_records_added", ("table", "kind"),
          "Rows added minus rows deleted by snapshots of the table (deltaRecordCount), by kind."),
    _Spec("table_snapshots_missed", Counter, "snaplake_table_snapshots_missed", ("table",),
          "Snapshots that expired before the daemon could read them (not in the commit counts)."),
    _Spec("table_watch_lag", Histogram, "snaplake_table_watch_lag_seconds", ("table",),
          "Delay between a snapshot's commit time and the daemon seeing it, seconds.",
          _LAG_BUCKETS_S),
    _Spec("snapshot_latest_id", Gauge, "snaplake_snapshot_latest_id", ("table",),
          "Id of the table's latest snapshot."),
    _Spec("snapshots_retained", Gauge, "snaplake_snapshots_retained", ("table",),
          "Snapshot files currently retained by the table."),
    _Spec("snapshots_retained_limit", Gauge, "snaplake_snapshots_retained_limit",
          ("table", "bound"), "Effective retention limits of the table: "
          "bound=min (snapshot.num-retained.min) and bound=max (snapshot.num-retained.max)."),
    _Spec("snapshot_time_retained", Gauge, "snaplake_snapshot_time_retained_seconds",
          ("table",), "Effective snapshot.time-retained of the table, seconds."),
    _Spec("manifest_files", Gauge, "snaplake_manifest_files", ("table",),
          "Manifest files referenced by the latest snapshot (base + delta manifest lists)."),
    _Spec("manifest_merge_min_count", Gauge, "snaplake_manifest_merge_threshold", ("table",),
          "Effective manifest.merge-min-count of the table (the merge threshold)."),
    _Spec("data_files", Gauge, "snaplake_data_files", ("table",),
          "Live data files in the latest snapshot."),
    _Spec("small_files", Gauge, "snaplake_small_files", ("table",),
          "Live data files smaller than target-file-size * compaction.small-file-ratio "
          "in the latest snapshot."),
    _Spec("sorted_runs_max", Gauge, "snaplake_sorted_runs_max", ("table",),
          "Primary-key tables: most sorted runs in one bucket of the latest snapshot."),
    _Spec("buckets_over_trigger", Gauge, "snaplake_buckets_over_compaction_trigger", ("table",),
          "Primary-key tables: buckets with more sorted runs than "
          "num-sorted-run.compaction-trigger."),
    _Spec("table_records", Gauge, "snaplake_table_records", ("table",),
          "Rows in the latest snapshot (totalRecordCount)."),
    _Spec("table_schema_id", Gauge, "snaplake_table_schema_id", ("table",),
          "Id of the table's latest schema (schema/schema-<id>); it steps up on alter_table."),
    # -- maintenance -----------------------------------------------------------
    _Spec("maintenance_runs", Counter, "snaplake_maintenance_runs", ("table", "task", "outcome"),
          "Maintenance task runs by table, task and outcome "
          "(success = acted, noop = nothing due, failure = raised)."),
    _Spec("maintenance_failures", Counter, "snaplake_maintenance_failures",
          ("table", "task", "error"), "Maintenance task failures by exception class."),
    _Spec("maintenance_duration", Histogram, "snaplake_maintenance_duration_seconds",
          ("table", "task"), "Wall time of maintenance task runs, seconds.",
          _MAINTENANCE_BUCKETS_S),
    _Spec("snapshots_expired", Counter, "snaplake_snapshots_expired", ("table",),
          "Snapshots expired by the daemon."),
    _Spec("files_deleted", Counter, "snaplake_files_deleted", ("table", "file_type"),
          "Files physically deleted by maintenance, by file type "
          "(data|manifest|manifest_list|snapshot|other)."),
    _Spec("manifests_merged", Counter, "snaplake_manifests_merged", ("table",),
          "Manifest files replaced by manifest merges."),
    _Spec("files_compacted", Counter, "snaplake_files_compacted", ("table",),
          "Small data files rewritten by compaction."),
    _Spec("check_bad_files", Gauge, "snaplake_check_bad_files", ("table",),
          "Live data files whose content contradicts their manifest entry (stats, key "
          "range, row count, size), as found by the daemon's last check run."),
    _Spec("remote_failures", Counter, "snaplake_daemon_remote_failures", ("table", "task", "error"),
          "Maintenance runs handed to a remote engine (Spark Connect) that failed and ran in "
          "process instead, by exception class."),
    _Spec("last_success", Gauge, "snaplake_daemon_last_success_timestamp_seconds",
          ("table", "task"),
          "Epoch seconds of the last successful (or no-op) run of a maintenance task."),
    # -- the daemon ------------------------------------------------------------
    _Spec("build_info", Gauge, "snaplake_build_info", ("version",),
          "Always 1; the snaplake version of this process."),
    _Spec("daemon_up", Gauge, "snaplake_daemon_up", (), "1 while the maintenance daemon runs."),
    _Spec("daemon_start_time", Gauge, "snaplake_daemon_start_time_seconds", (),
          "Epoch seconds when the daemon started."),
    _Spec("daemon_tables", Gauge, "snaplake_daemon_tables", (),
          "Tables the daemon is configured to maintain (discovered)."),
    _Spec("missing_tables", Gauge, "snaplake_daemon_missing_tables", ("warehouse", "table"),
          "1 for each configured tables entry (table is the entry as written, warehouse its "
          "[[warehouse]] index) that names no existing table, database or warehouse, else 0."),
    _Spec("lease_held", Gauge, "snaplake_table_lease_held", ("table",),
          "1 if this daemon holds the table's maintenance lease."),
    _Spec("lease_acquired", Counter, "snaplake_lease_acquisitions", ("table",),
          "Maintenance leases acquired (including takeovers of expired leases)."),
    _Spec("lease_lost", Counter, "snaplake_lease_losses", ("table",),
          "Maintenance leases lost to another daemon."),
)
# fmt: on

#: Metrics whose ``table`` label is a configured ``tables`` entry, not a maintained table:
#: :meth:`SnaplakeMetrics.forget_table` (a lease lost, a table dropped) leaves them alone.
_CONFIGURED_TABLE_METRICS = frozenset({"missing_tables"})


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
    :data:`_METRICS`, which gives each one's name, HELP text, labels and buckets.

    Args:
        registry: Where the metrics are registered; a fresh
            ``CollectorRegistry()`` in tests.
        clock: Epoch seconds, for freshness (injected by tests).

    Raises:
        ValueError: the registry already holds snaplake metrics (prometheus_client
            refuses duplicate names).
    """

    # Types for mypy: one per row of _METRICS (checked by _check_metrics_table).
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
    remote_failures: Counter
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
        for spec in _METRICS:
            metric = spec.build(registry)
            setattr(self, spec.attr, metric)
            if "table" in spec.labels and spec.attr not in _CONFIGURED_TABLE_METRICS:
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
        for file_type in FILE_TYPES:
            self.files_deleted.labels(table, file_type)
        for task in tasks:
            for outcome in MAINTENANCE_OUTCOMES:
                self.maintenance_runs.labels(table, task, outcome)

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
    """Fail the import unless the metric annotations of SnaplakeMetrics match :data:`_METRICS`."""
    kinds = (Counter, Gauge, Histogram)
    declared = {a: t for a, t in get_type_hints(SnaplakeMetrics).items() if t in kinds}
    rows = {spec.attr: spec.kind for spec in _METRICS}
    if declared != rows or len(rows) != len(_METRICS):
        diff = sorted(set(declared.items()) ^ set(rows.items()), key=str)
        raise TypeError(f"SnaplakeMetrics annotations and _METRICS disagree: {diff}")


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


def _reset_default_for_tests() -> None:
    """Forget the process-wide instance (tests only)."""
    global _default
    with _default_lock:
        if _default is not None:
            remove_commit_listener(_default.record_commit)
        _default = None


# ------------------------------------------------------------------ exposition
@dataclass(frozen=True, slots=True, kw_only=True)
class HealthStatus:
    """Answer of a health probe.

    Attributes:
        ok: 200 when true, 503 when false.
        detail: One line for the response body (no secrets).
    """

    ok: bool
    detail: str = "ok"


def exposition(registry: CollectorRegistry, *, accept: str | None = None) -> tuple[bytes, str]:
    """Render ``registry`` in the format the ``Accept`` header asks for.

    Returns:
        ``(body, content_type)``: Prometheus text format 0.0.4 unless
        OpenMetrics is asked for.
    """
    encoder, content_type = choose_encoder(accept or "")
    return encoder(registry), content_type


class MetricsServer:
    """HTTP server for ``/metrics``, ``/healthz`` and ``/readyz`` on a daemon thread.

    Build it with :func:`serve`.

    Attributes:
        host: The bound address.
        port: The bound port (useful when 0 was asked for).
    """

    def __init__(
        self,
        *,
        registry: CollectorRegistry,
        addr: str,
        port: int,
        liveness: Callable[[], HealthStatus] | None = None,
        readiness: Callable[[], HealthStatus] | None = None,
    ) -> None:
        handler = _make_handler(registry, liveness=liveness, readiness=readiness)
        self._server = ThreadingHTTPServer((addr, port), handler)
        self._server.daemon_threads = True
        self.host = addr
        self.port = int(self._server.server_address[1])
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="snaplake-metrics-http", daemon=True
        )
        self._thread.start()

    @property
    def url(self) -> str:
        """``http://host:port`` of the server."""
        return f"http://{self.host}:{self.port}"

    def close(self) -> None:
        """Stop serving and close the socket."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def _make_handler(
    registry: CollectorRegistry,
    *,
    liveness: Callable[[], HealthStatus] | None,
    readiness: Callable[[], HealthStatus] | None,
) -> type[BaseHTTPRequestHandler]:
    probes: Mapping[str, Callable[[], HealthStatus] | None] = {
        "/healthz": liveness,
        "/readyz": readiness,
    }

    class _Handler(BaseHTTPRequestHandler):
        server_version = "snaplake-metrics"

        def do_GET(self) -> None:  # http.server's name
            path = self.path.split("?", 1)[0]
            if path in ("/metrics", "/"):
                body, content_type = exposition(registry, accept=self.headers.get("Accept"))
                self._reply(200, body, content_type)
            elif path in probes:
                probe = probes[path]
                status = probe() if probe is not None else HealthStatus(ok=True)
                self._reply(
                    200 if status.ok else 503,
                    (status.detail + "\n").encode(),
                    "text/plain; charset=utf-8",
                )
            else:
                self._reply(404, b"not found: try /metrics, /healthz or /readyz\n", "text/plain")

        def _reply(self, code: int, body: bytes, content_type: str) -> None:
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            logger.debug("metrics http: %s", format % args)

    return _Handler


def serve(
    port: int,
    *,
    addr: str = "127.0.0.1",
    metrics: SnaplakeMetrics | None = None,
    liveness: Callable[[], HealthStatus] | None = None,
    readiness: Callable[[], HealthStatus] | None = None,
) -> MetricsServer:
    """Serve the metrics over HTTP for Prometheus to scrape, on a background thread.

    A Spark driver or any writer calls ``snaplake.metrics.serve(9465)`` once;
    every commit the process makes afterwards appears under ``/metrics``.

    Args:
        port: TCP port; 0 picks a free one (read it from ``.port``).
        addr: Address to bind; the loopback by default (expose deliberately).
        metrics: What to serve; :func:`default_metrics` when ``None``.
        liveness: Probe answering ``/healthz``; always 200 when ``None``.
        readiness: Probe answering ``/readyz``; always 200 when ``None``.

    Returns:
        The running server; ``close()`` stops it.

    Raises:
        OSError: the address cannot be bound (port in use, bad address).
    """
    m = metrics if metrics is not None else default_metrics()
    server = MetricsServer(
        registry=m.registry, addr=addr, port=port, liveness=liveness, readiness=readiness
    )
    logger.info("serving metrics on %s/metrics", server.url)
    return server


def push_to_gateway(
    gateway: str,
    *,
    job: str,
    grouping_key: Mapping[str, str] | None = None,
    metrics: SnaplakeMetrics | None = None,
    timeout_s: float = 30.0,
) -> None:
    """Push the metrics to a Prometheus Pushgateway (for batch jobs nobody scrapes).

    Call it at the end of the job (or periodically); it replaces the group's
    previous push.

    Args:
        gateway: ``host:port`` or URL of the Pushgateway.
        job: The ``job`` grouping label, e.g. ``"nightly-ingest"``.
        grouping_key: Further grouping labels (bounded values only).
        metrics: What to push; :func:`default_metrics` when ``None``.
        timeout_s: HTTP timeout, seconds.

    Raises:
        OSError: the gateway cannot be reached or refused the push.
    """
    m = metrics if metrics is not None else default_metrics()
    _push_to_gateway(
        gateway,
        job=job,
        registry=m.registry,
        grouping_key=dict(grouping_key or {}),
        timeout=timeout_s,
    )
