"""Append compaction in one process: units planned, rewritten apart (pickled), committed once."""

from __future__ import annotations

import dataclasses
import itertools
import pickle
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.helpers import sorted_ids
from tests.unit.compaction.conftest import append, compaction_job, small_files

from snaplake.compaction.append_compact import AppendRewriteUnit, split_run
from snaplake.compaction.append_rewrite import CompactTask, output_groups
from snaplake.errors import CommitConflictError, UnsupportedTableError
from snaplake.store.format.data_file import EMPTY_BINARY_ROW, DataFileMeta, FileSource
from snaplake.store.format.stats import SimpleStatsParts
from snaplake.store.read.scan import Split
from snaplake.write.table_write import new_data_file_meta


def _run_units(table, units):
    messages = []
    for unit in pickle.loads(pickle.dumps(units)):  # what an executor receives
        messages += unit.rewrite(
            file_io=table.file_io, paths=table.paths, schema_manager=table.schema_manager
        )
    return messages


def _layout(table):
    return sorted(
        (s.partition_values, tuple(f.row_count for f in s.files)) for s in table.new_scan().plan()
    )


def test_units_rewritten_apart_give_the_in_process_result(make_table):
    a, b = make_table(), make_table()
    for t in (a, b):
        for i in range(6):
            append(t, i * 10, 10)
    a.compact()
    job = compaction_job(b)
    plan = job.plan_units(max_unit_bytes=1 << 30)
    units = plan.units
    assert len(units) == 3  # one per (partition, bucket)
    result = job.commit_rewritten(plan, _run_units(b, units))
    assert result.buckets_compacted == 3
    assert _layout(a) == _layout(b)
    assert sorted_ids(b.to_arrow()) == list(range(60))


def test_partition_specs_are_planned_once_per_bucket(make_table):
    table = make_table()
    for i in range(4):
        append(table, i * 10, 10)
    job = compaction_job(table, partitions=[{"month": 2}, {"month": 2}, {"month": 3}])
    plan = job.plan_units(max_unit_bytes=1 << 30)
    units = plan.units
    assert sorted(u.partition for u in units) == sorted(
        s.partition for s in table.new_scan().plan() if s.partition_values in ((2,), (3,))
    )
    job.commit_rewritten(plan, _run_units(table, units))
    files = {s.partition_values: len(s.files) for s in table.new_scan().plan()}
    assert files == {(1,): 4, (2,): 1, (3,): 1}


def test_large_buckets_are_sliced_and_keep_their_rows(make_table):
    a, b = make_table({"target-file-size": "16 kb", "compaction.small-file-ratio": "0.9"},
                      partitioned=False), make_table(
        {"target-file-size": "16 kb", "compaction.small-file-ratio": "0.9"}, partitioned=False
    )  # fmt: skip
    for t in (a, b):
        for i in range(12):
            append(t, i * 100, 100)
    a.compact()
    job = compaction_job(b)
    total = sum(f.file_size_bytes for s in b.new_scan().plan() for f in s.files)
    plan = job.plan_units(max_unit_bytes=total // 3)
    units = plan.units
    assert len(units) >= 2  # one bucket, several slices
    assert all(u.bucket == 0 for u in units)
    job.commit_rewritten(plan, _run_units(b, units))
    assert _layout(a) == _layout(b)  # slices end where outputs roll: the same files
    assert b.to_arrow().column("id").to_pylist() == list(range(1200))
    seqs = sorted((f.min_sequence_number, f.max_sequence_number)
                  for s in b.new_scan().plan() for f in s.files)  # fmt: skip
    assert all(x[1] < y[0] for x, y in itertools.pairwise(seqs))


def test_a_failing_unit_leaves_no_output(make_table):
    table = small_files(make_table, 3)
    append(table, 1000, 10)
    (unit,) = compaction_job(table).plan_units(max_unit_bytes=1 << 30).units
    assert isinstance(unit, AppendRewriteUnit)
    first, *_ = unit.tasks
    doomed = Path(first.paths[-1])
    # a unit of two runs whose second run lost an input: the first run's outputs go too
    broken = CompactTask(split=first.split, files=first.files[-2:], paths=first.paths[-2:])
    unit = AppendRewriteUnit(tasks=(first, broken), target_file_size_bytes=1 << 20)
    before = {p.name for p in Path(table.root).rglob("*.parquet")}
    doomed.unlink()
    with pytest.raises(FileNotFoundError):
        unit.rewrite(file_io=table.file_io, paths=table.paths, schema_manager=table.schema_manager)
    assert {p.name for p in Path(table.root).rglob("*.parquet")} == before - {doomed.name}


def test_conflict_on_commit_deletes_the_outputs(make_table):
    table = small_files(make_table, 4)
    job = compaction_job(table)
    plan = job.plan_units(max_unit_bytes=1 << 30)
    messages = _run_units(table, plan.units)
    table.compact()
    with pytest.raises(CommitConflictError):
        job.commit_rewritten(plan, messages)
    outs = {f.file_name for m in messages for f in m.compact_increment.compact_after}
    assert not outs & {p.name for p in Path(table.root).rglob("*.parquet")}
    assert sorted_ids(table.to_arrow()) == list(range(40))


def test_empty_specs_and_unsupported_primary_key_tables_are_refused(make_table):
    table = make_table()
    append(table, 0, 10)
    with pytest.raises(ValueError, match="partitions is empty"):
        compaction_job(table, partitions=[])
    schema = table.schema()
    pk = dataclasses.replace(
        schema, id=1, primary_keys=("id", "month"),
        options={**schema.options, "bucket": "2", "record-level.expire-time": "1 d"},
    )  # fmt: skip
    table.schema_manager.create(pk)  # record-level expiry: refused when planning
    job = compaction_job(table)
    with pytest.raises(UnsupportedTableError, match="record-level"):
        job.plan_units(max_unit_bytes=1 << 30)


# -- split_run: slices cut only where an output rolls ---------------------------------------
def _meta(i: int, size: int) -> DataFileMeta:
    return new_data_file_meta(
        file_name=f"data-{i}.parquet", size_bytes=size, row_count=1,
        stats=SimpleStatsParts(min_values=EMPTY_BINARY_ROW, max_values=EMPTY_BINARY_ROW,
                               null_counts=()),
        schema_id=0, min_sequence_number=i, max_sequence_number=i, file_source=FileSource.APPEND,
    )  # fmt: skip


@settings(max_examples=200, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 100), min_size=2, max_size=40),
    target=st.integers(1, 200),
    max_bytes=st.integers(1, 500),
)
def test_split_run_slices_are_unions_of_output_groups(sizes, target, max_bytes):
    files = tuple(_meta(i, s) for i, s in enumerate(sizes))
    split = Split(partition=b"", partition_values=(), bucket=0, total_buckets=1,
                  files=files, paths=tuple(f"/b/{f.file_name}" for f in files))  # fmt: skip
    task = CompactTask(split=split, files=files, paths=split.paths)
    slices = split_run(task, target_file_size_bytes=target, max_bytes=max_bytes)
    assert tuple(f for s in slices for f in s.files) == files  # order kept, nothing lost
    whole = [[files[i] for i in g] for g in output_groups(files, target)]
    apart = [[s.files[i] for i in g] for s in slices for g in output_groups(s.files, target)]
    assert apart == whole  # the same outputs
    if sum(sizes) > max_bytes:
        for s in slices:  # within budget unless one output group alone is larger
            groups = output_groups(s.files, target)
            assert sum(f.file_size_bytes for f in s.files) <= max_bytes or len(groups) == 1
    else:
        assert slices == [task]
