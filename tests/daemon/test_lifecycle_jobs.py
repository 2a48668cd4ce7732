"""The daemon's tag and consumer tasks: jobs on a fixed clock, metrics, and a daemon process
creating hourly tags while a writer streams into the table."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pytest
from prometheus_client import CollectorRegistry
from tests.daemon.helpers import append, memory_table
from tests.daemon.procs import (
    REPO,
    daemon_config,
    free_port,
    sample_value,
    scrape,
    start_daemon,
    wait_for,
)
from tests.helpers import assert_same_rows, create_table
from tests.oracle import PaimonOracle, requires_paimon

from snaplake.daemon.config import Task, parse_config
from snaplake.daemon.jobs import run_job
from snaplake.daemon.lifecycle_jobs import (
    LIFECYCLE_JOBS,
    AutoTagJobResult,
    ExpireConsumersJobResult,
    ExpireTagsJobResult,
    auto_tag_job,
    expire_consumers_job,
    expire_tags_job,
)
from snaplake.metrics import SnaplakeMetrics
from snaplake.options import CoreOptions
from snaplake.options.tag_options import local_time
from snaplake.store.format.decoded_cache import metadata_cache
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


# --------------------------------------------------------------------- a daemon process
SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("month", pa.int32()),
                    pa.field("payload", pa.string())])  # fmt: skip
COMMITS = 60
STEP = timedelta(minutes=10)


@pytest.mark.integration
@pytest.mark.timeout(300)
@requires_paimon
def test_daemon_creates_hourly_tags_while_a_writer_streams(tmp_path):
    """Ten hours of simulated commits: the daemon's tags are the model's newest, readable
    by snaplake and pypaimon; the idle consumer goes, the writer never fails."""
    wh = tmp_path / "wh"
    options = {**HOURLY, "tag.num-retained-max": "4", "consumer.expiration-time": "1 h",
               "snapshot.num-retained.min": "1000", "snapshot.num-retained.max": "2000",
               # no compaction or manifest merge: their commits carry the real clock
               "compaction.min.file-num": "100000",
               "manifest.merge-min-count": "100000"}  # fmt: skip
    table = create_table(wh, "db.tags", schema=SCHEMA, partition_keys=["month"], options=options)
    table.set_consumer("idle", next_snapshot=1)
    os.utime(table.paths.consumer_path("idle"), (0, 0))
    port = free_port()
    intervals = "\n".join(f"[tasks.{t}]\ninterval = \"1 s\"" for t in
                          ("auto_tag", "expire_tags", "expire_consumers"))  # fmt: skip
    daemon = start_daemon(
        daemon_config(wh, daemon_id="tagger", port=port, extra=intervals), tmp_path, "d", port
    )
    try:
        writer = subprocess.Popen(
            [sys.executable, str(REPO / "tests/daemon/tag_writer_proc.py"), "--warehouse",
             str(wh), "--table", "db.tags", "--commits", str(COMMITS), "--clock-start-ms",
             str(_ms(T0)), "--clock-step-ms", str(int(STEP.total_seconds() * 1000)),
             "--summary", str(tmp_path / "writer.json")],
            cwd=REPO, stdout=(tmp_path / "writer.log").open("wb"), stderr=subprocess.STDOUT,
        )  # fmt: skip
        assert writer.wait(timeout=240) == 0, (tmp_path / "writer.log").read_text()
        summary = json.loads((tmp_path / "writer.json").read_text())
        assert summary["failures"] == []
        metadata_cache.clear()
        times = [s.time_millis for s in table.snapshots()]
        assert times == [_ms(T0 + i * STEP) for i in range(COMMITS)]  # only the writer committed
        expected = _model(times, timedelta(hours=1))
        newest = dict(sorted(expected.items(), key=lambda kv: kv[1])[-4:])

        def tags_done() -> bool:
            metadata_cache.clear()
            return {t.name: t.snapshot_id for t in table.list_tags()} == newest

        wait_for(tags_done, timeout=120, what=f"the daemon's tags {newest}")
        wait_for(lambda: table.consumers() == {}, timeout=60, what="the idle consumer to go")
        text = scrape(port)
        assert sample_value(text, "snaplake_tags", table="db.tags") == 4
        assert sample_value(text, "snaplake_consumers_expired_total", table="db.tags") == 1
        assert (sample_value(text, "snaplake_tags_created_total", table="db.tags") or 0) >= 4
    finally:
        code, _ = daemon.stop()
    assert code == 0, daemon.text()
    metadata_cache.clear()
    ids = sorted(table.to_arrow().column("id").to_pylist())
    assert ids == list(range(COMMITS * 10))
    oracle = PaimonOracle(wh)
    for name, sid in newest.items():
        ours = table.to_arrow(tag=name)
        assert sorted(ours.column("id").to_pylist()) == list(range(sid * 10))
        assert_same_rows(ours, oracle.read("db.tags", tag=name))
