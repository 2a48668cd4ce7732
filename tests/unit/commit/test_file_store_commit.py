"""FileStoreCommit: dedup, conflicts, races, fault injection (in-memory and local)."""

from __future__ import annotations

import pytest
from tests.helpers import create_table, rows, sorted_ids

import snaplake
from snaplake.commit.file_store_commit import FileStoreCommit
from snaplake.commit.message import CommitMessage, CompactIncrement
from snaplake.commit.retry import RetryPolicy
from snaplake.errors import (
    CommitConflictError,
    CommitRetriesExhaustedError,
    CommitStateUnknownError,
    StorageError,
)
from snaplake.store.io.memory_file_io import InMemoryFileIO

_counter = iter(range(10**9))


@pytest.fixture
def table():
    return create_table(f"memory://t{next(_counter)}", partition_keys=["month"])


def _messages(table, data, user="u"):
    write = table.new_write(commit_user=user)
    write.write_arrow(data)
    return write.prepare_commit()


def _committer(table, user="u", **kw):
    return FileStoreCommit(table, commit_user=user, sleep=lambda s: None, **kw)


def _manifest_files(table):
    return sorted(s.path for s in table.file_io.list_files(table.paths.manifest_dir))


def test_replayed_identifier_is_a_duplicate_and_writes_nothing(table):
    c = _committer(table)
    first = c.commit(_messages(table, rows(0, 10)), commit_identifier=5)
    before = _manifest_files(table)
    again = c.commit(_messages(table, rows(0, 10)), commit_identifier=5)
    assert again.was_duplicate and again.snapshot_id == first.snapshot_id
    older = _committer(table).commit(_messages(table, rows(0, 10)), commit_identifier=3)
    assert older.was_duplicate
    assert _manifest_files(table) == before
    assert table.to_arrow().num_rows == 10


def test_dedup_survives_other_users_commits(table):
    a, b = _committer(table, "a"), _committer(table, "b")
    a.commit(_messages(table, rows(0, 10)), commit_identifier=1)
    for i in range(5):
        b.commit(_messages(table, rows(100 + i, 1)), commit_identifier=i)
    fresh_a = _committer(table, "a")  # a restarted process: no local state
    assert fresh_a.commit(_messages(table, rows(0, 10)), commit_identifier=1).was_duplicate
    assert not fresh_a.commit(_messages(table, rows(50, 1)), commit_identifier=2).was_duplicate
    assert table.latest_snapshot().txn_map() == {"a": 2, "b": 4}


def test_dedup_falls_back_to_backward_scan_without_txn_map(table):
    """A snapshot without snaplake's txn map (e.g. a Java or pypaimon commit) in between."""
    import dataclasses

    c = _committer(table, "a")
    c.commit(_messages(table, rows(0, 10)), commit_identifier=1)
    _committer(table, "other").commit(_messages(table, rows(10, 1)), commit_identifier=1)
    latest = table.latest_snapshot()
    foreign = dataclasses.replace(latest, id=latest.id + 1, properties=None, commit_user="java")
    table.file_io.write_if_absent(table.paths.snapshot_path(foreign.id), foreign.to_bytes())
    assert c.txn_map(table.latest_snapshot()) == {"a": 1, "other": 1, "java": 1}
    assert (
        _committer(table, "a")
        .commit(_messages(table, rows(0, 10)), commit_identifier=1)
        .was_duplicate
    )


def test_batch_commits_without_identifier_never_dedup(table):
    c = _committer(table)
    c.commit(_messages(table, rows(0, 5)))
    c.commit(_messages(table, rows(5, 5)))
    assert table.to_arrow().num_rows == 10


def _compact_message(split):
    return CommitMessage(
        partition=split.partition, bucket=split.bucket, total_buckets=split.total_buckets,
        compact_increment=CompactIncrement(compact_before=split.files),
    )  # fmt: skip


def test_two_commits_deleting_the_same_file_one_wins(table):
    _committer(table).commit(_messages(table, rows(0, 30)), commit_identifier=1)
    split = table.new_scan(partition_filter={"month": 1}).plan()[0]
    msg = _compact_message(split)
    first = _committer(table, "c1").commit([msg], kind=snaplake.CommitKind.COMPACT)
    assert first.files_deleted == 1
    with pytest.raises(CommitConflictError) as err:
        _committer(table, "c2").commit([msg], kind=snaplake.CommitKind.COMPACT)
    assert split.files[0].file_name in err.value.paths
    assert err.value.conflicting_snapshot_ids == (first.snapshot_id,)
    assert table.to_arrow().num_rows == 20


def test_append_racing_overwrite_of_another_partition_both_succeed(table):
    _committer(table).commit(_messages(table, rows(0, 30)), commit_identifier=1)
    m1 = rows(100, 30).filter(pa_eq(rows(100, 30), "month", 1))
    over = _messages(table, m1, "o")
    app = _messages(table, rows(200, 3).filter(pa_eq(rows(200, 3), "month", 2)), "a")
    fio: InMemoryFileIO = table.file_io
    # The append lands between the overwrite's plan and its publish: the overwrite loses
    # the race for snapshot 2 once and retries on top of the append.
    committed = []

    def land_append(path):
        committed.append(_committer(table, "a").commit(app, commit_identifier=1))
        return FileExistsError  # not raised; we only need the side effect

    fio.inject_fault("write_if_absent", path_contains="snapshot-2", error=_side_effect(land_append))
    result = _committer(table, "o").commit(over, overwrite={"month": 1})
    assert committed and result.attempts == 2
    got = table.to_arrow()
    assert sorted(got.filter(pa_eq(got, "month", 1)).column("id").to_pylist()) == sorted(
        m1.column("id").to_pylist()
    )
    assert got.filter(pa_eq(got, "month", 2)).num_rows == 10 + 1


def pa_eq(t, col, v):
    import pyarrow.compute as pc

    return pc.equal(t.column(col), v)


def _side_effect(fn):
    """An 'error' factory that performs ``fn`` and then reports the lost race."""
    from snaplake.errors import FileAlreadyExistsError

    def make(path):
        fn(path)
        return FileAlreadyExistsError("lost", path=path, operation="write_if_absent")

    return make


def test_lost_races_exhaust_retries_and_clean_up(table):
    _committer(table).commit(_messages(table, rows(0, 3)), commit_identifier=1)
    before = _manifest_files(table)
    from snaplake.errors import FileAlreadyExistsError

    for n in range(1, 4):
        table.file_io.inject_fault(
            "write_if_absent", path_contains="snapshot-2", nth=n,
            error=lambda p: FileAlreadyExistsError("x", path=p, operation="w"),
        )  # fmt: skip
    c = _committer(table, retry_policy=RetryPolicy(max_retries=2))
    with pytest.raises(CommitRetriesExhaustedError) as err:
        c.commit(_messages(table, rows(10, 3)), commit_identifier=2)
    assert err.value.attempts == 3 and err.value.retryable
    assert _manifest_files(table) == before  # lists and the delta manifest were deleted
    assert table.latest_snapshot().id == 1


def test_uncertain_publish_that_landed_is_resolved_by_reading_back(table):
    table.file_io.inject_fault(
        "write_if_absent", path_contains="snapshot-1", after=True,
        error=lambda p: StorageError("timeout after send", path=p, operation="write_if_absent"),
    )  # fmt: skip
    result = _committer(table).commit(_messages(table, rows(0, 3)), commit_identifier=1)
    assert result.snapshot_id == 1 and result.attempts == 1
    assert table.to_arrow().num_rows == 3


def test_uncertain_publish_that_did_not_land_is_retried(table):
    table.file_io.inject_fault(
        "write_if_absent", path_contains="snapshot-1",
        error=lambda p: StorageError("503 before write", path=p, operation="write_if_absent"),
    )  # fmt: skip
    result = _committer(table).commit(_messages(table, rows(0, 3)), commit_identifier=1)
    assert result.snapshot_id == 1
    assert table.to_arrow().num_rows == 3


def test_unresolvable_publish_raises_state_unknown_and_keeps_everything(table):
    for n in range(1, 10):
        table.file_io.inject_fault(
            "write_if_absent", path_contains="snapshot-1", nth=n,
            error=lambda p: StorageError("down", path=p, operation="write_if_absent"),
        )  # fmt: skip
    msgs = _messages(table, rows(0, 3))
    with pytest.raises(CommitStateUnknownError) as err:
        _committer(table).commit(msgs, commit_identifier=9)
    assert err.value.commit_identifier == 9
    assert len(_manifest_files(table)) == 3  # delta manifest + two lists left in place
    assert table.latest_snapshot() is None
    # A retry with the same identifier lands exactly once.
    assert not _committer(table).commit(msgs, commit_identifier=9).was_duplicate
    assert _committer(table).commit(msgs, commit_identifier=9).was_duplicate
    assert table.to_arrow().num_rows == 3


def test_failed_manifest_list_write_leaves_no_visible_snapshot(table):
    table.file_io.inject_fault("write_if_absent", path_contains="manifest-list", nth=2)
    with pytest.raises(OSError, match="injected"):
        _committer(table).commit(_messages(table, rows(0, 3)), commit_identifier=1)
    assert table.latest_snapshot() is None
    assert table.to_arrow().num_rows == 0


def test_duplicate_files_in_one_commit_are_refused(table):
    msgs = _messages(table, rows(0, 3))
    with pytest.raises(CommitConflictError, match="twice"):
        _committer(table).commit(msgs + msgs, commit_identifier=1)


def test_latest_hint_is_advisory(table):
    c = _committer(table)
    for i in range(3):
        c.commit(_messages(table, rows(i * 10, 10)), commit_identifier=i)
    table.file_io.write_bytes(table.paths.latest_hint_path, b"1", overwrite=True)
    assert table.latest_snapshot().id == 3
    table.file_io.write_bytes(table.paths.latest_hint_path, b"garbage", overwrite=True)
    assert table.latest_snapshot().id == 3
    table.file_io.delete(table.paths.latest_hint_path)
    assert table.latest_snapshot().id == 3
    assert sorted_ids(table.to_arrow()) == list(range(30))


def test_base_list_reuse_across_committers(table):
    """A second committer rebuilds the base list from storage; results are identical."""
    a, b = _committer(table, "a"), _committer(table, "b")
    for i in range(6):
        (a if i % 2 else b).commit(_messages(table, rows(i * 10, 10)), commit_identifier=i)
    scan_ids = sorted_ids(table.to_arrow())
    assert scan_ids == list(range(60))
    assert len(table.new_scan().plan()) == 3


def test_latest_expired_during_the_attempt_is_a_lost_race(table):
    """Expiry removed the lists of the snapshot we built on: re-read latest and retry."""
    _committer(table, "a").commit(_messages(table, rows(0, 3)), commit_identifier=1)
    later = _messages(table, rows(20, 3), user="c")

    def expired(path):
        # Another writer commits snapshot 2, then expiry deletes snapshot 1's lists.
        _committer(table, "c").commit(later, commit_identifier=1)
        return FileNotFoundError(path)

    table.file_io.inject_fault("read", path_contains="manifest-list", error=expired)
    result = _committer(table, "b").commit(_messages(table, rows(10, 3)), commit_identifier=1)
    assert result.attempts == 2 and result.snapshot_id == 3
    assert table.to_arrow().num_rows == 9


# ---------------------------------------------------------------- duplicates (issue 10, item 10)
def _data_paths(table, messages):
    out = []
    for m in messages:
        part = table.schema().partition_path_of(m.partition)
        out += [table.paths.data_file_path(part, m.bucket, f.file_name) for f in m.added_files()]
    return out


def test_duplicate_names_the_snapshot_holding_the_identifier(table):
    c = _committer(table)
    first = c.commit(_messages(table, rows(0, 10)), commit_identifier=1)
    second = c.commit(_messages(table, rows(10, 10)), commit_identifier=2)
    assert (
        c.commit(_messages(table, rows(0, 10)), commit_identifier=1).snapshot_id
        == first.snapshot_id
    )
    assert c.commit(_messages(table, rows(10, 10)), commit_identifier=2).snapshot_id == (
        second.snapshot_id
    )


def test_duplicate_deletes_its_unreferenced_data_files(table):
    c = _committer(table)
    c.commit(_messages(table, rows(0, 10)), commit_identifier=1)
    replay = _messages(table, rows(0, 10))
    paths = _data_paths(table, replay)
    assert all(table.file_io.exists(p) for p in paths)
    assert c.commit(replay, commit_identifier=1).was_duplicate
    assert not any(table.file_io.exists(p) for p in paths)
    assert sorted_ids(table.to_arrow()) == list(range(10))


def test_duplicate_keeps_the_files_a_snapshot_references(table):
    """A replay of the very messages that landed (e.g. after an unknown outcome) deletes nothing,
    also when a compaction has since removed them from the latest snapshot."""
    c = _committer(table)
    landed = _messages(table, rows(0, 30))
    first = c.commit(landed, commit_identifier=1)
    split = table.new_scan(partition_filter={"month": 1}).plan()[0]
    _committer(table, "compactor").commit(
        [_compact_message(split)], kind=snaplake.CommitKind.COMPACT
    )
    assert c.commit(landed, commit_identifier=1).was_duplicate
    assert all(table.file_io.exists(p) for p in _data_paths(table, landed))
    assert sorted_ids(table.to_arrow(snapshot_id=first.snapshot_id)) == list(range(30))


def test_lower_identifier_counts_as_committed(table, caplog):
    """Paimon's rule: identifiers below the user's highest are committed; found ones are named,
    missing ones are dropped with a warning."""
    c = _committer(table)
    three = c.commit(_messages(table, rows(0, 3)), commit_identifier=3)
    c.commit(_messages(table, rows(3, 3)), commit_identifier=5)
    with caplog.at_level("WARNING", logger="snaplake.commit.duplicate"):
        found = c.commit(_messages(table, rows(0, 3)), commit_identifier=3)
        assert not caplog.records
        missing = c.commit(_messages(table, rows(100, 3)), commit_identifier=4)
    assert found.was_duplicate and found.snapshot_id == three.snapshot_id
    assert missing.was_duplicate and missing.snapshot_id is None
    [record] = caplog.records
    assert "identifier 4" in record.getMessage() and "treated as committed" in record.getMessage()
    assert sorted_ids(table.to_arrow()) == list(range(6))
