from __future__ import annotations

import pytest
from tests.helpers import rows, sorted_ids, write_and_commit
from tests.unit.compaction.conftest import append

from snaplake.commit.snapshot_commit import SnapshotCommit
from snaplake.compaction.maintenance import MAINTENANCE_COMMIT_USER, maintenance_committer
from snaplake.compaction.manifest_merge import ManifestFileMerger
from snaplake.errors import CommitRetriesExhaustedError
from snaplake.options import CoreOptions
from snaplake.store.format.binary_row import decode_binary_row
from snaplake.store.format.manifest_list import read_manifest_list
from snaplake.store.format.snapshot import CommitKind


def _race(monkeypatch, before_attempt):
    """Call ``before_attempt(n)`` before the merge's n-th publish attempt (0-based).

    Returns the base-list lengths the merge tried to publish, in order.
    """
    original = SnapshotCommit.try_commit_once
    calls: list[int] = []

    def racing(self, changes, **kw):
        if self.commit_user == MAINTENANCE_COMMIT_USER and changes.base is not None:
            before_attempt(len(calls))
            calls.append(len(changes.base))
        return original(self, changes, **kw)

    monkeypatch.setattr(SnapshotCommit, "try_commit_once", racing)
    return calls


def _metas(table, snap=None):
    snap = snap or table.latest_snapshot()
    base = read_manifest_list(table.file_io, table.paths.manifest_path(snap.base_manifest_list))
    delta = read_manifest_list(table.file_io, table.paths.manifest_path(snap.delta_manifest_list))
    return base, delta


def _append_many(table, n, *, user="w"):
    commit = table.new_commit(commit_user=user)
    for i in range(n):
        write_and_commit(
            table, rows(i * 10, 10), commit_user=user, commit_identifier=i, committer=commit
        )


def test_minor_merge_waits_for_min_count(make_table):
    table = make_table({"manifest.merge-min-count": "5"})
    _append_many(table, 4)
    result = table.merge_manifests()
    assert not result.merged
    assert result.manifests_before == 4
    assert result.attempts == 0
    _append_many_more = table.new_commit(commit_user="x")
    w = table.new_write(commit_user="x")
    w.write_arrow(rows(1000, 3))
    _append_many_more.commit(w.prepare_commit())
    result = table.merge_manifests()
    assert result.merged
    assert result.manifests_before == 5
    assert result.manifests_after == 1
    assert len(result.manifests_written) == 1


def test_merged_snapshot_shape(make_table):
    table = make_table()
    _append_many(table, 6)
    before = table.latest_snapshot()
    result = table.merge_manifests()
    snap = table.latest_snapshot()
    assert snap.id == result.snapshot_id == before.id + 1
    assert snap.commit_kind == CommitKind.COMPACT
    assert snap.commit_user == MAINTENANCE_COMMIT_USER
    assert snap.total_record_count == before.total_record_count
    assert snap.delta_record_count == 0
    base, delta = _metas(table)
    assert delta == []
    assert len(base) == 1
    assert snap.txn_map()["w"] == 5  # the writer's dedup state is carried forward
    assert sorted_ids(table.to_arrow()) == list(range(60))
    # a replayed writer batch is still a duplicate after the merge
    w = table.new_write(commit_user="w")
    w.write_arrow(rows(0, 1))
    assert (
        table.new_commit(commit_user="w")
        .commit(w.prepare_commit(), commit_identifier=5)
        .was_duplicate
    )


def test_partition_stats_of_merged_manifest_allow_pruning(make_table):
    table = make_table()
    _append_many(table, 6)  # months 1..3 in every commit
    table.merge_manifests()
    (meta,), _ = _metas(table)
    types = table.schema().partition_types
    assert decode_binary_row(meta.partition_stats.min_values, types) == (1,)
    assert decode_binary_row(meta.partition_stats.max_values, types) == (3,)
    assert meta.partition_stats.null_counts == (0,)
    assert meta.num_added_files == 18
    assert meta.num_deleted_files == 0
    got = table.to_arrow(partition_filter={"month": 2})
    assert set(got.column("month").to_pylist()) == {2}
    assert table.new_scan(partition_filter={"month": 9}).plan() == []


def test_full_compaction_applies_deletes(make_table):
    table = make_table({"manifest.merge-min-count": "100"})
    _append_many(table, 6)
    table.compact()  # DELETEs for the small files, ADDs for the outputs
    base, delta = _metas(table)
    assert sum(m.num_deleted_files for m in base + delta) > 0
    assert not table.merge_manifests().merged  # minor: below min count, below full threshold
    result = table.merge_manifests(full=True)
    assert result.merged
    assert result.full_compaction
    assert result.entries_removed == 2 * 18
    base, delta = _metas(table)
    assert sum(m.num_deleted_files for m in base) == 0
    assert sum(m.num_added_files for m in base) == 3
    assert sorted_ids(table.to_arrow()) == list(range(60))


def test_full_compaction_triggers_on_threshold(make_table):
    table = make_table({"manifest.merge-min-count": "100",
                        "manifest.full-compaction-threshold-size": "1 kb"})  # fmt: skip
    _append_many(table, 4)
    result = table.merge_manifests()
    assert result.merged
    assert result.full_compaction
    assert result.manifests_after == 1


def test_lost_race_to_an_append_keeps_merged_prefix(make_table, monkeypatch):
    table = make_table()
    _append_many(table, 5)

    def racing(n):
        if n == 0:
            append(table, 500, 7, user="racer")  # wins the next snapshot id

    calls = _race(monkeypatch, racing)
    result = table.merge_manifests()
    assert result.attempts == 2
    assert calls == [1, 2]
    assert sorted_ids(table.to_arrow()) == sorted([*range(50), *range(500, 507)])
    # the losing attempt's manifest lists were removed again
    snap = table.latest_snapshot()
    names = {s.path.rsplit("/", 1)[-1] for s in table.file_io.list_files(table.paths.manifest_dir)}
    referenced = set()
    for s in table.snapshots():
        referenced |= {s.base_manifest_list, s.delta_manifest_list}
        b, d = _metas(table, s)
        referenced |= {m.file_name for m in b + d}
    assert names == referenced, names - referenced
    assert snap.commit_kind == CommitKind.COMPACT


def test_lost_races_carry_the_plan_forward_from_delta_lists(make_table, monkeypatch):
    """After lost races the merge reads only the new snapshots' delta lists."""
    table = make_table()
    _append_many(table, 5)

    def racing(n):
        if n < 2:  # lose twice: to two appends, then to one more
            for k in range(2 - n):
                append(table, 500 + 10 * n + k, 3, user="racer")

    full_reads: list[int] = []
    metas = ManifestFileMerger.manifests

    def counting(self, snap):
        full_reads.append(snap.id)
        return metas(self, snap)

    calls = _race(monkeypatch, racing)
    monkeypatch.setattr(ManifestFileMerger, "manifests", counting)
    result = table.merge_manifests()
    assert result.merged
    assert result.attempts == 3
    assert calls == [1, 3, 4]  # the merged manifest, then the racers' manifests behind it
    assert len(full_reads) == 1  # the initial plan only
    assert result.manifests_after == 4
    expected = sorted([*range(50), *range(500, 503), *range(501, 504), *range(510, 513)])
    assert sorted_ids(table.to_arrow()) == expected
    assert _metas(table)[1] == []


def test_lost_race_after_a_rollback_reads_the_latest_list(make_table, monkeypatch):
    """A planned-on snapshot replaced by a rollback and a new commit: plan again."""
    table = make_table()
    _append_many(table, 5)

    def racing(n):
        if n == 0:
            latest = table.latest_snapshot().id
            table.rollback_to(latest - 1)
            append(table, 500, 3, user="racer")  # a new snapshot-<latest>
            append(table, 600, 3, user="racer")  # takes latest + 1

    _race(monkeypatch, racing)
    result = table.merge_manifests()
    assert result.merged
    assert result.attempts == 2
    # rows 40..49 were rolled back; the merge must not resurrect them
    expected = sorted([*range(40), *range(500, 503), *range(600, 603)])
    assert sorted_ids(table.to_arrow()) == expected


def test_lost_race_to_another_merge_replans(make_table, monkeypatch):
    table = make_table()
    _append_many(table, 5)
    state = {"raced": False}

    def racing(n):
        if not state["raced"]:
            state["raced"] = True
            table.merge_manifests()  # another maintainer merges first

    _race(monkeypatch, racing)
    result = table.merge_manifests()
    # the other merge already merged everything: nothing left to do, our files discarded
    assert not result.merged
    assert sorted_ids(table.to_arrow()) == list(range(50))
    live = {s.path.rsplit("/", 1)[-1] for s in table.file_io.list_files(table.paths.manifest_dir)}
    for s in table.snapshots():
        b, d = _metas(table, s)
        live -= {s.base_manifest_list, s.delta_manifest_list, *(m.file_name for m in b + d)}
    assert live == set()


def test_exhausted_retries_clean_up(make_table, monkeypatch):
    table = make_table({"commit.max-retries": "1", "commit.min-retry-wait": "1 ms"})
    _append_many(table, 5)
    monkeypatch.setattr(SnapshotCommit, "try_commit_once", lambda *a, **k: None)
    before = {s.path for s in table.file_io.list_files(table.paths.manifest_dir)}
    with pytest.raises(CommitRetriesExhaustedError):
        table.merge_manifests()
    assert {s.path for s in table.file_io.list_files(table.paths.manifest_dir)} == before


def test_empty_table(make_table):
    table = make_table()
    assert not table.merge_manifests().merged


def test_options_given_replace_the_tables(make_table):
    table = make_table({"manifest.merge-min-count": "100"})
    _append_many(table, 4)
    commit = maintenance_committer(table)
    assert not ManifestFileMerger(commit=commit).execute().merged  # None: the table's 100
    low = CoreOptions({**table.options, "manifest.merge-min-count": "4"})
    result = ManifestFileMerger(commit=commit, options=low).execute()
    assert result.merged and not result.full_compaction
    assert (result.manifests_before, result.manifests_after) == (4, 1)
    assert sorted_ids(table.to_arrow()) == list(range(40))
