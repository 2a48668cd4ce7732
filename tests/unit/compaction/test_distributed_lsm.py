"""Distributed LSM compaction in one process: units per bucket, rewritten apart, one commit.

What ``snaplake.spark.compact`` does on a primary-key table, without Spark: the units
are pickled (as they travel to executors), rewritten, and committed once; the result
equals ``Table.compact()``'s on a twin table.
"""

from __future__ import annotations

import dataclasses
import pickle
from pathlib import Path
from typing import Any

import pytest
from tests.helpers import create_table, write_and_commit
from tests.pk_helpers import (
    PK_KEYS,
    PK_SCHEMA,
    TableModel,
    assert_compacted_like_twin,
    engine_model,
    make_rows,
    sorted_rows,
)
from tests.pk_helpers import to_table as pk_table

import snaplake
from snaplake.commit.message import CommitMessage
from snaplake.compaction.maintenance import maintenance_committer
from snaplake.compaction.merge_tree_compact import MergeTreeCompactionPlanner, MergeTreeRewriteUnit
from snaplake.compaction.merge_tree_plan import FULL_COMPACTION_PROPERTY
from snaplake.errors import CommitConflictError
from snaplake.options import CoreOptions


def _twins(tmp_path: Path, **options: str) -> tuple[Any, Any, TableModel]:
    """Two primary-key tables with the same history of upserts and deletes."""
    catalog = snaplake.FileSystemCatalog(str(tmp_path / "wh"))
    opts = {"bucket": "2", "num-sorted-run.compaction-trigger": "3", **options}
    tables = [
        create_table(
            catalog,
            f"db.{name}",
            schema=PK_SCHEMA,
            partition_keys=["month"],
            primary_keys=PK_KEYS,
            options=opts,
        )
        for name in ("local", "remote")
    ]
    model = TableModel(engine_model("deduplicate"))
    for i in range(4):
        rows = make_rows(i * 25, 60, seed=i)
        kinds = ["-D" if r["id"] % 7 == i else "+U" for r in rows]
        for table in tables:
            write_and_commit(table, pk_table(rows), row_kinds=kinds, commit_identifier=i + 1)
        model.apply(rows, kinds)
    return tables[0], tables[1], model


def _job(table: Any, **kwargs: Any) -> Any:
    return table.file_store().new_compaction(commit=maintenance_committer(table), **kwargs)


def _run(job: Any, units: Any, table: Any) -> list[CommitMessage]:
    messages: list[CommitMessage] = []
    for unit in pickle.loads(pickle.dumps(units)):  # what an executor receives
        messages += unit.rewrite(
            file_io=table.file_io, paths=table.paths, schema_manager=table.schema_manager
        )
    return [CommitMessage.from_bytes(m.to_bytes()) for m in messages]  # and sends back


@pytest.mark.parametrize("full", [False, True])
def test_units_rewritten_apart_give_the_in_process_result(tmp_path: Path, full: bool) -> None:
    local, remote, model = _twins(tmp_path)
    expected = local.compact(full=full)
    job = _job(remote, full=full)
    assert isinstance(job.planner, MergeTreeCompactionPlanner)
    plan = job.plan_units(max_unit_bytes=1)  # never sliced: one unit per bucket
    units = plan.units
    assert all(isinstance(u, MergeTreeRewriteUnit) for u in units)
    assert len({(u.partition, u.bucket) for u in units}) == len(units) == 6
    assert [u.input_bytes for u in units] == sorted((u.input_bytes for u in units), reverse=True)
    result = job.commit_rewritten(plan, _run(job, units, remote))
    assert expected.snapshot_id is not None
    assert_compacted_like_twin(result, expected, remote, local, model)
    assert sorted_rows(local.to_arrow()) == model.rows()
    snap = remote.latest_snapshot()
    assert snap.commit_kind.value == "COMPACT" and snap.commit_user == "snaplake-maintenance"
    marked = (snap.properties or {}).get(FULL_COMPACTION_PROPERTY)
    assert marked == (local.latest_snapshot().properties or {}).get(FULL_COMPACTION_PROPERTY)
    assert marked == ("true" if full else None)


def test_partition_specs_plan_once_and_never_mark_a_full_compaction(tmp_path: Path) -> None:
    _, table, model = _twins(tmp_path)
    job = _job(table, partitions=[{"month": 1}, {"month": 1}], full=True)
    plan = job.plan_units(max_unit_bytes=1 << 30)
    assert len(plan.units) == 2  # the two buckets of month 1, once
    job.commit_rewritten(plan, _run(job, plan.units, table))
    assert FULL_COMPACTION_PROPERTY not in (table.latest_snapshot().properties or {})
    levels = {(s.partition_values, f.level) for s in table.new_scan().plan() for f in s.files}
    assert {lv for p, lv in levels if p == (1,)} == {3}  # num-levels = trigger + 1
    assert 0 in {lv for p, lv in levels if p == (2,)}
    assert sorted_rows(table.to_arrow()) == model.rows()


def test_daemon_options_pick_the_compaction(tmp_path: Path) -> None:
    _, table, _ = _twins(tmp_path)
    lazy = CoreOptions({**table.options, "num-sorted-run.compaction-trigger": "10"})
    job = _job(table, options=lazy)
    assert job.plan_units(max_unit_bytes=1 << 30).units == ()


def test_a_lost_conflict_deletes_outputs_but_never_an_upgraded_input(tmp_path: Path) -> None:
    # every file is "large" (target 1 kb): a lone file is upgraded, overlapping ones merged
    catalog = snaplake.FileSystemCatalog(str(tmp_path / "wh"))
    table = catalog.create_table("db.t", schema=PK_SCHEMA, primary_keys=PK_KEYS,
                                 options={"bucket": "1", "target-file-size": "1 kb"})  # fmt: skip
    model = TableModel(engine_model("deduplicate"))
    for start in (0, 100, 10):  # the third overlaps the first; the second stays alone
        rows = make_rows(start, 30, month_mod=1)  # keys (1, id): ranges by id
        w = table.new_write(commit_user="w")
        w.write_arrow(pk_table(rows))
        table.new_commit(commit_user="w").commit(w.prepare_commit())
        model.apply(rows)
    job = _job(table, full=True)
    plan = job.plan_units(max_unit_bytes=1 << 30)
    messages = _run(job, plan.units, table)
    moved = {f.file_name for m in messages for f in m.compact_increment.compact_before} & {
        f.file_name for m in messages for f in m.compact_increment.compact_after
    }
    new = {f.file_name for m in messages for f in m.compact_increment.compact_after} - moved
    assert moved and new, "the test needs both upgraded inputs and new outputs"
    table.compact(full=True)  # another compaction wins
    with pytest.raises(CommitConflictError):
        job.commit_rewritten(plan, messages)
    on_disk = {p.name for p in Path(table.root).rglob("*.parquet")}
    assert not new & on_disk
    assert moved <= on_disk
    assert sorted_rows(table.to_arrow()) == model.rows()


def test_the_commit_checks_the_lsm_rule(tmp_path: Path) -> None:
    """Two jobs whose inputs differ but whose outputs overlap in one level: the second loses."""
    _, table, model = _twins(tmp_path)
    first = _job(table, full=True)
    first_plan = first.plan_units(max_unit_bytes=1 << 30)
    (unit, *_) = first_plan.units
    assert isinstance(unit, MergeTreeRewriteUnit)
    task = unit.task
    files = sorted(task.files, key=lambda f: f.min_sequence_number)
    assert len(files) >= 2
    halves = [files[: len(files) // 2], files[len(files) // 2 :]]

    def only(fs: list[Any]) -> MergeTreeRewriteUnit:
        names = {f.file_name for f in fs}
        keep = [i for i, f in enumerate(task.files) if f.file_name in names]
        sub = dataclasses.replace(
            task, files=tuple(task.files[i] for i in keep), paths=tuple(task.paths[i] for i in keep)
        )
        return MergeTreeRewriteUnit(task=sub)

    second = _job(table, full=True)
    second_plan = second.plan_units(max_unit_bytes=1 << 30)
    first.commit_rewritten(first_plan, _run(first, [only(halves[0])], table))
    losing = _run(second, [only(halves[1])], table)
    with pytest.raises(CommitConflictError, match="LSM conflicts detected"):
        second.commit_rewritten(second_plan, losing)
    outs = {f.file_name for m in losing for f in m.compact_increment.compact_after}
    assert not outs & {p.name for p in Path(table.root).rglob("*.parquet")}
    assert sorted_rows(table.to_arrow()) == model.rows()


def test_messages_of_unplanned_buckets_are_refused(tmp_path: Path) -> None:
    _, table, _ = _twins(tmp_path)
    job = _job(table)
    messages = _run(job, job.plan_units(max_unit_bytes=1 << 30).units, table)
    other = _job(table, partitions=[{"month": 3}])
    other_plan = other.plan_units(max_unit_bytes=1 << 30)
    mine = {u.partition for u in other_plan.units}
    stray = [m for m in messages if m.partition not in mine]
    assert stray
    with pytest.raises(ValueError, match="did not plan"):
        other.commit_rewritten(other_plan, stray)
