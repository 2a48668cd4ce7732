"""The daemon's delegation of compactions to a remote engine: the bar, fallback, metric.

The engine here is a stand-in object with the engine protocol (the real one needs a
Spark Connect server: tests/spark/test_daemon_spark.py). It compacts for real, in this
process, through the same committer, or fails like an unreachable cluster.
"""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from tests.daemon.helpers import LOW_THRESHOLDS, append, memory_table

from snaplake.compaction.append_compact import AppendCompactor
from snaplake.daemon.config import Task
from snaplake.daemon.jobs import compact_job, record_job_result
from snaplake.daemon.remote import RemoteCompaction, load_engine
from snaplake.errors import CommitConflictError, UnsupportedTableError
from snaplake.metrics import SnaplakeMetrics
from snaplake.options import CoreOptions


class _Engine:
    """Compacts in this process, or raises what it was told to."""

    def __init__(self, error: BaseException | None = None) -> None:
        self.error = error
        self.calls = 0
        self.closed = 0

    def compact(self, table: Any, *, commit: Any, target_file_size_bytes: int,
                min_file_num: int, small_file_ratio: float) -> Any:  # fmt: skip
        self.calls += 1
        if self.error is not None:
            raise self.error
        return AppendCompactor(commit=commit, target_file_size_bytes=target_file_size_bytes,
                               min_file_num=min_file_num,
                               small_file_ratio=small_file_ratio).execute()  # fmt: skip

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
    assert engine.calls == 1 and loads == ["spark@sc://127.0.0.1:1/;token=abc"]
    assert "on spark" in result.summary()
    assert table.latest_snapshot().commit_user == "snaplake-maintenance"
    assert table.to_arrow().num_rows == 30
    compact_job(_due_table(), options=OPTS, remote=remote)
    assert loads == ["spark@sc://127.0.0.1:1/;token=abc"]  # one engine, connected once


def test_small_compactions_stay_in_process():
    engine = _Engine()
    remote, loads = _remote(engine, min_input_bytes=10 << 20)
    result = compact_job(_due_table(), options=OPTS, remote=remote)
    assert result.acted and result.engine == "in-process"
    assert engine.calls == 0 and loads == []  # the engine was never even loaded


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
