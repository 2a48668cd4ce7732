"""Conflicts of compactions that write deletion vectors (issue 21 item 5).

Two compactions of one bucket: the second to commit fails before publishing
(a retryable ``CommitConflictError``) and its outputs, index file included, are
deleted; ``CompactionJob.execute`` plans again and wins. A ``write-only``
writer's level-0 commit never conflicts with a compaction. pypaimon reads the
model after each step.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from tests.helpers import write_and_commit
from tests.oracle import requires_paimon
from tests.pk_helpers import (
    TableModel,
    dv_table,
    engine_model,
    make_rows,
    pypaimon_rows,
    sorted_rows,
    to_table,
)

import snaplake
from snaplake.commit.conflict import ConflictDetection
from snaplake.commit.dv_conflict import DeletionVectorRule
from snaplake.compaction.maintenance import maintenance_committer
from snaplake.errors import CommitConflictError, DeletionVectorConflictError
from snaplake.store.format.index_file import (
    DELETION_VECTORS_INDEX,
    IndexFileMeta,
    IndexManifestEntry,
)
from snaplake.store.format.manifest import FileKind
from snaplake.store.read.index_scan import read_index_entries
from snaplake.write.batch_write import commit_or_abort

pytestmark = [pytest.mark.integration, requires_paimon]


def _index_files(table: snaplake.Table) -> set[str]:
    return {p.name for p in (Path(table.root) / "index").glob("index-*")}


def test_second_compaction_of_a_bucket_replans(tmp_path: Path) -> None:
    table = dv_table(tmp_path, **{"write-only": "true"})
    model = TableModel(engine_model("deduplicate"))
    for i, seed in enumerate((0, 1)):
        rows = make_rows(0 if i == 0 else 10, 40, seed=seed)
        write_and_commit(table, to_table(rows))
        model.apply(rows, None)
        table.compact()  # level 3, then vectors on it
    rows = make_rows(5, 30, seed=2)
    write_and_commit(table, to_table(rows))  # write-only: level 0, invisible for now
    model.apply(rows, None)
    loser = table.file_store().new_compaction(commit=maintenance_committer(table))
    plan = loser.plan_units()
    messages = [m for u in plan.units for m in loser.rewrite(u)]
    assert any(m.compact_increment.new_index_files for m in messages)
    table.compact()  # the winner
    assert pypaimon_rows(tmp_path) == model.rows()
    with pytest.raises(CommitConflictError):
        loser.commit_rewritten(plan, messages)
    new_index = {f.file_name for m in messages for f in m.compact_increment.new_index_files}
    assert not new_index & _index_files(table), "the loser's index files are deleted"
    assert pypaimon_rows(tmp_path) == model.rows()
    # A job that loses plans again on the new snapshot (here: nothing left to do).
    again = table.file_store().new_compaction(commit=maintenance_committer(table))
    stale = again.plan_units()
    write_and_commit(table, to_table(make_rows(60, 5, seed=3)))
    model.apply(make_rows(60, 5, seed=3), None)
    table.compact()
    again.execute(plan=stale)
    assert pypaimon_rows(tmp_path) == model.rows()


def test_vectors_file_replaced_since_planning_is_refused(tmp_path: Path) -> None:
    """The vectors-file check alone: a DELETE naming a file no longer live, an ADD over one."""
    table = dv_table(tmp_path)
    write_and_commit(table, to_table(make_rows(0, 40)))
    table.compact(full=True)
    write_and_commit(table, to_table(make_rows(0, 10, seed=1)))  # the lift writes vectors
    latest = table.latest_snapshot()
    live = read_index_entries(table, latest, index_type=DELETION_VECTORS_INDEX)
    assert live
    entry = live[0]

    def check(*compaction: IndexManifestEntry) -> None:
        rule = DeletionVectorRule(table)
        rule.changes = ((), compaction)  # a compaction's vector changes, no data change
        ConflictDetection(table, rules=(rule,)).check([], latest)

    new = replace(entry, index_file=replace(entry.index_file, file_name="index-new-0"))
    check(entry.as_delete(), new)  # replacing the live file: fine
    stale = IndexManifestEntry(
        kind=FileKind.DELETE, partition=entry.partition, bucket=entry.bucket,
        index_file=IndexFileMeta(DELETION_VECTORS_INDEX, "index-gone-0", 1, 0, ()),
    )  # fmt: skip
    with pytest.raises(DeletionVectorConflictError) as info:
        check(stale, new)
    assert info.value.retryable
    with pytest.raises(DeletionVectorConflictError):  # expected none, found one
        check(new)


def test_write_only_level0_commit_never_conflicts_with_a_compaction(tmp_path: Path) -> None:
    table = dv_table(tmp_path, **{"write-only": "true"})
    model = TableModel(engine_model("deduplicate"))
    rows = make_rows(0, 40)
    write_and_commit(table, to_table(rows))
    model.apply(rows, None)
    job = table.file_store().new_compaction(commit=maintenance_committer(table))
    plan = job.plan_units()
    messages = [m for u in plan.units for m in job.rewrite(u)]
    later = make_rows(10, 20, seed=1)
    write_and_commit(table, to_table(later))  # lands between plan and commit
    job.commit_rewritten(plan, messages)
    assert pypaimon_rows(tmp_path) == sorted_rows(to_table(rows))  # the later rows wait in level 0
    model.apply(later, None)
    table.compact()
    assert pypaimon_rows(tmp_path) == model.rows()


def test_lifting_writer_that_loses_to_a_compaction_commits_its_level0_files(
    tmp_path: Path,
) -> None:
    table = dv_table(tmp_path)
    model = TableModel(engine_model("deduplicate"))
    rows = make_rows(0, 40)
    write_and_commit(table, to_table(rows))
    model.apply(rows, None)
    table.compact(full=True)
    write = table.new_write(commit_user="w")
    later = make_rows(10, 20, seed=1)
    write.write_arrow(to_table(later))
    messages = write.prepare_commit()  # the lift: level 0 compacted, vectors written
    outputs = {f.file_name for m in messages for f in m.compact_increment.compact_after}
    assert outputs and any(m.compact_increment.new_index_files for m in messages)
    write_and_commit(table, to_table(make_rows(30, 5, seed=2)))  # lifts the same buckets
    model.apply(make_rows(30, 5, seed=2), None)
    result = commit_or_abort(table.new_commit(commit_user="w"), write.schema, messages,
                             commit_identifier=1)  # fmt: skip
    assert result.snapshot_id is not None
    on_disk = {p.name for p in Path(table.root).rglob("*.parquet")}
    assert not outputs & on_disk, "the lost compaction's outputs are deleted"
    assert pypaimon_rows(tmp_path) == model.rows()  # the level-0 rows wait for a compaction
    model.apply(later, None)
    table.compact()
    assert pypaimon_rows(tmp_path) == model.rows()
