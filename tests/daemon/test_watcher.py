"""TableWatcher: table metrics derived from tailing snapshots."""

from __future__ import annotations

from datetime import timedelta

from prometheus_client import CollectorRegistry
from tests.daemon.helpers import LOW_THRESHOLDS, append, memory_table

from snaplake.daemon.jobs import expire_snapshots_job, merge_manifests_job
from snaplake.daemon.watcher import TableWatcher
from snaplake.metrics import SnaplakeMetrics
from snaplake.options import CoreOptions


def _value(metric, *labels):
    return metric.labels(*labels)._value.get()


def test_watcher_tails_new_snapshots_and_sets_gauges():
    metrics = SnaplakeMetrics(registry=CollectorRegistry())
    table = memory_table()
    append(table, 2)
    opts = CoreOptions(LOW_THRESHOLDS)
    watcher = TableWatcher(table, metrics=metrics, options=lambda: opts,
                           files_interval=timedelta(0))  # fmt: skip
    first = watcher.poll()
    assert first.new_snapshots == 0
    assert first.latest_snapshot_id == 2
    assert _value(metrics.snapshot_latest_id, "db.t") == 2
    assert _value(metrics.manifest_files, "db.t") == 2
    assert _value(metrics.data_files, "db.t") == 2
    assert _value(metrics.manifest_merge_min_count, "db.t") == 4
    assert _value(metrics.snapshots_retained_limit, "db.t", "max") == 6

    append(table, 3, start=100)
    merge_manifests_job(table, options=opts)
    second = watcher.poll()
    assert second.new_snapshots == 4
    assert second.latest_snapshot_id == 6
    assert _value(metrics.table_commits, "db.t", "APPEND") == 3
    assert _value(metrics.table_commits, "db.t", "COMPACT") == 1
    assert _value(metrics.table_commits_by_user, "db.t", "writer") == 3
    assert _value(metrics.table_commits_by_user, "db.t", "snaplake-maintenance") == 1
    assert _value(metrics.table_files_added, "db.t", "APPEND") == 3
    assert _value(metrics.table_records_added, "db.t", "APPEND") == 15
    hist = metrics.table_commit_duration.labels("db.t", "APPEND")
    assert hist._sum.get() > 0
    assert _value(metrics.snapshots_retained, "db.t") == 6
    assert _value(metrics.manifest_files, "db.t") < 4
    assert _value(metrics.table_records, "db.t") == 25


def test_watcher_counts_snapshots_expired_before_it_saw_them():
    metrics = SnaplakeMetrics(registry=CollectorRegistry())
    table = memory_table()
    append(table, 1)
    opts = CoreOptions(LOW_THRESHOLDS)
    watcher = TableWatcher(table, metrics=metrics, options=lambda: opts)
    watcher.poll()
    append(table, 9, start=100)
    keep6 = CoreOptions({**LOW_THRESHOLDS, "snapshot.time-retained": "1 h"})
    expire_snapshots_job(table, options=keep6)  # keeps 6 of 10
    result = watcher.poll()
    assert result.missed_snapshots == 3
    assert result.new_snapshots == 6
    assert _value(metrics.table_snapshots_missed, "db.t") == 3
    assert _value(metrics.snapshots_retained, "db.t") == 6


def test_empty_table():
    metrics = SnaplakeMetrics(registry=CollectorRegistry())
    table = memory_table()
    result = TableWatcher(table, metrics=metrics, options=lambda: CoreOptions({})).poll()
    assert result.latest_snapshot_id is None
    assert _value(metrics.snapshot_latest_id, "db.t") == 0


def test_a_table_empty_at_the_first_poll_has_every_later_commit_counted():
    metrics = SnaplakeMetrics(registry=CollectorRegistry())
    table = memory_table()
    watcher = TableWatcher(table, metrics=metrics, options=lambda: CoreOptions({}))
    watcher.poll()
    append(table, 3)
    assert watcher.poll().new_snapshots == 3
    assert _value(metrics.table_commits, "db.t", "APPEND") == 3
