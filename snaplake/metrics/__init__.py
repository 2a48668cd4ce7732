"""Prometheus metrics of snaplake: commits in this process, tables, maintenance, the daemon.

This is the only package that imports ``prometheus_client`` (DESIGN.md §3). It
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

Modules: :mod:`~snaplake.metrics.declarations` (every metric's name, labels,
HELP text and buckets), :mod:`~snaplake.metrics.recording` (``SnaplakeMetrics``,
``default_metrics``), :mod:`~snaplake.metrics.server` (``serve``,
``push_to_gateway``, the health probes).
"""

from __future__ import annotations

from snaplake.metrics.declarations import (
    COMMIT_DURATION_BUCKETS_S,
    FILE_TYPES,
    MAINTENANCE_OUTCOMES,
    MAX_COMMIT_USERS,
    OTHER_COMMIT_USER,
)
from snaplake.metrics.recording import SnaplakeMetrics, default_metrics
from snaplake.metrics.server import (
    HealthStatus,
    MetricsServer,
    exposition,
    push_to_gateway,
    serve,
)

__all__ = [
    "COMMIT_DURATION_BUCKETS_S",
    "FILE_TYPES",
    "MAINTENANCE_OUTCOMES",
    "MAX_COMMIT_USERS",
    "OTHER_COMMIT_USER",
    "HealthStatus",
    "MetricsServer",
    "SnaplakeMetrics",
    "default_metrics",
    "exposition",
    "push_to_gateway",
    "serve",
]
