"""The daemon's ``check`` task (issue 18 item 17): config, the job as a plain function, metrics."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

import pytest
from prometheus_client import CollectorRegistry
from tests.check_helpers import live_files, rewrite_entry
from tests.daemon.helpers import append, memory_table
from tests.helpers import SCHEMA

import snaplake
from snaplake.daemon.config import Task, parse_config
from snaplake.daemon.config_describe import describe_config
from snaplake.daemon.jobs import check_job, record_job_result
from snaplake.daemon.scheduler import MaintenanceDaemon
from snaplake.errors import InvalidOptionError
from snaplake.metrics import SnaplakeMetrics

MINIMAL = {"warehouse": [{"uri": "/tmp/wh"}]}


def test_check_is_off_by_default_and_slow_when_on() -> None:
    cfg = parse_config(MINIMAL)
    assert not cfg.tasks[Task.CHECK].enabled
    assert cfg.tasks[Task.CHECK].interval == timedelta(days=1)
    assert Task.CHECK not in cfg.enabled_tasks()
    on = parse_config({**MINIMAL, "tasks": {"check": {"enabled": True, "interval": "7 d"}}})
    assert on.tasks[Task.CHECK].enabled and on.tasks[Task.CHECK].interval == timedelta(days=7)
    assert Task.CHECK in on.enabled_tasks()
    assert '[tasks.check]\nenabled = true\ninterval = "7 d"' in describe_config(on)
    assert '[tasks.check]\nenabled = false\ninterval = "1 d"' in describe_config(cfg)


@pytest.mark.parametrize(
    ("section", "key"),
    [({"enabled": "yes"}, "tasks.check.enabled"), ({"interval": "0 s"}, "tasks.check.interval"),
     ({"dry_run": True}, "tasks.check.dry_run")],
)  # fmt: skip
def test_bad_check_settings_name_the_key(section: dict[str, object], key: str) -> None:
    with pytest.raises(InvalidOptionError, match=key.replace(".", r"\.")):
        parse_config({**MINIMAL, "tasks": {"check": section}})


def test_check_job_reports_bad_files_with_a_warning_each(caplog: pytest.LogCaptureFixture) -> None:
    table = memory_table()
    append(table, 3, months=2)
    metrics = SnaplakeMetrics(registry=CollectorRegistry())
    clean = check_job(table)
    assert clean.check.ok and not clean.acted and clean.task is Task.CHECK
    assert clean.check.files_checked == len(live_files(table)) == 6
    record_job_result(metrics, clean, duration_s=0.1, now_s=1.0)
    assert metrics.check_bad_files.labels("db.t")._value.get() == 0

    (a, pa_), (b, pb) = live_files(table)[:2]
    rewrite_entry(table, a.file_name, row_count=a.row_count + 1, file_size_bytes=1)
    rewrite_entry(table, b.file_name, max_sequence_number=b.max_sequence_number + 1, row_count=0)
    with caplog.at_level(logging.WARNING, logger="snaplake.daemon.jobs"):
        bad = check_job(table)
    assert bad.check.bad_files == (pa_, pb) and not bad.acted
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2
    assert pa_ in warnings[0] and "_FILE_SIZE" in warnings[0] and "_ROW_COUNT" in warnings[0]
    assert pb in warnings[1] and "_ROW_COUNT" in warnings[1]
    assert "2 contradict" in bad.summary()
    record_job_result(metrics, bad, duration_s=0.1, now_s=2.0)
    assert metrics.check_bad_files.labels("db.t")._value.get() == 2
    assert metrics.maintenance_runs.labels("db.t", "check", "noop")._value.get() == 2


def test_daemon_schedules_and_runs_the_check_when_enabled() -> None:
    uri = "memory://check-job-daemon"
    table = snaplake.FileSystemCatalog(uri).create_table(
        "db.t", schema=SCHEMA, partition_keys=["month"]
    )
    append(table, 2)
    meta, _ = live_files(table)[0]
    rewrite_entry(table, meta.file_name, row_count=meta.row_count + 3)
    doc = {
        "daemon": {"id": "d1"},
        "warehouse": [{"uri": uri, "tables": ["db.t"]}],
        "tasks": {"check": {"enabled": True, "interval": "2 d"}},
    }
    metrics = SnaplakeMetrics(registry=CollectorRegistry())
    daemon = MaintenanceDaemon(parse_config(doc), metrics=metrics, serve_http=False)
    before = datetime.now(UTC)
    daemon.discover()
    key = next(iter(daemon._tables))
    job = daemon.scheduler.get_job(f"check:{key}")
    assert job is not None
    assert job.next_run_time >= before + timedelta(days=2)  # a slow task: not at every start
    daemon._run_task(key, Task.CHECK)
    assert metrics.check_bad_files.labels("db.t")._value.get() == 1
    assert metrics.maintenance_runs.labels("db.t", "check", "failure")._value.get() == 0
