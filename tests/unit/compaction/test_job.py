"""The one CompactionJob, both table kinds: re-plan after a lost conflict, commit or delete, cap."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tests.helpers import create_table, sorted_ids, write_and_commit
from tests.pk_helpers import PK_KEYS, PK_SCHEMA, TableModel, engine_model, make_rows, sorted_rows
from tests.pk_helpers import to_table as pk_table
from tests.unit.compaction.conftest import append, compaction_job, runs, small_files

from snaplake.compaction.append_compact import AppendCompactionPlanner
from snaplake.compaction.merge_tree_compact import MergeTreeCompactionPlanner
from snaplake.errors import (
    CommitConflictError,
    CommitRetriesExhaustedError,
    CommitStateUnknownError,
)


def _pk_table(tmp_path: Path) -> tuple[Any, TableModel]:
    """A primary-key table with 3 overlapping sorted runs in its one bucket (trigger 2)."""
    table = create_table(
        tmp_path / "pk", "db.kv", schema=PK_SCHEMA, primary_keys=PK_KEYS,
        options={"bucket": "1", "num-sorted-run.compaction-trigger": "2"},
    )  # fmt: skip
    model = TableModel(engine_model("deduplicate"))
    for i in range(3):
        _upsert(table, model, i)
    return table, model


def _upsert(table: Any, model: TableModel, i: int) -> None:
    rows = make_rows(i * 10, 30, seed=i)
    write_and_commit(table, pk_table(rows))
    model.apply(rows)


def _data_files(table: Any) -> set[str]:
    return {p.name for p in Path(table.root).rglob("data-*")}


def _attempts(job: Any) -> list[set[str]]:
    """Record the new files each of ``job``'s commit attempts carries."""
    attempts: list[set[str]] = []
    commit_rewritten = job.commit_rewritten

    def recorded(plan: Any, messages: Any, **kwargs: Any) -> Any:
        inputs = {f.file_name for m in messages for f in m.compact_increment.compact_before}
        attempts.append(
            {f.file_name for m in messages for f in m.compact_increment.compact_after} - inputs
        )
        return commit_rewritten(plan, messages, **kwargs)

    job.commit_rewritten = recorded
    return attempts


def _live(table: Any) -> set[str]:
    return {f.file_name for s in table.new_scan().plan() for f in s.files}


def _after_first_plan(job: Any, act: Any) -> list[Any]:
    """Run ``act()`` after ``job``'s first plan (before its rewrite); return every plan made."""
    plans: list[Any] = []
    plan_units = job.plan_units

    def plan_then_act(**kwargs: Any) -> Any:
        plans.append(plan_units(**kwargs))
        if len(plans) == 1:
            act()
        return plans[-1]

    job.plan_units = plan_then_act
    return plans


# -- every kind plans again after a lost conflict ---------------------------------------------
def test_append_job_replans_after_a_lost_conflict(make_table):
    table = small_files(make_table, 5)
    job = compaction_job(table)
    assert isinstance(job.planner, AppendCompactionPlanner)

    def another_compaction_wins() -> None:
        assert table.compact().snapshot_id is not None
        for i in range(5, 8):  # due again for the re-plan
            append(table, i * 10, 10)

    plans = _after_first_plan(job, another_compaction_wins)
    attempts = _attempts(job)
    result = job.execute()
    assert len(plans) == len(attempts) == 2
    latest = table.latest_snapshot()
    assert latest is not None and result.snapshot_id == latest.id
    assert latest.commit_kind.value == "COMPACT"
    lost, won = attempts
    assert lost and not lost & _data_files(table)  # the lost attempt's outputs were deleted
    assert won == {Path(p).name for p in result.output_files} and won <= _live(table)
    assert sorted_ids(table.to_arrow()) == list(range(80))


def test_primary_key_job_replans_after_a_lost_conflict(tmp_path):
    table, model = _pk_table(tmp_path)
    job = compaction_job(table)
    assert isinstance(job.planner, MergeTreeCompactionPlanner)

    def another_compaction_wins() -> None:
        assert table.compact(full=True).snapshot_id is not None
        for i in range(3, 6):  # due again for the re-plan
            _upsert(table, model, i)

    plans = _after_first_plan(job, another_compaction_wins)
    attempts = _attempts(job)
    result = job.execute()
    assert len(plans) == len(attempts) == 2
    assert result.snapshot_id == table.latest_snapshot().id
    lost, won = attempts
    assert lost and not lost & _data_files(table)  # the lost attempt's outputs were deleted
    assert won == {Path(p).name for p in result.output_files} and won <= _live(table)
    assert sorted_rows(table.to_arrow()) == model.rows()


def test_replans_are_bounded(make_table):
    table = small_files(make_table, 5)
    job = compaction_job(table)
    stale = job.plan_units()
    table.compact()
    calls: list[int] = []

    def stale_plan(**_: Any) -> Any:
        calls.append(1)
        return stale

    job.plan_units = stale_plan  # type: ignore[method-assign]
    before = _data_files(table)
    with pytest.raises(CommitConflictError):
        job.execute(plan=stale, max_replans=2)
    assert len(calls) == 1  # the given plan, then one re-plan
    assert _data_files(table) == before  # every attempt's outputs deleted
    with pytest.raises(ValueError, match="max_replans"):
        job.execute(max_replans=0)


# -- one commit-or-delete ---------------------------------------------------------------------
def _rewritten(job: Any) -> tuple[Any, list[Any], set[str]]:
    plan = job.plan_units()
    messages = [m for u in plan.units for m in job.rewrite(u)]
    inputs = {f.file_name for m in messages for f in m.compact_increment.compact_before}
    new = {f.file_name for m in messages for f in m.compact_increment.compact_after} - inputs
    assert new
    return plan, messages, new


def _tables(kind: str, make_table: Any, tmp_path: Path) -> Any:
    if kind == "append":
        table = small_files(make_table, 4)
        return table
    return _pk_table(tmp_path)[0]


@pytest.mark.parametrize("kind", ["append", "primary-key"])
@pytest.mark.parametrize(
    ("error", "kept"),
    [
        (CommitRetriesExhaustedError("lost every race", attempts=3, elapsed_s=0.1), False),
        (OSError("storage down before the publish"), False),
        (CommitStateUnknownError("timed out", commit_identifier=1, snapshot_id=9), True),
        (KeyboardInterrupt(), True),
    ],
    ids=["retries-exhausted", "os-error", "state-unknown", "interrupt"],
)
def test_a_failed_commit_deletes_the_outputs_unless_it_may_have_landed(
    kind, error, kept, make_table, tmp_path, monkeypatch
):
    table = _tables(kind, make_table, tmp_path)
    job = compaction_job(table)
    plan, messages, new = _rewritten(job)
    assert new <= _data_files(table)
    latest = table.latest_snapshot().id

    def fail(*_args: Any, **_kwargs: Any) -> Any:
        raise error

    monkeypatch.setattr(job.commit, "commit", fail)
    with pytest.raises(type(error)):
        job.commit_rewritten(plan, messages)
    assert (new <= _data_files(table)) if kept else not (new & _data_files(table))
    assert table.latest_snapshot().id == latest


# -- the cap is an argument of the planning; the plan says what it cut off --------------------
def test_the_plan_says_whether_the_cap_cut_files_off(make_table, tmp_path):
    table = small_files(make_table, 6)
    capped = compaction_job(table, max_files_per_bucket=4).plan_units()
    assert capped.capped and sum(len(t.files) for t in runs(capped)) == 4
    whole = compaction_job(table, max_files_per_bucket=6).plan_units()
    assert not whole.capped and sum(len(t.files) for t in runs(whole)) == 6
    assert not compaction_job(table).plan_units().capped
    pk, _ = _pk_table(tmp_path)
    plan = compaction_job(pk, max_files_per_bucket=2).plan_units()
    assert plan.units and not plan.capped  # a bucket's merge is never cut
    assert plan.whole_buckets and plan.sorted_runs is not None
    for bad in (pk, table):
        with pytest.raises(ValueError, match="max_files_per_bucket"):
            compaction_job(bad, max_files_per_bucket=1)
