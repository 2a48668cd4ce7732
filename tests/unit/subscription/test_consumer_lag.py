"""Consumer lag in snapshots and seconds: the helper, the daemon job and its two gauges."""

from __future__ import annotations

import dataclasses

from prometheus_client import CollectorRegistry
from tests.daemon.helpers import append, memory_table

from snaplake.daemon.config import Task
from snaplake.daemon.jobs import run_job
from snaplake.daemon.lifecycle_jobs import ExpireConsumersJobResult, expire_consumers_job
from snaplake.metrics import SnaplakeMetrics
from snaplake.options import CoreOptions
from snaplake.store.consumers import ConsumerLag, consumer_lags

T0 = 1_700_000_000_000  # epoch ms of snapshot 1; snapshot i at T0 + (i - 1) minutes


def _timed_table():
    table = memory_table({"snapshot.num-retained.min": "2", "snapshot.num-retained.max": "3",
                          "snapshot.time-retained": "1 ms"})  # fmt: skip
    append(table, 5)
    for snap in table.snapshots():
        new = dataclasses.replace(snap, time_millis=T0 + (snap.id - 1) * 60_000)
        table.file_io.write_bytes(table.paths.snapshot_path(snap.id), new.to_bytes(),
                                  overwrite=True)  # fmt: skip
    return table


def test_lag_is_measured_from_the_oldest_unread_snapshot():
    table = _timed_table()
    now = T0 + 10 * 60_000
    lags = consumer_lags({"new": 6, "mid": 4, "first": 1, "ahead": 9}, table.snapshot_manager,
                         now_ms=now)  # fmt: skip
    assert lags == {
        "new": ConsumerLag(6, 0, 0.0),  # caught up
        "mid": ConsumerLag(4, 2, 7 * 60.0),  # snapshot 4 at T0 + 3 min
        "first": ConsumerLag(1, 5, 10 * 60.0),
        "ahead": ConsumerLag(9, 0, 0.0),
    }
    # A next snapshot that expired counts from the earliest retained one.
    table.set_consumer("keep", next_snapshot=3)
    table.expire_snapshots()
    assert table.snapshot_manager.earliest_snapshot_id() == 3
    lags = consumer_lags({"gone": 1}, table.snapshot_manager, now_ms=now)
    assert lags["gone"] == ConsumerLag(1, 5, 8 * 60.0)


def test_daemon_job_exports_both_gauges_per_consumer_and_drops_gone_ones():
    table = _timed_table()
    table.set_consumer("behind", next_snapshot=4)
    table.set_consumer("done", next_snapshot=6)
    metrics = SnaplakeMetrics(registry=CollectorRegistry())
    opts = CoreOptions(table.options)
    now = lambda: T0 + 30 * 60_000  # noqa: E731
    result = run_job(lambda: expire_consumers_job(table, options=opts, now_ms=now), table="db.t",
                     task=Task.EXPIRE_CONSUMERS, metrics=metrics)  # fmt: skip
    assert isinstance(result, ExpireConsumersJobResult)
    assert result.lags == {"behind": 2, "done": 0}
    assert result.lag_seconds == {"behind": 27 * 60.0, "done": 0.0}
    assert metrics.consumer_lag.labels("db.t", "behind")._value.get() == 2
    assert metrics.consumer_lag_seconds.labels("db.t", "behind")._value.get() == 27 * 60.0
    assert metrics.consumer_lag_seconds.labels("db.t", "done")._value.get() == 0
    table.file_io.delete(table.paths.consumer_path("behind"))
    run_job(lambda: expire_consumers_job(table, options=opts, now_ms=now), table="db.t",
            task=Task.EXPIRE_CONSUMERS, metrics=metrics)  # fmt: skip
    for gauge in (metrics.consumer_lag, metrics.consumer_lag_seconds):
        assert ("db.t", "behind") not in gauge._metrics
        assert ("db.t", "done") in gauge._metrics
