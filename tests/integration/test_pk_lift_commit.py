"""A lifting writer's commit: APPEND of its level-0 files, then COMPACT of their lift (issue 21).

A writer of a deletion-vector (or first-row, or ``lookup`` changelog) table
compacts its level-0 files before the commit; the commit publishes them as
Paimon does, in two snapshots with one identifier. These tests hook the
committer between the two snapshots (no timing): a compaction of the same
bucket landing there wins, a crash there followed by a replay of the
identifier commits no row twice, and any other failure of the COMPACT half
keeps the APPEND. pypaimon reads the table after each step.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tests.oracle import requires_paimon
from tests.pk_helpers import (
    PK_SCHEMA,
    TableModel,
    dv_table,
    engine_model,
    make_rows,
    pypaimon_rows,
    to_table,
)
from tests.pk_helpers import sorted_rows as _sorted

import snaplake
from snaplake.commit.file_store_commit import FileStoreCommit
from snaplake.commit.message import CommitMessage
from snaplake.compaction.maintenance import maintenance_committer
from snaplake.errors import CommitRetriesExhaustedError
from snaplake.store.format.snapshot import CommitKind
from snaplake.store.read.scan import FileStoreScan
from snaplake.write.batch_write import commit_or_abort
from snaplake.write.table_write import TableWrite

pytestmark = [pytest.mark.integration, requires_paimon]


class _Crash(BaseException):
    """The process dies between the APPEND and the COMPACT snapshot."""


def _between(commit: FileStoreCommit, action: Callable[[], object]) -> None:
    """Run ``action`` when ``commit`` has published a writer's APPEND, before its COMPACT."""
    real = commit._commit

    def hooked(messages: Any, **kwargs: Any) -> snaplake.CommitResult:
        if kwargs.get("kind") is CommitKind.COMPACT and kwargs.get("checked"):
            action()
        return real(messages, **kwargs)

    commit._commit = hooked  # type: ignore[method-assign]


def _outputs(table: snaplake.Table, messages: list[CommitMessage]) -> set[str]:
    """Names of the files the lift wrote (compaction outputs that are not inputs, vectors)."""
    out: set[str] = set()
    for m in messages:
        ci = m.compact_increment
        inputs = {f.file_name for f in ci.compact_before}
        out |= {f.file_name for f in (*ci.compact_after, *ci.changelog_files)} - inputs
        out |= {f.file_name for f in ci.new_index_files}
    return out


def _lifted_write(
    table: snaplake.Table, rows: list[dict[str, Any]], between: Callable[[], object]
) -> tuple[TableWrite, list[CommitMessage], set[str], FileStoreCommit]:
    """A writer's prepared commit of ``rows`` and a commit hooked to run ``between`` there.

    Returns the write, its messages (the lift done: level 0 compacted, vectors written), the
    lift's outputs (:func:`_outputs`) and the commit (:func:`_between`).
    """
    write = table.new_write(commit_user="w")
    write.write_arrow(to_table(rows))
    messages = write.prepare_commit()
    commit = table.new_commit(commit_user="w")
    _between(commit, between)
    return write, messages, _outputs(table, messages), commit


def _raise(error: BaseException) -> Callable[[], None]:
    def action() -> None:
        raise error

    return action


def _on_disk(table: snaplake.Table) -> set[str]:
    return {p.name for p in Path(table.root).rglob("*") if p.is_file()}


def _level0(table: snaplake.Table) -> list[str]:
    """The live level-0 files (a batch scan of a deletion-vector table skips them)."""
    scan = FileStoreScan(
        file_io=table.file_io, paths=table.paths, schema_manager=table.schema_manager,
        snapshot=table.latest_snapshot(),
    )  # fmt: skip
    return [f.file_name for s in scan.plan() for f in s.files if f.level == 0]


def _seeded(tmp_path: Path, **extra: str) -> tuple[snaplake.Table, TableModel]:
    """A table whose buckets hold a top-level file with vectors (so a full compaction has work)."""
    table = dv_table(tmp_path, **extra)
    model = TableModel(engine_model("deduplicate"))
    for start, n, seed in ((0, 40, 0), (0, 10, 1)):
        rows = make_rows(start, n, seed=seed)
        table.write(to_table(rows))
        model.apply(rows, None)
    table.compact(full=True)
    rows = make_rows(20, 10, seed=2)
    table.write(to_table(rows))  # lifted: vectors on the top-level files
    model.apply(rows, None)
    assert pypaimon_rows(tmp_path) == model.rows()
    return table, model


def test_a_compaction_landing_between_the_append_and_the_compact_wins(tmp_path: Path) -> None:
    table, model = _seeded(tmp_path)
    job = table.file_store().new_compaction(commit=maintenance_committer(table), full=True)
    plan = job.plan_units()  # planned before the writer's commit
    rewritten = [m for u in plan.units for m in job.rewrite(u)]
    assert rewritten
    later = make_rows(5, 30, seed=3)
    write, messages, lift, commit = _lifted_write(
        table, later, lambda: job.commit_rewritten(plan, rewritten)
    )
    assert lift and lift <= _on_disk(table)
    before = table.latest_snapshot()
    assert before is not None
    result = commit_or_abort(commit, write.schema, messages, commit_identifier=7)
    # the APPEND result: the concurrent compaction is the latest snapshot, the writer's
    # COMPACT lost to it and was not published
    latest = table.latest_snapshot()
    assert latest is not None
    snaps = [table.snapshot(i) for i in range(before.id + 1, latest.id + 1)]
    assert [(str(s.commit_kind), s.commit_user) for s in snaps] == [
        ("APPEND", "w"),
        ("COMPACT", maintenance_committer(table).commit_user),
    ]
    assert result.snapshot_id == snaps[0].id and not result.was_duplicate
    assert str(result.kind) == "APPEND"
    assert not lift & _on_disk(table), "the lost lift's outputs are deleted"
    level0 = _level0(table)
    assert level0, "the writer's level-0 files are committed and wait for a compaction"
    # nothing lost, nothing twice: the delta of the APPEND is the rows written, and the
    # merged view (level 0 included) is the model's
    delta = table.changes(snaps[0].id, mode="delta").read_all()
    assert _sorted(delta.select(PK_SCHEMA.names).cast(PK_SCHEMA)) == _sorted(to_table(later))
    assert pypaimon_rows(tmp_path) == model.rows()  # pypaimon skips level 0: the rows wait
    model.apply(later, None)
    assert _sorted(table.to_arrow().select(PK_SCHEMA.names)) != model.rows()
    # a retry of the identifier is a duplicate: the writer committed it
    assert commit_or_abort(
        table.new_commit(commit_user="w"), write.schema, [], commit_identifier=7
    ).was_duplicate
    table.compact()  # the next compaction lifts the level-0 files
    assert not set(level0) & set(_level0(table))
    assert pypaimon_rows(tmp_path) == model.rows()
    assert _sorted(table.to_arrow().select(PK_SCHEMA.names)) == model.rows()


@pytest.mark.parametrize("producer", [None, "lookup"])
def test_a_replay_after_the_append_landed_commits_no_row_twice(
    tmp_path: Path, producer: str | None
) -> None:
    extra = {"changelog-producer": producer} if producer else {}
    table, model = _seeded(tmp_path, **extra)
    later = make_rows(5, 30, seed=4)
    write, messages, lift, commit = _lifted_write(table, later, _raise(_Crash()))
    with pytest.raises(_Crash):
        commit_or_abort(commit, write.schema, messages, commit_identifier=3)
    appended = table.latest_snapshot()
    assert appended is not None and str(appended.commit_kind) == "APPEND"
    assert appended.commit_identifier == 3
    model.apply(later, None)
    # the restarted job writes the same rows again and commits the same identifier
    write = table.new_write(commit_user="w")
    write.write_arrow(to_table(later))
    replay = write.prepare_commit()
    replayed = _outputs(table, replay) | {
        f.file_name for m in replay for f in m.data_increment.new_files
    }
    result = commit_or_abort(
        table.new_commit(commit_user="w"), write.schema, replay, commit_identifier=3
    )
    assert result.was_duplicate and result.snapshot_id == appended.id
    assert table.latest_snapshot() == appended, "nothing published"
    assert not replayed & _on_disk(table), "the replay's files and its lift are deleted"
    assert lift & _on_disk(table)  # the crashed lift's files: orphans, left to orphan clean
    table.compact()
    assert pypaimon_rows(tmp_path) == model.rows()
    assert _sorted(table.to_arrow().select(PK_SCHEMA.names)) == model.rows()


def test_a_compact_half_that_fails_otherwise_keeps_the_append(tmp_path: Path) -> None:
    """Retries exhausted on the COMPACT: a one-off write keeps its committed level-0 files."""
    table, model = _seeded(tmp_path)
    later = make_rows(40, 10, seed=5)
    exhausted = CommitRetriesExhaustedError("lost every race (test)", attempts=3, elapsed_s=0.0)
    write, messages, lift, commit = _lifted_write(table, later, _raise(exhausted))
    result = commit_or_abort(commit, write.schema, messages, commit_identifier=None)
    latest = table.latest_snapshot()
    assert latest is not None and result.snapshot_id == latest.id
    assert str(latest.commit_kind) == "APPEND"
    assert not lift & _on_disk(table)
    new = {f.file_name for m in messages for f in m.data_increment.new_files}
    assert new <= _on_disk(table), "the APPEND's level-0 files are kept"
    model.apply(later, None)
    table.compact()
    assert pypaimon_rows(tmp_path) == model.rows()
