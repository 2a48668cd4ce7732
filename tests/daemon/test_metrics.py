"""snaplake.metrics: commit listener, table metrics, exposition, HTTP server."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families
from tests.daemon.helpers import append, memory_table
from tests.daemon.procs import (
    Proc,
    free_port,
    http_get,
    sample_value,
    scrape,
    start_pushgateway,
)

from snaplake.commit.result import (
    CommitEvent,
    CommitOutcome,
    CommitResult,
    add_commit_listener,
    remove_commit_listener,
)
from snaplake.metrics import (
    MAX_COMMIT_USERS,
    OTHER_COMMIT_USER,
    HealthStatus,
    SnaplakeMetrics,
    exposition,
    push_to_gateway,
    serve,
)
from snaplake.store.format.snapshot import CommitKind


def _samples(metrics: SnaplakeMetrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    body, _ = exposition(metrics.registry)
    out = {}
    for family in text_string_to_metric_families(body.decode()):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_every_commit_in_the_process_is_recorded():
    metrics = SnaplakeMetrics(registry=CollectorRegistry())
    add_commit_listener(metrics.record_commit)
    try:
        table = memory_table()
        append(table, 3)
        committer = table.new_commit(commit_user="writer")
        assert committer.commit([], commit_identifier=1).was_duplicate
    finally:
        remove_commit_listener(metrics.record_commit)
    s = _samples(metrics)
    ok = (("kind", "APPEND"), ("outcome", "success"), ("table", "db.t"))
    dup = (("kind", "APPEND"), ("outcome", "duplicate"), ("table", "db.t"))
    assert s[("snaplake_commits_total", ok)] == 3
    assert s[("snaplake_commits_total", dup)] == 1
    tk = (("kind", "APPEND"), ("table", "db.t"))
    assert s[("snaplake_commit_duration_seconds_count", tk)] == 4
    assert s[("snaplake_commit_files_added_total", tk)] == 3
    assert s[("snaplake_commit_records_added_total", tk)] == 15
    assert s[("snaplake_commit_attempts_count", tk)] == 3
    assert s[("snaplake_commit_retries_total", tk)] == 0


def test_failed_commit_outcomes():
    metrics = SnaplakeMetrics(registry=CollectorRegistry())
    for outcome in (CommitOutcome.CONFLICT, CommitOutcome.EXHAUSTED):
        metrics.record_commit(CommitEvent(table="db.t", kind=CommitKind.COMPACT, outcome=outcome,
                                          attempts=11, duration_s=2.0, result=None))  # fmt: skip
    s = _samples(metrics)
    tk = (("kind", "COMPACT"), ("table", "db.t"))
    assert s[("snaplake_commit_retries_total", tk)] == 20
    assert s[("snaplake_commits_total", (("kind", "COMPACT"), ("outcome", "exhausted"),
                                         ("table", "db.t")))] == 1  # fmt: skip
    result = CommitResult(snapshot_id=1, kind=CommitKind.APPEND, attempts=1, duration_s=0.01,
                          files_added=2, files_deleted=0, records_added=7)  # fmt: skip
    metrics.record_commit(CommitEvent(table="db.t", kind=CommitKind.APPEND,
                                      outcome=CommitOutcome.SUCCESS, attempts=1, duration_s=0.01,
                                      result=result))  # fmt: skip
    assert _samples(metrics)[("snaplake_commit_records_added_total",
                              (("kind", "APPEND"), ("table", "db.t")))] == 7  # fmt: skip


def test_freshness_is_computed_at_scrape_time():
    now = [1000.0]
    metrics = SnaplakeMetrics(registry=CollectorRegistry(), clock=lambda: now[0])
    metrics.set_last_commit_time(table="db.t", commit_time_s=990.0)
    key = ("snaplake_table_freshness_seconds", (("table", "db.t"),))
    assert _samples(metrics)[key] == 10.0
    now[0] = 1030.0
    assert _samples(metrics)[key] == 40.0


def test_forget_table_drops_only_that_tables_series():
    metrics = SnaplakeMetrics(registry=CollectorRegistry())
    for t in ("db.a", "db.b"):
        metrics.init_table(table=t, tasks=["compact"])
        metrics.snapshot_latest_id.labels(t).set(5)
        metrics.set_last_commit_time(table=t, commit_time_s=1.0)
        metrics.record_table_commit(table=t, kind="APPEND", files_added=1, files_deleted=0,
                                    records_added=3, duration_s=0.02, attempts=1)  # fmt: skip
    metrics.forget_table("db.a")
    tables = {dict(labels).get("table") for (_, labels) in _samples(metrics)}
    assert "db.a" not in tables
    assert "db.b" in tables


def _by_user(metrics: SnaplakeMetrics, table: str, user: str) -> float | None:
    key = (("commit_user", user), ("table", table))
    return _samples(metrics).get(("snaplake_table_commits_by_user_total", key))


def test_commit_users_beyond_the_bound_are_counted_as_other():
    metrics = SnaplakeMetrics(registry=CollectorRegistry())

    def commit(table: str, user: str) -> None:
        metrics.record_table_commit(table=table, kind="APPEND", files_added=1, files_deleted=0,
                                    records_added=1, duration_s=None, attempts=None,
                                    commit_user=user)  # fmt: skip

    users = [f"job-{i}" for i in range(MAX_COMMIT_USERS + 5)]
    for user in users:
        commit("db.a", user)
    commit("db.a", users[0])  # a known user keeps its series
    commit("db.b", users[-1])  # the bound is per table
    assert _by_user(metrics, "db.a", users[0]) == 2
    assert _by_user(metrics, "db.a", OTHER_COMMIT_USER) == 5
    assert _by_user(metrics, "db.b", users[-1]) == 1
    series = [dict(lb) for (name, lb) in _samples(metrics)
              if name == "snaplake_table_commits_by_user_total"]  # fmt: skip
    labels = {lb["commit_user"] for lb in series if lb["table"] == "db.a"}
    assert len(labels) == MAX_COMMIT_USERS + 1
    metrics.forget_table("db.a")  # a table maintained again starts a fresh bound
    commit("db.a", users[-1])
    assert _by_user(metrics, "db.a", users[-1]) == 1


def test_every_metric_has_help_and_init_creates_zero_series():
    metrics = SnaplakeMetrics(registry=CollectorRegistry())
    metrics.init_table(table="db.t", tasks=["compact", "watch"])
    body, content_type = exposition(metrics.registry)
    assert content_type.startswith("text/plain")
    text = body.decode()
    for family in text_string_to_metric_families(text):
        assert family.documentation, family.name
    assert (
        'snaplake_maintenance_runs_total{outcome="failure",table="db.t",task="compact"} 0.0' in text
    )
    assert 'snaplake_files_deleted_total{file_type="data",table="db.t"} 0.0' in text


def test_http_server_serves_metrics_and_probes():
    metrics = SnaplakeMetrics(registry=CollectorRegistry())
    ready = [False]
    server = serve(0, metrics=metrics,
                   readiness=lambda: HealthStatus(ok=ready[0], detail="warming up"))  # fmt: skip
    try:
        with urllib.request.urlopen(f"{server.url}/metrics", timeout=5) as r:
            assert b"# HELP snaplake_commits_total" in r.read()
        with urllib.request.urlopen(f"{server.url}/healthz", timeout=5) as r:
            assert r.status == 200
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(f"{server.url}/readyz", timeout=5)
        assert info.value.code == 503
        assert b"warming up" in info.value.read()
        ready[0] = True
        with urllib.request.urlopen(f"{server.url}/readyz", timeout=5) as r:
            assert r.status == 200
    finally:
        server.close()


@pytest.fixture
def pushgateway(tmp_path: Path) -> Iterator[Proc]:
    """A real Pushgateway on 127.0.0.1, stopped by its pid at teardown."""
    gateway = start_pushgateway(tmp_path)
    try:
        yield gateway
    finally:
        gateway.stop()


def _gateway_group(gateway: Proc, **labels: str) -> dict[str, Any]:
    """The group of ``/api/v1/metrics`` whose grouping labels are exactly ``labels``."""
    status, body = http_get(f"http://127.0.0.1:{gateway.port}/api/v1/metrics")
    assert status == 200, body
    doc = json.loads(body)
    assert doc["status"] == "success", doc
    groups = [g for g in doc["data"] if g["labels"] == labels]
    assert len(groups) == 1, doc["data"]
    group: dict[str, Any] = groups[0]
    return group


def test_push_to_gateway_against_a_real_pushgateway(pushgateway: Proc) -> None:
    address = f"127.0.0.1:{pushgateway.port}"
    series = {"job": "nightly", "stage": "load", "table": "db.t", "kind": "APPEND"}
    metrics = SnaplakeMetrics(registry=CollectorRegistry())
    table = memory_table()
    add_commit_listener(metrics.record_commit)
    try:
        next_id = append(table, 1)
        push_to_gateway(address, job="nightly", grouping_key={"stage": "load"}, metrics=metrics)
        text = scrape(pushgateway.port)
        assert sample_value(text, "snaplake_commits_total", outcome="success", **series) == 1
        assert sample_value(text, "snaplake_commit_records_added_total", **series) == 5
        group = _gateway_group(pushgateway, job="nightly", stage="load")
        assert group["last_push_successful"] is True
        [commits] = [
            m
            for m in group["snaplake_commits_total"]["metrics"]
            if m["labels"]["outcome"] == "success"
        ]
        assert {k: commits["labels"][k] for k in series} == series
        assert float(commits["value"]) == 1

        append(table, 1, start=next_id)
        push_to_gateway(address, job="nightly", grouping_key={"stage": "load"}, metrics=metrics)
    finally:
        remove_commit_listener(metrics.record_commit)
    # The second push replaced the first: the registry's current totals, not their sum.
    text = scrape(pushgateway.port)
    assert sample_value(text, "snaplake_commits_total", outcome="success", **series) == 2
    assert sample_value(text, "snaplake_commit_records_added_total", **series) == 10

    # PUT replaces the whole group: series the new push lacks are gone.
    other = SnaplakeMetrics(registry=CollectorRegistry())
    add_commit_listener(other.record_commit)
    try:
        append(memory_table(name="db.u"), 1)
    finally:
        remove_commit_listener(other.record_commit)
    push_to_gateway(address, job="nightly", grouping_key={"stage": "load"}, metrics=other)
    text = scrape(pushgateway.port)
    assert sample_value(text, "snaplake_commits_total", table="db.t") is None
    assert sample_value(text, "snaplake_commits_total", outcome="success",
                        **{**series, "table": "db.u"}) == 1  # fmt: skip


def test_push_to_gateway_raises_oserror_when_nothing_listens() -> None:
    metrics = SnaplakeMetrics(registry=CollectorRegistry())
    with pytest.raises(OSError, match="Connection refused"):
        push_to_gateway(f"127.0.0.1:{free_port()}", job="nightly", metrics=metrics, timeout_s=5)
