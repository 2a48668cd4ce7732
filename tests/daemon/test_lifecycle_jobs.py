"""The daemon's tag and consumer tasks: jobs on a fixed clock and their metrics.

The daemon process running them beside a streaming writer: ``test_lifecycle_soak.py``."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest
from prometheus_client import CollectorRegistry
from tests.daemon.helpers import LOW_THRESHOLDS, append, memory_table

from snaplake.daemon.config import Task, parse_config
from snaplake.daemon.jobs import expire_snapshots_job, run_job
from snaplake.daemon.lifecycle_jobs import (
    LIFECYCLE_JOBS,
    AutoTagJobResult,
    ExpireConsumersJobResult,
    ExpireTagsJobResult,
    auto_tag_job,
    expire_consumers_job,
    expire_tags_job,
)
from snaplake.errors import UnsupportedTableError
from snaplake.metrics import SnaplakeMetrics
from snaplake.options import CoreOptions
from snaplake.options.tag_options import local_time
from snaplake.table import Table

T0 = datetime(2026, 11, 26, tzinfo=UTC)
HOURLY = {"tag.automatic-creation": "process-time", "tag.creation-period": "hourly"}


def _ms(when: datetime) -> int:
    return int(when.timestamp() * 1000)


def _retime(table: Table, step: timedelta) -> None:
    """Snapshot ``i`` was committed at ``T0 + (i - 1) * step``."""
    for snap in table.snapshots():
        new = dataclasses.replace(snap, time_millis=_ms(T0 + (snap.id - 1) * step))
        table.file_io.write_bytes(
            table.paths.snapshot_path(snap.id), new.to_bytes(), overwrite=True
        )


def _model(times_ms: list[int], period: timedelta) -> dict[str, int]:
    """Paimon's hourly rule from no tags, written independently: {tag: snapshot id}."""
    out: dict[str, int] = {}
    next_tag = None
    for sid, t in enumerate(times_ms, start=1):
        local = local_time(t)
        if next_tag is not None and local < next_tag + period:
            continue
        this = local.replace(minute=0, second=0, microsecond=0) - period
        out.setdefault(this.strftime("%Y-%m-%d %H"), sid)
        next_tag = this + period
    return out


def test_jobs_leave_a_table_without_options_alone():
    table = memory_table()
    append(table, 3)
    opts = CoreOptions(table.options)
    assert not auto_tag_job(table, options=opts).acted
    assert expire_tags_job(table, options=opts).tags == 0
    assert not expire_consumers_job(table, options=opts).acted
    assert table.list_tags() == []


def test_jobs_on_a_fixed_clock_and_their_metrics():
    table = memory_table({**HOURLY, "tag.num-retained-max": "3", "consumer.expiration-time": "1 h"})
    append(table, 6)
    _retime(table, timedelta(minutes=40))
    metrics = SnaplakeMetrics(registry=CollectorRegistry())
    opts = CoreOptions(table.options)
    now = lambda: _ms(T0 + timedelta(hours=5))  # noqa: E731
    result = run_job(lambda: auto_tag_job(table, options=opts, now_ms=now), table="db.t",
                     task=Task.AUTO_TAG, metrics=metrics)  # fmt: skip
    expected = _model([s.time_millis for s in table.snapshots()], timedelta(hours=1))
    kept = dict(sorted(expected.items(), key=lambda kv: kv[1])[-3:])
    assert {t.name: t.snapshot_id for t in table.list_tags()} == kept
    assert isinstance(result, AutoTagJobResult) and result.acted and result.tags == 3
    assert metrics.tags.labels("db.t")._value.get() == 3
    assert len(expected) == 4  # the oldest went at once (tag.num-retained-max): not reported
    assert metrics.tags_created.labels("db.t")._value.get() == 3
    table.set_consumer("idle", next_snapshot=1)
    first = run_job(lambda: expire_consumers_job(table, options=opts), table="db.t",
                    task=Task.EXPIRE_CONSUMERS, metrics=metrics)  # fmt: skip
    assert isinstance(first, ExpireConsumersJobResult) and first.lags == {"idle": 6}
    assert metrics.consumer_lag.labels("db.t", "idle")._value.get() == 6
    later = lambda: _ms(datetime.now(UTC) + timedelta(hours=2))  # noqa: E731
    gone = run_job(lambda: expire_consumers_job(table, options=opts, now_ms=later),
                   table="db.t", task=Task.EXPIRE_CONSUMERS, metrics=metrics)  # fmt: skip
    assert isinstance(gone, ExpireConsumersJobResult) and gone.expired == ("idle",)
    assert metrics.consumers_expired.labels("db.t")._value.get() == 1
    assert ("db.t", "idle") not in metrics.consumer_lag._metrics  # the series went with it


def test_expire_tags_job_honours_retention_written_by_another_engine():
    table = memory_table({"tag.default-time-retained": "1 h"})
    append(table, 2)
    table.create_tag("java-made", snapshot_id=1, time_retained=timedelta(minutes=30))
    opts = CoreOptions(table.options)
    later = lambda: _ms(datetime.now(UTC) + timedelta(hours=1))  # noqa: E731
    metrics = SnaplakeMetrics(registry=CollectorRegistry())
    result = run_job(lambda: expire_tags_job(table, options=opts, now_ms=later), table="db.t",
                     task=Task.EXPIRE_TAGS, metrics=metrics)  # fmt: skip
    assert isinstance(result, ExpireTagsJobResult) and result.expired == ("java-made",)
    assert metrics.tags_expired.labels("db.t")._value.get() == 1
    assert metrics.tags.labels("db.t")._value.get() == 0


def test_tasks_are_configured_like_the_others():
    cfg = parse_config({"warehouse": [{"uri": "/w"}],
                        "tasks": {"auto_tag": {"interval": "30 s"},
                                  "expire_consumers": {"enabled": False}}})  # fmt: skip
    assert cfg.tasks[Task.AUTO_TAG].interval == timedelta(seconds=30)
    assert cfg.tasks[Task.EXPIRE_TAGS].enabled
    assert Task.EXPIRE_CONSUMERS not in cfg.enabled_tasks()
    assert set(LIFECYCLE_JOBS) == {Task.AUTO_TAG, Task.EXPIRE_TAGS, Task.EXPIRE_CONSUMERS}


@pytest.mark.parametrize(
    ("key", "value"),
    [("changelog.num-retained.min", "5"), ("changelog.num-retained.max", "10"),
     ("changelog.time-retained", "1 h")],
)  # fmt: skip
def test_decoupled_changelog_retention_stays_refused_by_the_daemon(key, value):
    """Changelog kept longer than its snapshots (Paimon's ``changelog/``) is not done: the
    daemon's expiry refuses it with a typed error, counts the failure and deletes nothing."""
    table = memory_table({**LOW_THRESHOLDS, key: value})
    append(table, 8)
    before = sorted(s.path for s in table.file_io.list_files(table.root))
    assert len(before) > 8
    opts = CoreOptions(table.options)
    with pytest.raises(UnsupportedTableError) as err:
        expire_snapshots_job(table, options=opts)
    assert err.value.key == key
    metrics = SnaplakeMetrics(registry=CollectorRegistry())
    result = run_job(lambda: expire_snapshots_job(table, options=opts), table="db.t",
                     task=Task.EXPIRE_SNAPSHOTS, metrics=metrics)  # fmt: skip
    assert result is None
    failures = metrics.maintenance_failures.labels("db.t", "expire_snapshots",
                                                   "UnsupportedTableError")  # fmt: skip
    assert failures._value.get() == 1
    assert sorted(s.path for s in table.file_io.list_files(table.root)) == before
