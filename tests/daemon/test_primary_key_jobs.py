"""The daemon on primary-key tables: the compact task, sorted-run gauges, inline mode."""

from __future__ import annotations

import itertools
from datetime import timedelta
from typing import Any

from prometheus_client import CollectorRegistry
from tests.helpers import create_table, write_and_commit
from tests.pk_helpers import PK_KEYS, PK_SCHEMA, TableModel, engine_model, make_rows, sorted_rows
from tests.pk_helpers import to_table as pk_table

from snaplake.compaction.maintenance import count_files, count_sorted_runs
from snaplake.daemon.jobs import compact_job
from snaplake.daemon.watcher import TableWatcher
from snaplake.metrics import SnaplakeMetrics
from snaplake.options import CoreOptions

_names = itertools.count()


def _pk_table(**options: str) -> Any:
    return create_table(
        f"memory://pk{next(_names)}", schema=PK_SCHEMA, partition_keys=["month"],
        primary_keys=PK_KEYS,
        options={"bucket": "2", "num-sorted-run.compaction-trigger": "3", **options},
    )  # fmt: skip


def _upsert(table: Any, model: TableModel, i: int) -> None:
    rows = make_rows(i * 7, 40, seed=i)
    write_and_commit(table, pk_table(rows), commit_user="writer", commit_identifier=i + 1)
    model.apply(rows)


def test_compact_task_only_where_the_trigger_is_reached() -> None:
    table = _pk_table()
    model = TableModel(engine_model("deduplicate"))
    for i in range(2):
        _upsert(table, model, i)
    opts = CoreOptions(table.options)
    below = compact_job(table, options=opts)
    assert not below.acted
    assert below.sorted_runs is not None and below.sorted_runs.max_sorted_runs == 2
    _upsert(table, model, 2)
    due = compact_job(table, options=opts)
    assert due.acted and due.files_compacted > 0
    assert due.sorted_runs is not None and due.sorted_runs.max_sorted_runs == 3
    assert "sorted run" in due.summary()
    after = count_sorted_runs(table, table.latest_snapshot(), options=opts)
    assert after.buckets_over_trigger == 0 and after.max_sorted_runs <= 3
    assert sorted_rows(table.to_arrow()) == model.rows()


def test_watcher_exports_sorted_runs() -> None:
    table = _pk_table(**{"num-sorted-run.compaction-trigger": "2"})
    model = TableModel(engine_model("deduplicate"))
    for i in range(4):
        _upsert(table, model, i)
    metrics = SnaplakeMetrics(registry=CollectorRegistry())
    opts = CoreOptions(table.options)
    TableWatcher(table, metrics=metrics, options=lambda: opts,
                 files_interval=timedelta(0)).poll()  # fmt: skip
    assert metrics.sorted_runs_max.labels("db.t")._value.get() == 4
    assert metrics.buckets_over_trigger.labels("db.t")._value.get() > 0


def test_inline_mode_compacts_after_each_commit() -> None:
    table = _pk_table(**{"snaplake.maintenance.inline": "true"})
    model = TableModel(engine_model("deduplicate"))
    for i in range(7):
        _upsert(table, model, i)
        stats = count_sorted_runs(
            table, table.latest_snapshot(), options=CoreOptions(table.options)
        )
        assert stats.max_sorted_runs <= 3
    assert any(s.commit_kind.value == "COMPACT" for s in table.snapshots())
    assert sorted_rows(table.to_arrow()) == model.rows()
    write_only = _pk_table(**{"snaplake.maintenance.inline": "true", "write-only": "true"})
    for i in range(4):
        _upsert(write_only, model, i)
    assert all(s.commit_kind.value == "APPEND" for s in write_only.snapshots())


def _runs(metrics: SnaplakeMetrics) -> tuple[float, float]:
    return (
        metrics.sorted_runs_max.labels("db.t")._value.get(),
        metrics.buckets_over_trigger.labels("db.t")._value.get(),
    )


def test_compact_job_refreshes_the_sorted_run_gauges() -> None:
    """The gauges follow each compaction run, not only the watcher's files_interval count."""
    from snaplake.daemon.config import Task
    from snaplake.daemon.jobs import run_job

    table = _pk_table(**{"num-sorted-run.compaction-trigger": "10"})
    model = TableModel(engine_model("deduplicate"))
    _upsert(table, model, 0)
    metrics = SnaplakeMetrics(registry=CollectorRegistry())
    watcher = TableWatcher(table, metrics=metrics, options=lambda: CoreOptions(table.options),
                           files_interval=timedelta(hours=1))  # fmt: skip
    watcher.poll()
    assert _runs(metrics) == (1, 0)
    for i in range(1, 5):
        _upsert(table, model, i)
    watcher.poll()  # files_interval not due: the gauge is stale
    assert _runs(metrics) == (1, 0)

    def compact() -> Any:
        return compact_job(table, options=CoreOptions(table.options))

    below = run_job(compact, table="db.t", task=Task.COMPACT, metrics=metrics)
    assert below is not None and not below.acted  # 5 runs < trigger 10: nothing compacted
    assert _runs(metrics) == (5, 0)

    table = _pk_table(**{"num-sorted-run.compaction-trigger": "3"})
    for i in range(5):
        _upsert(table, model, i)
    watcher = TableWatcher(table, metrics=metrics, options=lambda: CoreOptions(table.options),
                           files_interval=timedelta(hours=1))  # fmt: skip
    watcher.poll()
    planned_max, planned_over = _runs(metrics)
    assert planned_max == 5
    assert planned_over > 0
    done = run_job(compact, table="db.t", task=Task.COMPACT, metrics=metrics)
    assert done is not None and done.acted
    after = count_sorted_runs(table, table.latest_snapshot(), options=CoreOptions(table.options))
    assert _runs(metrics) == (after.max_sorted_runs, after.buckets_over_trigger)
    assert after.max_sorted_runs < 5


def test_compact_summary_says_what_was_planned_and_what_was_compacted() -> None:
    """Universal compaction may compact buckets under the run trigger (size amplification):
    the log line must not read "0 bucket(s) over the trigger, 65 compacted"."""
    from snaplake.compaction.maintenance import FileCounts
    from snaplake.compaction.merge_tree_plan import SortedRunStats
    from snaplake.compaction.result import CompactResult
    from snaplake.daemon.job_results import CompactJobResult

    result = CompactJobResult(
        table="db.t",
        files=FileCounts(data_files=80, small_files=70, buckets_due=0, small_threshold_bytes=1),
        compaction=CompactResult(
            snapshot_id=9, buckets_compacted=2, files_before=65, files_after=2
        ),
        sorted_runs=SortedRunStats(buckets=2, max_sorted_runs=3, buckets_over_trigger=0),
        sorted_runs_after=SortedRunStats(buckets=2, max_sorted_runs=1, buckets_over_trigger=0),
    )
    line = result.summary()
    assert "0 bucket(s) over the trigger, 65 compacted" not in line
    assert line == (
        "80 data file(s); planned: at most 3 sorted run(s) per bucket, 0 bucket(s) over "
        "num-sorted-run.compaction-trigger; compacted 65 file(s) of 2 bucket(s) into 2; "
        "now: at most 1 sorted run(s) per bucket, 0 bucket(s) over the trigger"
    )
    idle = CompactJobResult(
        table="db.t",
        files=FileCounts(data_files=4, small_files=4, buckets_due=0, small_threshold_bytes=1),
        sorted_runs=SortedRunStats(buckets=2, max_sorted_runs=2, buckets_over_trigger=0),
        sorted_runs_after=SortedRunStats(buckets=2, max_sorted_runs=2, buckets_over_trigger=0),
    )
    assert idle.summary() == (
        "4 data file(s); planned: at most 2 sorted run(s) per bucket, 0 bucket(s) over "
        "num-sorted-run.compaction-trigger; nothing to compact"
    )


def test_small_files_are_counted_against_the_primary_key_target_size() -> None:
    """Without ``target-file-size`` a primary-key table's target is 128 MB, as in Paimon."""
    table = _pk_table()
    _upsert(table, TableModel(engine_model("deduplicate")), 0)
    opts = CoreOptions(table.options)
    ratio = opts.compaction_small_file_ratio
    store = table.file_store()
    target = store.target_file_size(opts)
    assert target == 128 << 20
    none = count_files(table, None, options=opts, target_file_size_bytes=target)
    assert none.small_threshold_bytes == int((128 << 20) * ratio)
    counts = count_files(
        table, table.latest_snapshot(), options=opts, target_file_size_bytes=target
    )
    assert counts.small_threshold_bytes == int((128 << 20) * ratio)
    sized = CoreOptions({**table.options, "target-file-size": "1 mb"})
    sized_target = store.target_file_size(sized)
    none = count_files(table, None, options=sized, target_file_size_bytes=sized_target)
    assert none.small_threshold_bytes == int((1 << 20) * ratio)
