"""The daemon's delegation of compactions to a remote engine: the bar, fallback, metric.

The engine here is a stand-in object with the engine protocol (the real one needs a
Spark Connect server: tests/spark/test_daemon_spark.py). It compacts for real, in this
process, through the same committer, or fails like an unreachable cluster.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from tests.daemon.helpers import LOW_THRESHOLDS, append, memory_table
from tests.helpers import create_table, write_and_commit

from snaplake.daemon.config import Task
from snaplake.daemon.jobs import compact_job, record_job_result
from snaplake.daemon.remote import RemoteCompaction, load_engine
from snaplake.errors import CommitConflictError, UnsupportedTableError
from snaplake.metrics import SnaplakeMetrics
from snaplake.options import CoreOptions


class _Engine:
    """Compacts in this process (the distributed path, units rewritten here), or raises."""

    def __init__(self, error: BaseException | None = None) -> None:
        self.error = error
        self.calls: list[int | None] = []  # local_below_bytes of each call
        self.plans: list[Any] = []  # the plan handed over in each call
        self.closed = 0

    def compact(self, table: Any, job: Any, plan: Any, *,
                local_below_bytes: int | None = None) -> Any:  # fmt: skip
        self.calls.append(local_below_bytes)
        self.plans.append(plan)
        if self.error is not None:
            raise self.error
        messages = []
        for unit in plan.units:  # the daemon's plan: nothing is planned again
            messages += unit.rewrite(file_io=table.file_io, paths=table.paths,
                                     schema_manager=table.schema_manager)  # fmt: skip
        return job.commit_rewritten(plan, messages)

    def close(self) -> None:
        self.closed += 1


def _remote(engine: _Engine, min_input_bytes: int = 0) -> tuple[RemoteCompaction, list[str]]:
    loads: list[str] = []

    def loader(name: str, *, remote: str) -> _Engine:
        loads.append(f"{name}@{remote}")
        return engine

    remote = RemoteCompaction(engine="spark", remote="sc://127.0.0.1:1/;token=abc",
                              min_input_bytes=min_input_bytes, loader=loader)  # fmt: skip
    return remote, loads


def _due_table() -> Any:
    table = memory_table()
    append(table, 6)
    return table


OPTS = CoreOptions(LOW_THRESHOLDS)


def test_large_compactions_are_delegated():
    engine = _Engine()
    remote, loads = _remote(engine)
    table = _due_table()
    result = compact_job(table, options=OPTS, remote=remote)
    assert result.acted and result.engine == "spark" and result.remote_failure is None
    assert engine.calls == [None] and loads == ["spark@sc://127.0.0.1:1/;token=abc"]
    assert "on spark" in result.summary()
    assert table.latest_snapshot().commit_user == "snaplake-maintenance"
    assert table.to_arrow().num_rows == 30
    compact_job(_due_table(), options=OPTS, remote=remote)
    assert loads == ["spark@sc://127.0.0.1:1/;token=abc"]  # one engine, connected once


def test_the_engine_gets_the_plan_the_daemon_decided_on(monkeypatch):
    from snaplake.compaction.job import CompactionJob

    planned: list[Any] = []
    plan_units = CompactionJob.plan_units

    def counted(self: CompactionJob, **kwargs: Any) -> Any:
        planned.append(plan_units(self, **kwargs))
        return planned[-1]

    monkeypatch.setattr(CompactionJob, "plan_units", counted)
    engine = _Engine()
    remote, _ = _remote(engine)
    assert compact_job(_due_table(), options=OPTS, remote=remote).engine == "spark"
    assert len(planned) == 1 and engine.plans == planned  # planned once, handed over


def test_small_compactions_stay_in_process():
    engine = _Engine()
    remote, loads = _remote(engine, min_input_bytes=10 << 20)
    result = compact_job(_due_table(), options=OPTS, remote=remote)
    assert result.acted and result.engine == "in-process"
    assert engine.calls == [] and loads == []  # the engine was never even loaded


def test_a_failed_engine_falls_back_with_a_logged_reason_and_a_metric(caplog):
    engine = _Engine(ConnectionError(  # what grpc's errors look like: the reason is a detail
        '<_InactiveRpcError of RPC that terminated with:\n\tstatus = StatusCode.UNAVAILABLE\n'
        '\tdetails = "failed to connect to all addresses"\n'))  # fmt: skip
    remote, _ = _remote(engine)
    table = _due_table()
    with caplog.at_level("WARNING", logger="snaplake.daemon.remote"):
        result = compact_job(table, options=OPTS, remote=remote)
    assert result.acted and result.engine == "in-process"
    assert result.remote_failure == "ConnectionError"
    assert engine.closed == 1  # the broken connection is dropped; the next run reconnects
    (record,) = caplog.records
    assert "(ConnectionError: failed to connect to all addresses)" in record.getMessage()
    assert "compacting in process instead" in record.getMessage()
    assert "token" not in record.getMessage()
    metrics = SnaplakeMetrics(registry=CollectorRegistry())
    record_job_result(metrics, result, duration_s=0.1, now_s=0.0)
    value = metrics.registry.get_sample_value(
        "snaplake_daemon_remote_failures_total",
        {"table": "db.t", "task": "compact", "error": "ConnectionError"},
    )
    assert value == 1.0
    assert table.to_arrow().num_rows == 30


def test_an_engine_that_cannot_load_falls_back():
    remote = RemoteCompaction(engine="nope", remote="sc://x:1", min_input_bytes=0)
    result = compact_job(_due_table(), options=OPTS, remote=remote)
    assert result.acted and result.remote_failure == "ValueError"
    with pytest.raises(ValueError, match="unknown compaction engine"):
        load_engine("nope", remote="sc://x:1")


def test_table_errors_are_not_cluster_failures():
    remote, _ = _remote(_Engine(CommitConflictError("inputs gone")))
    with pytest.raises(CommitConflictError):
        compact_job(_due_table(), options=OPTS, remote=remote)
    remote, _ = _remote(
        _Engine(
            UnsupportedTableError(
                "primary key", feature="primary-key table", operation="distributed compaction"
            )
        )
    )
    result = compact_job(_due_table(), options=OPTS, remote=remote)
    assert result.acted and result.engine == "in-process" and result.remote_failure is None


def test_close_closes_the_engine():
    engine = _Engine()
    remote, _ = _remote(engine)
    compact_job(_due_table(), options=OPTS, remote=remote)
    remote.close()
    assert engine.closed == 1
    assert remote.where == "sc://127.0.0.1:1"
    assert Task.COMPACT.value == "compact"


# -- primary-key tables: buckets at the bar go to the engine, the others stay here -------------
_PK_NAMES = itertools.count()


def _pk_due_table(**options: str) -> tuple[Any, Any]:
    """A primary-key table whose 6 buckets are all due for LSM compaction, and its model."""
    from tests.pk_helpers import PK_KEYS, PK_SCHEMA, TableModel, engine_model, make_rows
    from tests.pk_helpers import to_table as pk_rows

    table = create_table(
        f"memory://remote-pk{next(_PK_NAMES)}", schema=PK_SCHEMA, partition_keys=["month"],
        primary_keys=PK_KEYS,
        options={"bucket": "2", "num-sorted-run.compaction-trigger": "3", **options},
    )  # fmt: skip
    model = TableModel(engine_model("deduplicate"))
    for i in range(4):  # 4 sorted runs per bucket, over the trigger
        rows = make_rows(i * 20, 60 if i else 600, seed=i)  # month 1..3, the first write larger
        write_and_commit(table, pk_rows(rows), commit_identifier=i + 1)
        model.apply(rows)
    return table, model


def _bucket_inputs(table: Any) -> list[int]:
    from snaplake.compaction.merge_tree_plan import MergeTreeCompactPlanner

    plan = MergeTreeCompactPlanner(table).plan()
    return sorted(sum(f.file_size_bytes for f in t.files) for t in plan.tasks)


def test_primary_key_buckets_at_the_bar_are_delegated_with_the_rest_local() -> None:
    from tests.pk_helpers import sorted_rows

    table, model = _pk_due_table()
    sizes = _bucket_inputs(table)
    assert len(sizes) == 6 and sizes[0] < sizes[-1]
    engine = _Engine()
    remote, _ = _remote(engine, min_input_bytes=sizes[-1])
    result = compact_job(table, options=CoreOptions(table.options), remote=remote)
    assert engine.calls == [sizes[-1]]  # the engine rewrites buckets below the bar locally
    assert result.acted and result.engine == "spark" and result.remote_failure is None
    assert result.sorted_runs is not None and result.sorted_runs.max_sorted_runs == 4
    assert "sorted run" in result.summary() and "on spark" in result.summary()
    assert result.compaction is not None and result.compaction.buckets_compacted == 6
    assert sorted_rows(table.to_arrow()) == model.rows()


def test_primary_key_buckets_below_the_bar_stay_in_process() -> None:
    table, _ = _pk_due_table()
    engine = _Engine()
    remote, loads = _remote(engine, min_input_bytes=_bucket_inputs(table)[-1] + 1)
    result = compact_job(table, options=CoreOptions(table.options), remote=remote)
    assert result.acted and result.engine == "in-process"
    assert engine.calls == [] and loads == []
    assert result.compaction is not None and result.compaction.buckets_compacted == 6


def test_primary_key_fallback_when_the_engine_fails() -> None:
    from tests.pk_helpers import sorted_rows

    table, model = _pk_due_table()
    engine = _Engine(ConnectionError("failed to connect to all addresses"))
    remote, _ = _remote(engine)
    result = compact_job(table, options=CoreOptions(table.options), remote=remote)
    assert result.acted and result.engine == "in-process"
    assert result.remote_failure == "ConnectionError" and "ConnectionError remotely" in (
        result.summary()
    )
    metrics = SnaplakeMetrics(registry=CollectorRegistry())
    record_job_result(metrics, result, duration_s=0.1, now_s=0.0)
    assert (
        metrics.registry.get_sample_value(
            "snaplake_daemon_remote_failures_total",
            {"table": "db.t", "task": "compact", "error": "ConnectionError"},
        )
        == 1.0
    )
    assert sorted_rows(table.to_arrow()) == model.rows()
