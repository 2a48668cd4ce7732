from __future__ import annotations

import itertools
import os
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from tests.helpers import rows, sorted_ids
from tests.unit.compaction.conftest import append, compaction_job, runs, small_files

from snaplake.errors import CommitConflictError
from snaplake.store.format.data_file import FileSource
from snaplake.store.format.snapshot import CommitKind


def _live_files(table):
    return [f for s in table.new_scan().plan() for f in s.files]


def test_compacts_small_files_per_bucket_and_keeps_order(make_table):
    table = small_files(make_table, 6)
    before = table.to_arrow().column("id").to_pylist()
    result = table.compact()
    assert result.snapshot_id == 7
    assert result.files_before == 6
    assert result.files_after == 1
    assert result.rows_rewritten == 60
    assert result.buckets_compacted == 1
    snap = table.latest_snapshot()
    assert snap is not None and snap.commit_kind == CommitKind.COMPACT
    assert snap.delta_record_count == 0
    (out,) = _live_files(table)
    assert out.file_source == FileSource.COMPACT
    assert out.row_count == 60
    assert table.to_arrow().column("id").to_pylist() == before == list(range(60))
    # the output keeps the inputs' sequence range
    assert out.min_sequence_number <= out.max_sequence_number
    # inputs are still on disk (expiry removes them), outputs exist
    assert all(os.path.exists(p) for p in result.input_files + result.output_files)


def test_below_min_file_num_does_nothing(make_table):
    table = make_table({"compaction.min.file-num": "5"})
    for i in range(4):
        append(table, i * 10, 10)  # 4 files per month
    result = table.compact()
    assert result.snapshot_id is None
    assert table.latest_snapshot().id == 4


def test_partition_filter_and_stats(make_table):
    table = make_table()
    for i in range(4):
        append(table, i * 10, 10)
    result = table.compact(partition_filter={"month": 2})
    assert result.buckets_compacted == 1
    files = {s.partition_values: len(s.files) for s in table.new_scan().plan()}
    assert files == {(1,): 4, (2,): 1, (3,): 4}
    # value stats of the rewritten file still prune
    got = table.to_arrow(filter=[("month", "=", 2), ("id", ">=", 35)])
    assert sorted_ids(got) == [i for i in range(35, 40) if 1 + i % 3 == 2]
    assert sorted_ids(table.to_arrow()) == list(range(40))


def test_large_files_split_runs(make_table):
    table = make_table({"target-file-size": "64 kb", "compaction.small-file-ratio": "0.0625"},
                       partitioned=False)  # fmt: skip
    append(table, 0, 3)
    append(table, 3, 3)
    append(table, 6, 3)
    append(table, 1000, 2000)  # large: one file of ~30 KB, above the 4 KB threshold
    append(table, 9, 3)
    append(table, 12, 3)
    job = compaction_job(table)
    tasks = runs(job.plan_units())
    assert [f.row_count for f in tasks[0].files] == [3, 3, 3]
    assert all(f.file_size_bytes < 4096 for t in tasks for f in t.files)
    job.execute()
    order = table.to_arrow().column("id").to_pylist()
    assert order == [*range(9), *range(1000, 3000), *range(9, 15)]


def test_outputs_roll_at_target_size(make_table):
    table = make_table({"target-file-size": "16 kb", "compaction.small-file-ratio": "0.9"},
                       partitioned=False)  # fmt: skip
    for i in range(12):
        append(table, i * 100, 100)
    sizes = [f.file_size_bytes for f in _live_files(table)]
    result = table.compact()
    assert 1 < result.files_after < len(sizes)
    assert table.to_arrow().column("id").to_pylist() == list(range(1200))
    outs = sorted(_live_files(table), key=lambda f: f.min_sequence_number)
    for a, b in itertools.pairwise(outs):
        assert a.max_sequence_number < b.min_sequence_number
    for p in result.output_files:
        assert pq.read_metadata(p).num_rows > 0


def test_fixed_buckets(make_table):
    table = make_table({"bucket": "2", "bucket-key": "id"}, partitioned=False)
    for i in range(5):
        append(table, i * 10, 10)
    result = table.compact()
    assert result.buckets_compacted == 2
    assert sorted_ids(table.to_arrow()) == list(range(50))
    assert {s.bucket for s in table.new_scan().plan()} == {0, 1}


def test_racing_compactions_one_conflicts_and_cleans_up(make_table):
    table = small_files(make_table, 5)
    loser = compaction_job(table)
    plan = loser.plan_units()
    assert plan.units
    winner = table.compact()
    assert winner.snapshot_id is not None
    # the loser planned on the old snapshot: force that plan (every re-plan too)
    loser.plan_units = lambda **_: plan  # type: ignore[method-assign]
    before = {s.path for s in table.file_io.list_files(table.root)}
    with pytest.raises(CommitConflictError) as info:
        loser.execute()
    assert info.value.conflicting_snapshot_ids == (winner.snapshot_id,)
    after = {s.path for s in table.file_io.list_files(table.root)}
    assert after == before  # its outputs were deleted, nothing else touched
    assert sorted_ids(table.to_arrow()) == list(range(50))


def test_compaction_and_append_both_land(make_table, monkeypatch):
    table = small_files(make_table, 5)
    job = compaction_job(table)
    original = job.commit.commit

    def commit_after_append(messages, **kw):
        append(table, 100, 5, user="other")
        return original(messages, **kw)

    monkeypatch.setattr(job.commit, "commit", commit_after_append)
    result = job.execute()
    assert result.snapshot_id == 7
    assert sorted_ids(table.to_arrow()) == [*range(50), *range(100, 105)]


def test_rows_are_not_lost_with_schema_columns(make_table):
    table = make_table()
    for i in range(3):
        append(table, i * 7, 7)
    expected = table.to_arrow().sort_by("id")
    table.compact()
    assert table.to_arrow().sort_by("id").equals(expected)
    w = table.new_write(commit_user="w")
    w.write_arrow(rows(500, 1))
    table.new_commit(commit_user="w").commit(w.prepare_commit())
    assert len(table.to_arrow()) == 22


# -- full compaction and the plan / rewrite / commit split ----------------------------------
def test_full_compaction_rewrites_large_files_after_the_head(make_table):
    """Paimon's FullCompactTask: leading large files stay, the rest (large too) is rewritten."""
    table = make_table({"target-file-size": "64 kb", "compaction.small-file-ratio": "0.125"},
                       partitioned=False)  # fmt: skip
    append(table, 1000, 1000)  # large, at the head: kept
    append(table, 0, 3)
    append(table, 3000, 1000)  # large, between small ones: rewritten by a full compaction
    append(table, 6, 3)
    append(table, 9, 3)
    head = _live_files(table)[0]
    assert compaction_job(table).plan_units().units == ()  # runs are too short
    full = compaction_job(table, full=True)
    (task,) = runs(full.plan_units())
    assert [f.row_count for f in task.files] == [3, 1000, 3, 3]
    before = table.to_arrow().column("id").to_pylist()
    result = full.execute()
    assert result.files_before == 4
    live = _live_files(table)
    assert live[0] == head
    assert table.to_arrow().column("id").to_pylist() == before


def test_full_compaction_needs_three_files_and_more_small_than_large(make_table):
    table = make_table({"target-file-size": "64 kb", "compaction.small-file-ratio": "0.125"},
                       partitioned=False)  # fmt: skip
    append(table, 0, 3)
    append(table, 3, 3)
    assert compaction_job(table, full=True).plan_units().units == ()  # 2 files
    append(table, 1000, 1000)
    append(table, 3000, 1000)
    # 2 small, 2 large: small ones do not outnumber large ones
    assert compaction_job(table, full=True).plan_units().units == ()
    append(table, 6, 3)
    (task,) = runs(compaction_job(table, full=True).plan_units())
    assert len(task.files) == 5


def test_rewrite_and_commit_apart_equal_execute(make_table):
    """plan_units() + a rewrite per unit + commit_rewritten() is what execute() does."""
    a, b = make_table(), make_table()
    for t in (a, b):
        for i in range(5):
            append(t, i * 10, 10)
    res_a = a.compact()
    job = compaction_job(b)
    plan = job.plan_units()
    messages = [m for u in plan.units for m in job.rewrite(u)]
    res_b = job.commit_rewritten(plan, list(reversed(messages)))
    assert (res_b.files_before, res_b.files_after, res_b.buckets_compacted) == (
        res_a.files_before, res_a.files_after, res_a.buckets_compacted,
    )  # fmt: skip
    assert all(os.path.exists(p) for p in res_b.input_files + res_b.output_files)
    assert sorted_ids(b.to_arrow()) == sorted_ids(a.to_arrow()) == list(range(50))
    assert [len(s.files) for s in a.new_scan().plan()] == [
        len(s.files) for s in b.new_scan().plan()
    ]


def test_commit_rewritten_conflict_deletes_outputs(make_table):
    table = small_files(make_table, 4)
    job = compaction_job(table)
    plan = job.plan_units()
    (unit,) = plan.units
    (message,) = job.rewrite(unit)
    table.compact()  # someone else compacts the same inputs first
    outputs = [f.file_name for f in message.compact_increment.compact_after]
    with pytest.raises(CommitConflictError):
        job.commit_rewritten(plan, [message])
    on_disk = {p.name for p in Path(table.root).rglob("*.parquet")}
    assert not set(outputs) & on_disk
    assert sorted_ids(table.to_arrow()) == list(range(40))
