"""MaintenanceDaemon without a running scheduler: discovery, leases, task runs, release."""

from __future__ import annotations

import itertools
import os
import threading
from concurrent.futures import ThreadPoolExecutor

from prometheus_client import CollectorRegistry
from tests.daemon.helpers import append
from tests.helpers import create_table

import snaplake
from snaplake.daemon.config import Task, parse_config
from snaplake.daemon.scheduler import MaintenanceDaemon
from snaplake.metrics import SnaplakeMetrics

_names = itertools.count()


def _warehouse(tables: list[str]) -> str:
    uri = f"memory://sched{next(_names)}"
    catalog = snaplake.FileSystemCatalog(uri)
    for name in tables:
        append(create_table(catalog, name, partition_keys=["month"]), 5)
    return uri


def _daemon(uri: str, daemon_id: str, tables: list[str] | None = None) -> MaintenanceDaemon:
    doc = {
        "daemon": {"id": daemon_id},
        "warehouse": [{"uri": uri, "tables": tables or ["*"], "exclude": ["db.skip*"]}],
        "tasks": {"manifest_merge": {"manifest.merge-min-count": 3}},
    }
    metrics = SnaplakeMetrics(registry=CollectorRegistry())
    return MaintenanceDaemon(parse_config(doc), metrics=metrics, serve_http=False)


def test_discovery_selects_tables_and_two_daemons_split_nothing_twice():
    uri = _warehouse(["db.a", "db.b", "other.c", "db.skip_me"])
    first, second = _daemon(uri, "d1"), _daemon(uri, "d2")
    first.discover()
    second.discover()
    assert first.held_tables() == ["db.a", "db.b", "other.c"]
    assert second.held_tables() == []
    only_db = _daemon(uri, "d3", tables=["db.*"])
    only_db.discover()
    assert {s.table.identifier for s in only_db._tables.values()} == {"db.a", "db.b"}
    assert first.health.readiness().ok
    # Every held table got its jobs, one per enabled task.
    jobs = {j.id.split(":")[0] for j in first.scheduler.get_jobs()}
    assert {t.value for t in first.config.enabled_tasks()} <= jobs
    assert Task.CHECK.value not in jobs  # off unless enabled
    first._release_all()
    second.lease_round()
    assert second.held_tables() == ["db.a", "db.b", "other.c"]


def test_run_task_maintains_and_records():
    uri = _warehouse(["db.a"])
    daemon = _daemon(uri, "d1")
    daemon.discover()
    key = next(iter(daemon._tables))
    daemon._run_task(key, Task.WATCH)
    daemon._run_task(key, Task.MANIFEST_MERGE)
    m = daemon.metrics
    assert m.maintenance_runs.labels("db.a", "manifest_merge", "success")._value.get() == 1
    assert m.manifests_merged.labels("db.a")._value.get() > 0
    assert m.lease_held.labels("db.a")._value.get() == 1
    daemon._stopping.set()
    daemon._run_task(key, Task.MANIFEST_MERGE)  # no new runs once stopping
    assert m.maintenance_runs.labels("db.a", "manifest_merge", "noop")._value.get() == 0


def test_job_threads_run_at_the_configured_niceness(monkeypatch):
    """Jobs yield the CPU to writers; the thread that scheduled them keeps its priority."""
    uri = _warehouse(["db.a"])
    daemon = _daemon(uri, "d1")
    daemon.discover()
    key = next(iter(daemon._tables))
    caller = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    seen: dict[str, int] = {}
    real_job = daemon._job

    def job(table, task):
        run = real_job(table, task)

        def wrapped():
            tid = threading.get_native_id()
            seen["job"] = os.getpriority(os.PRIO_PROCESS, tid)
            with ThreadPoolExecutor(1) as pool:  # helper threads of a job inherit it
                seen["helper"] = pool.submit(
                    lambda: os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
                ).result()
            return run()

        return wrapped

    monkeypatch.setattr(daemon, "_job", job)
    thread = threading.Thread(target=daemon._run_task, args=(key, Task.MANIFEST_MERGE))
    thread.start()
    thread.join()
    nice = max(caller, daemon.config.daemon.job_nice)
    assert seen == {"job": nice, "helper": nice}
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == caller


def test_dropped_table_is_forgotten():
    uri = _warehouse(["db.a", "db.b"])
    daemon = _daemon(uri, "d1")
    daemon.discover()
    snaplake.FileSystemCatalog(uri).drop_table("db.b")
    daemon.discover()
    assert daemon.held_tables() == ["db.a"]
    assert not [j for j in daemon.scheduler.get_jobs() if "db.b" in j.id]


def test_missing_configured_tables_are_logged_counted_and_not_ready(caplog):
    """A typo in ``tables`` (or a database or warehouse that does not exist) is never silent."""
    uri = _warehouse(["db.a", "cdc.status"])
    daemon = _daemon(uri, "d1", tables=["db.a", "cdc.statuz", "nodb.*", "db.skip_me"])
    empty = f"memory://empty{next(_names)}"
    doc = {
        "daemon": {"id": "d2"},
        "warehouse": [{"uri": empty, "tables": ["*"]}],
    }
    nothing = MaintenanceDaemon(
        parse_config(doc), metrics=SnaplakeMetrics(registry=CollectorRegistry()), serve_http=False
    )
    with caplog.at_level("WARNING", logger="snaplake.daemon.scheduler"):
        daemon.discover()
        nothing.discover()
    text = caplog.text
    assert "table cdc.statuz does not exist" in text
    assert "database nodb of pattern nodb.* does not exist" in text
    assert "the warehouse holds no database" in text
    assert "db.skip_me" not in text  # excluded: not missing
    missing = daemon.metrics.missing_tables
    assert missing.labels("0", "cdc.statuz")._value.get() == 1
    assert missing.labels("0", "nodb.*")._value.get() == 1
    assert missing.labels("0", "db.a")._value.get() == 0
    assert nothing.metrics.missing_tables.labels("0", "*")._value.get() == 1
    ready = daemon.health.readiness()
    assert not ready.ok
    assert "cdc.statuz (warehouse[0])" in ready.detail
    assert "nodb.* (warehouse[0])" in ready.detail
    assert "maintaining 1 of 1 table(s)" in ready.detail
    assert daemon.health.liveness().ok
    assert daemon.held_tables() == ["db.a"]  # the tables that exist are maintained

    caplog.clear()
    with caplog.at_level("WARNING", logger="snaplake.daemon.scheduler"):
        daemon.discover()
    assert "table cdc.statuz does not exist" in caplog.text  # at every discovery

    catalog = snaplake.FileSystemCatalog(uri)
    append(create_table(catalog, "cdc.statuz", partition_keys=["month"]), 1)
    catalog.create_database("nodb")
    daemon.discover()
    assert missing.labels("0", "cdc.statuz")._value.get() == 0
    assert missing.labels("0", "nodb.*")._value.get() == 0
    assert daemon.health.readiness().ok
    assert daemon.held_tables() == ["cdc.statuz", "db.a"]


def test_lifecycle_tasks_run_one_at_a_time_and_only_under_the_lease():
    """expire_partitions, auto_tag, expire_tags, expire_consumers: one job per held table,
    ``max_instances = 1`` and coalesced like every task; a daemon without the lease has none."""
    uri = _warehouse(["db.a"])
    first, second = _daemon(uri, "d1"), _daemon(uri, "d2")
    first.discover()
    second.discover()
    lifecycle = {Task.EXPIRE_PARTITIONS, Task.AUTO_TAG, Task.EXPIRE_TAGS, Task.EXPIRE_CONSUMERS}
    jobs = {j.id.split(":", 1)[0]: j for j in first.scheduler.get_jobs()}
    assert {t.value for t in lifecycle} <= set(jobs)
    defaults = first.scheduler._job_defaults  # what APScheduler gives each job it adds
    assert defaults["max_instances"] == 1 and defaults["coalesce"]
    for task in lifecycle:  # none overrides them (the defaults fill them in at start)
        assert not hasattr(jobs[task.value], "max_instances")
        assert not hasattr(jobs[task.value], "coalesce")
    assert not {j.id.split(":", 1)[0] for j in second.scheduler.get_jobs()} & set(jobs)
