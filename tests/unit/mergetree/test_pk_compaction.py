"""LSM compaction: universal picking, levels, options, conflicts with writers and compactions."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from tests.helpers import create_table, write_and_commit
from tests.pk_helpers import (
    PK_KEYS,
    PK_SCHEMA,
    TableModel,
    engine_model,
    make_rows,
    sorted_rows,
    to_table,
)

from snaplake.commit.message import CommitMessage, CompactIncrement
from snaplake.compaction.maintenance import maintenance_committer
from snaplake.compaction.merge_tree_plan import (
    FULL_COMPACTION_PROPERTY,
    BucketCompaction,
    MergeTreeCompactPlanner,
)
from snaplake.compaction.merge_tree_rewrite import rewrite_bucket
from snaplake.errors import CommitConflictError
from snaplake.store.format.snapshot import CommitKind


def _job(table: Any, **kwargs: Any) -> Any:
    return table.file_store().new_compaction(commit=maintenance_committer(table), **kwargs)


def _between_plan_and_rewrite(job: Any, act: Any) -> None:
    """Make ``act()`` run after each of ``job``'s plans, before its rewrite."""
    plan_units = job.plan_units

    def plan_then_act(**kwargs: Any) -> Any:
        plan = plan_units(**kwargs)
        act()
        return plan

    job.plan_units = plan_then_act


def _table(tmp_path: Path, **options: str) -> Any:
    return create_table(
        tmp_path, schema=PK_SCHEMA, primary_keys=PK_KEYS, options={"bucket": "1", **options}
    )


def _write(table: Any, model: TableModel, start: int, n: int, seed: int) -> None:
    rows = make_rows(start, n, seed=seed)
    kinds = ["-D" if r["id"] % 9 == 0 else "+I" for r in rows]
    write_and_commit(table, to_table(rows), row_kinds=kinds)
    model.apply(rows, kinds)


def _table_with_runs(tmp_path: Path, runs: int, **options: str) -> tuple[Any, TableModel]:
    """A one-bucket deduplicate table with ``runs`` overlapping level-0 files, and its model."""
    table = _table(tmp_path, **options)
    model = TableModel(engine_model("deduplicate"))
    for i in range(runs):
        _write(table, model, i * 10, 30, i)
    return table, model


def _files(table: Any) -> list[Any]:
    return [f for s in table.new_scan().plan() for f in s.files]


def test_trigger_levels_and_full(tmp_path: Path) -> None:
    table, model = _table_with_runs(tmp_path, 2, **{"num-sorted-run.compaction-trigger": "3"})
    assert table.compact().snapshot_id is None  # 2 runs: below the trigger
    _write(table, model, 20, 30, 2)
    result = table.compact()  # 3 runs: size amplification compacts all to the top
    assert result.snapshot_id is not None
    assert {f.level for f in _files(table)} == {3}  # num-levels = trigger + 1
    snap = table.latest_snapshot()
    assert snap.commit_kind == CommitKind.COMPACT and snap.commit_user == "snaplake-maintenance"
    assert sorted_rows(table.to_arrow()) == model.rows()
    assert all(f.delete_row_count == 0 for f in _files(table))  # top level: deletes dropped
    for i in range(3, 6):
        _write(table, model, i * 10, 30, i)
    table.compact(full=True)
    assert len(_files(table)) == 1
    assert (table.latest_snapshot().properties or {}).get(FULL_COMPACTION_PROPERTY) == "true"
    assert sorted_rows(table.to_arrow()) == model.rows()


def test_full_compaction_delta_commits(tmp_path: Path) -> None:
    table = _table(
        tmp_path,
        **{"full-compaction.delta-commits": "2", "num-sorted-run.compaction-trigger": "10"},
    )
    model = TableModel(engine_model("deduplicate"))
    _write(table, model, 0, 20, 0)
    assert table.compact().snapshot_id is None
    _write(table, model, 10, 20, 1)
    assert table.compact().snapshot_id is not None  # 2 commits since the last full one
    assert len(_files(table)) == 1
    _write(table, model, 5, 5, 2)
    assert table.compact().snapshot_id is None
    assert sorted_rows(table.to_arrow()) == model.rows()


def test_target_file_size_rolls_outputs(tmp_path: Path) -> None:
    table = _table(tmp_path, **{"target-file-size": "8 kb"})
    model = TableModel(engine_model("deduplicate"))
    for i in range(3):
        _write(table, model, i * 500, 4000, i)
    table.compact(full=True)
    files = _files(table)
    assert len(files) > 2
    assert all(f.level == 5 and f.file_source == 1 for f in files)
    assert sorted_rows(table.to_arrow()) == model.rows()


def test_writer_never_conflicts_with_compaction(tmp_path: Path) -> None:
    table, model = _table_with_runs(tmp_path, 3, **{"num-sorted-run.compaction-trigger": "2"})
    job = _job(table)
    writes: list[int] = []

    def writer_commits_in_between() -> None:
        if not writes:
            writes.append(1)
            _write(table, model, 5, 30, 7)  # a level-0 file lands after the plan

    _between_plan_and_rewrite(job, writer_commits_in_between)
    result = job.execute()
    assert result.snapshot_id is not None
    assert 0 in {f.level for f in _files(table)}
    assert sorted_rows(table.to_arrow()) == model.rows()


def test_two_compactions_one_wins_and_the_other_replans(tmp_path: Path) -> None:
    table, model = _table_with_runs(tmp_path, 3, **{"num-sorted-run.compaction-trigger": "2"})
    job = _job(table)
    plan = job.plan_units()
    schema = table.schema()
    first = [rewrite_bucket(u.task, file_io=table.file_io, paths=table.paths, schema=schema)
             for u in plan.units]  # fmt: skip
    second = [rewrite_bucket(u.task, file_io=table.file_io, paths=table.paths, schema=schema)
              for u in plan.units]  # fmt: skip
    job.commit_rewritten(plan, [r.message for r in first])
    with pytest.raises(CommitConflictError):
        job.commit_rewritten(plan, [r.message for r in second])
    # the loser's outputs are its own to delete; the winner's stay
    assert all(Path(p).exists() for r in first for p in r.written)
    calls: list[int] = []

    def race() -> None:
        if not calls:  # another compactor wins between this one's plan and commit
            calls.append(1)
            _write(table, model, 40, 30, 8)
            _write(table, model, 50, 30, 9)
            _job(table, full=True).execute()
            _write(table, model, 80, 30, 12)  # due again for the re-plan
            _write(table, model, 90, 30, 13)

    _write(table, model, 60, 30, 10)
    _write(table, model, 70, 30, 11)
    job = _job(table)
    _between_plan_and_rewrite(job, race)
    result = job.execute()
    assert result.snapshot_id is not None and calls == [1]
    assert sorted_rows(table.to_arrow()) == model.rows()


def _overlapping_level_upgrade(tmp_path: Path) -> tuple[Any, TableModel, CommitMessage]:
    """A table with two overlapping level-0 files, and a compaction moving both to level 1.

    The message breaks the LSM rule (two overlapping files in one level above 0).
    """
    table, model = _table_with_runs(tmp_path, 2)  # overlapping key ranges, both level 0
    split = table.new_scan().plan()[0]
    upgraded = tuple(dataclasses.replace(f, level=1) for f in split.files)
    message = CommitMessage(
        partition=split.partition,
        bucket=split.bucket,
        total_buckets=split.total_buckets,
        compact_increment=CompactIncrement(compact_before=split.files, compact_after=upgraded),
    )
    return table, model, message


def test_lsm_rule_refuses_overlapping_level(tmp_path: Path) -> None:
    table, model, message = _overlapping_level_upgrade(tmp_path)
    with pytest.raises(CommitConflictError, match="LSM conflicts detected"):
        maintenance_committer(table).commit([message], kind=CommitKind.COMPACT)
    assert sorted_rows(table.to_arrow()) == model.rows()
    assert isinstance(
        MergeTreeCompactPlanner(table, full=True).plan().tasks[0],
        BucketCompaction,
    )  # fmt: skip


def test_lsm_rule_comes_from_the_file_store_for_every_committer(tmp_path: Path) -> None:
    """FileStoreCommit.of(table) and table.new_commit get the key-value kind's LSM rule."""
    from snaplake.commit.file_store_commit import FileStoreCommit
    from snaplake.mergetree.conflict import LsmConflictRule

    table, model, message = _overlapping_level_upgrade(tmp_path)
    (rule,) = table.file_store().conflict_rules()
    assert isinstance(rule, LsmConflictRule)
    for committer in (
        FileStoreCommit.of(table, commit_user="other-compactor"),
        table.new_commit(commit_user="writer"),
    ):
        assert any(isinstance(r, LsmConflictRule) for r in committer.conflict_rules)
        with pytest.raises(CommitConflictError, match="LSM conflicts detected"):
            committer.commit([message], kind=CommitKind.COMPACT)
    assert sorted_rows(table.to_arrow()) == model.rows()
