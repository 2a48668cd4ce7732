"""The daemon's jobs as plain functions: thresholds, actions, results, the job boundary."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from tests.daemon.helpers import LOW_THRESHOLDS, append, memory_table
from tests.daemon.procs import wait_for

from snaplake.compaction.maintenance import (
    FileCounts,
    count_files,
    count_manifests,
    maintenance_committer,
)
from snaplake.daemon.config import Task, parse_config
from snaplake.daemon.jobs import (
    compact_job,
    expire_snapshots_job,
    merge_manifests_job,
    orphan_clean_job,
    run_job,
)
from snaplake.metrics import SnaplakeMetrics
from snaplake.options import CoreOptions
from snaplake.store.format.decoded_cache import metadata_cache
from snaplake.table import Table


def _opts(**overrides: str) -> CoreOptions:
    return CoreOptions({**LOW_THRESHOLDS, **overrides})


def test_merge_waits_for_the_threshold_then_merges():
    table = memory_table()
    append(table, 3)
    below = merge_manifests_job(table, options=_opts())
    assert not below.acted
    assert below.manifest_files == 3
    assert below.merge is None
    append(table, 2, start=100)
    due = merge_manifests_job(table, options=_opts())
    assert due.acted
    assert due.manifest_files == 5
    assert due.manifests_merged > 0
    assert count_manifests(table, table.latest_snapshot()) < 4
    assert table.to_arrow().num_rows == 25


def test_daemon_defaults_apply_but_table_options_win():
    cfg = parse_config({"warehouse": [{"uri": "/w"}],
                        "tasks": {"manifest_merge": {"manifest.merge-min-count": 2}}})  # fmt: skip
    table = memory_table({"manifest.merge-min-count": "50"})
    append(table, 3)
    result = merge_manifests_job(table, options=cfg.effective_options(table.options))
    assert result.merge_min_count == 50
    assert not result.acted
    other = memory_table()
    append(other, 3)
    assert merge_manifests_job(other, options=cfg.effective_options(other.options)).acted


def _count_files(table: Table) -> FileCounts:
    """The daemon's file counts of ``table``'s latest snapshot under ``_opts()``."""
    opts = _opts()
    target = table.file_store().target_file_size(opts)
    return count_files(table, table.latest_snapshot(), options=opts, target_file_size_bytes=target)


def test_compaction_only_when_a_bucket_crosses_the_threshold():
    table = memory_table()
    append(table, 2)
    counts = _count_files(table)
    assert (counts.data_files, counts.small_files, counts.buckets_due) == (2, 2, 0)
    assert not compact_job(table, options=_opts()).acted
    append(table, 2, start=100)
    result = compact_job(table, options=_opts())
    assert result.acted
    assert result.files_compacted == 4
    assert result.files.buckets_due == 1
    after = _count_files(table)
    assert after.data_files == 1
    assert sorted(table.to_arrow().column("id").to_pylist()) == list(range(10)) + list(
        range(100, 110)
    )


def test_compaction_rounds_are_capped_per_bucket():
    table = memory_table()
    append(table, 7, months=2)  # 7 small files in each of two partitions
    result = compact_job(table, options=_opts(), max_files_per_bucket=3)
    assert result.acted
    # rounds of at most 3 files per bucket: 3 -> 1, then that 1 + 2 -> 1, then 1 + 2 -> 1
    assert result.compaction is not None
    assert result.compaction.files_before == 2 * (3 + 3 + 3)
    assert [s.commit_kind.value for s in table.snapshots()][-3:] == ["COMPACT"] * 3
    after = _count_files(table)
    assert (after.data_files, after.buckets_due) == (2, 0)
    assert sorted(table.to_arrow().column("id").to_pylist()) == list(range(35))


def test_a_capped_plan_keeps_the_oldest_files_of_a_run_and_says_so():
    table = memory_table()
    append(table, 6)
    opts = CoreOptions({**table.options, "compaction.min.file-num": "3"})

    def plan(max_files: int | None) -> Any:
        return (
            table.file_store()
            .new_compaction(
                commit=maintenance_committer(table), options=opts, max_files_per_bucket=max_files
            )
            .plan_units()
        )

    capped = plan(4)
    ((task,),) = [u.tasks for u in capped.units]
    assert capped.capped
    full = plan(None)
    ((whole,),) = [u.tasks for u in full.units]
    assert not full.capped
    assert task.files == whole.files[:4]
    assert task.paths == whole.paths[:4]
    uncapped = plan(6)
    assert uncapped.units[0].tasks[0].files == whole.files
    assert not uncapped.capped
    with pytest.raises(ValueError, match="max_files"):
        plan(1)


def test_expiry_keeps_the_retention_limits():
    table = memory_table()
    append(table, 10)
    result = expire_snapshots_job(table, options=_opts(**{"snapshot.time-retained": "1 h"}))
    assert result.acted
    assert result.snapshots_retained == 10
    assert result.snapshots_expired == 4  # young snapshots, but at most 6 retained
    assert result.files_deleted["snapshot"] == 4
    assert len(table.snapshots()) == 6
    again = expire_snapshots_job(table, options=_opts())
    assert again.snapshots_expired == 3  # time-retained 1 ms: down to min 3
    assert not expire_snapshots_job(table, options=_opts()).acted  # at min: no planning
    assert table.to_arrow().num_rows == 50


def test_expiry_of_a_dynamic_bucket_table_counts_its_replaced_hash_files(tmp_path):
    """Each commit of new keys replaces the bucket's HASH file; expiry deletes the old ones."""
    from tests.helpers import create_table, write_and_commit
    from tests.pk_helpers import PK_KEYS, PK_SCHEMA, make_rows, to_table

    table = create_table(tmp_path, schema=PK_SCHEMA, partition_keys=["month"],
                         primary_keys=PK_KEYS)  # fmt: skip
    for i in range(8):
        write_and_commit(table, to_table([r | {"month": 1} for r in make_rows(10 * i, 10)]))
    index_dir = tmp_path / "db.db" / "t" / "index"
    assert len(list(index_dir.iterdir())) == 8
    result = expire_snapshots_job(table, options=_opts(**{"snapshot.time-retained": "1 ms"}))
    assert result.snapshots_expired == 5  # down to min 3
    assert result.expire is not None
    assert len(result.expire.index_files) == 5
    assert result.files_deleted["other"] == 5
    assert len(list(index_dir.iterdir())) == 3
    assert table.to_arrow().num_rows == 80


def test_orphan_clean_deletes_unreferenced_old_files():
    table = memory_table()
    append(table, 2)
    write = table.new_write(commit_user="crashed")
    from tests.helpers import rows

    write.write_arrow(rows(1000, 5))
    write.prepare_commit()  # files written, never committed
    newest = max(f.modification_time_ms for f in table.file_io.list_files(table.root))
    # older_than=0 still needs an mtime strictly before now
    wait_for(lambda: time.time_ns() // 1_000_000 > newest, timeout=5, step=0.001,
             what="the clock to pass the files' mtime")  # fmt: skip
    dry = orphan_clean_job(table, older_than=timedelta(0), dry_run=True)
    assert dry.dry_run
    assert not dry.acted
    assert dry.clean is not None
    assert dry.clean.orphan_files
    done = orphan_clean_job(table, older_than=timedelta(0))
    assert done.acted
    assert done.files_deleted.get("data", 0) >= 1
    assert table.to_arrow().num_rows == 10
    assert not orphan_clean_job(table, older_than=timedelta(0)).acted


def test_job_boundary_counts_failure_and_never_raises():
    metrics = SnaplakeMetrics(registry=CollectorRegistry())
    table = memory_table()
    append(table, 5)
    # Corrupt the manifests: every manifest file now holds garbage.
    for status in list(table.file_io.list_files(table.paths.manifest_dir)):
        if status.path.rsplit("/", 1)[-1].startswith("manifest-") and "-list-" not in status.path:
            table.file_io.write_bytes(status.path, b"garbage", overwrite=True)
    metadata_cache.clear()  # the process-wide cache still holds the good decodes
    result = run_job(lambda: compact_job(table, options=_opts()), table="db.t", task=Task.COMPACT,
                     metrics=metrics)  # fmt: skip
    assert result is None
    assert metrics.maintenance_runs.labels("db.t", "compact", "failure")._value.get() == 1
    assert (
        metrics.maintenance_failures.labels("db.t", "compact", "CorruptMetadataError")._value.get()
        == 1
    )

    good = memory_table(name="db.g")
    append(good, 5)
    ok = run_job(lambda: merge_manifests_job(good, options=_opts()), table="db.g",
                 task=Task.MANIFEST_MERGE, metrics=metrics)  # fmt: skip
    assert ok is not None
    assert ok.acted
    assert metrics.maintenance_runs.labels("db.g", "manifest_merge", "success")._value.get() == 1
    assert metrics.manifests_merged.labels("db.g")._value.get() > 0
    assert metrics.last_success.labels("db.g", "manifest_merge")._value.get() > 0
